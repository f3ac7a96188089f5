// The apply step (docs/design.md#flux-oracle): each build, as the oracle
// built it, is applied to a real API server the way kustomize-controller's
// `apply` (and flux-operator's ResourceSet controller) does, with fluxcd/pkg
// `ssa` itself: SetOwnerLabels, the Kustomization's spec.commonMetadata,
// normalize.UnstructuredList, the apply options (exclusion selector, custom
// stage kinds), and ApplyAllStaged's stages, each through
// ResourceManager.ApplyAll. The client is controller-runtime's dry-run client
// (every write is `dryRun=All`), so one API server answers every tree and
// nothing a tree applies is left for the next: ApplyAllStaged's waits for a
// stage's objects are not run (nothing is created), and a namespace the
// objects name is created first (`check` takes the cluster's namespaces as
// given, as a cluster that reconciles the tree has them).
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/normalize"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// applyOut is what the staged apply of one build gives: the stage the API
// server refuses (nil when every stage is applied), the dry-run error of
// every object of that stage that fails (ApplyAll reports whichever its
// concurrent dry-runs meet first; each is one Flux may print), and the
// objects of that stage and of every later one; and the objects the apply
// skips (its exclusion selector: `kustomize.toolkit.fluxcd.io/reconcile:
// disabled`, `kustomize.toolkit.fluxcd.io/ssa: Ignore`), which are in the
// build and never in the cluster.
type applyOut struct {
	Stage      *int        `json:"stage"`
	Errors     []string    `json:"errors"`
	NotApplied []objectOut `json:"notApplied"`
	Skipped    []objectOut `json:"skipped"`
	// Why the apply is not done: a SOPS-encrypted Secret, which
	// kustomize-controller decrypts with keys the oracle does not have (or,
	// without spec.decryption, refuses before applying anything).
	Unknown *string `json:"unknown,omitempty"`
}

func outOf(o *unstructured.Unstructured) objectOut {
	return objectOut{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: nonEmpty(o.GetNamespace()), Name: o.GetName()}
}

// applier holds the clients of one API server.
type applier struct {
	kube       client.Client
	dryRun     client.Client
	namespaces map[string]bool
}

var appliers = map[string]*applier{}

// applierFor is the applier of a kubeconfig's current context, made once.
func applierFor(kubeconfig string) (*applier, error) {
	if a, ok := appliers[kubeconfig]; ok {
		return a, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	// The oracle is the API server's only client: no client-side throttling.
	cfg.QPS, cfg.Burst = 1000, 2000
	kube, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	a := &applier{kube: kube, dryRun: client.NewDryRunClient(kube), namespaces: map[string]bool{}}
	appliers[kubeconfig] = a
	return a, nil
}

// objectsOf turns a build's objects into unstructured ones, as
// kustomize-controller reads its build (ssautil.ReadObjects).
func objectsOf(objects []map[string]any) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range objects {
		data, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// ensureNamespaces creates each namespace the objects name (once; a name
// the API server refuses is left to the apply, which then fails on it).
func (a *applier) ensureNamespaces(ctx context.Context, objects []*unstructured.Unstructured) {
	for _, o := range objects {
		ns := o.GetNamespace()
		if ns == "" || a.namespaces[ns] {
			continue
		}
		a.namespaces[ns] = true
		_ = a.kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
}

// kustomization applies a build as kustomize-controller's `apply` does for
// the Kustomization ks (nil: the entrypoint's, flux-system/flux-system).
func (a *applier) kustomization(objects []map[string]any, ks *unstructured.Unstructured) *applyOut {
	name, namespace := "flux-system", "flux-system"
	if ks != nil {
		name, namespace = ks.GetName(), ks.GetNamespace()
	}
	opts := ssa.DefaultApplyOptions()
	if ks != nil {
		opts.Force, _, _ = unstructured.NestedBool(ks.Object, "spec", "force")
	}
	opts.ExclusionSelector = map[string]string{
		"kustomize.toolkit.fluxcd.io/reconcile": "disabled",
		"kustomize.toolkit.fluxcd.io/ssa":       "Ignore",
	}
	opts.IfNotPresentSelector = map[string]string{"kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent"}
	opts.ForceSelector = map[string]string{"kustomize.toolkit.fluxcd.io/force": "enabled"}
	owner := ssa.Owner{Field: "kustomize-controller", Group: "kustomize.toolkit.fluxcd.io"}
	return a.apply(objects, ks, name, namespace, owner, opts)
}

// resourceSet applies a ResourceSet's objects as flux-operator's
// ResourceSet controller does (one step: the generated trees have no
// dependsOn between their resources).
func (a *applier) resourceSet(objects []map[string]any, rs *unstructured.Unstructured) *applyOut {
	opts := ssa.DefaultApplyOptions()
	opts.ForceSelector = map[string]string{"fluxcd.controlplane.io/force": "enabled"}
	opts.CustomStageKinds = map[schema.GroupKind]struct{}{
		{Group: "rbac.authorization.k8s.io", Kind: "Role"}: {},
	}
	owner := ssa.Owner{Field: "flux-operator", Group: "resourceset.fluxcd.controlplane.io"}
	return a.apply(objects, rs, rs.GetName(), rs.GetNamespace(), owner, opts)
}

func (a *applier) apply(objects []map[string]any, by *unstructured.Unstructured, name, namespace string,
	owner ssa.Owner, opts ssa.ApplyOptions) *applyOut {
	out := &applyOut{Errors: []string{}, NotApplied: []objectOut{}, Skipped: []objectOut{}}
	objs, err := objectsOf(objects)
	if err != nil {
		out.Errors = append(out.Errors, err.Error())
		return out
	}
	for _, o := range objs {
		if _, sops := o.Object["sops"]; sops && o.GetKind() == "Secret" && o.GroupVersionKind().Group == "" {
			why := fmt.Sprintf("%s is SOPS-encrypted", ssautil.FmtUnstructured(o))
			out.Unknown = &why
			return out
		}
	}
	ctx := context.Background()
	manager := ssa.NewResourceManager(a.dryRun, nil, owner)
	manager.SetOwnerLabels(objs, name, namespace)
	if by != nil {
		labels, _, _ := unstructured.NestedStringMap(by.Object, "spec", "commonMetadata", "labels")
		annotations, _, _ := unstructured.NestedStringMap(by.Object, "spec", "commonMetadata", "annotations")
		if labels != nil || annotations != nil {
			ssautil.SetCommonMetadata(objs, labels, annotations)
		}
	}
	if err := normalize.UnstructuredList(objs); err != nil {
		out.Errors = append(out.Errors, err.Error())
		return out
	}
	a.ensureNamespaces(ctx, objs)
	for _, o := range objs {
		if ssautil.AnyInMetadata(o, opts.ExclusionSelector) {
			out.Skipped = append(out.Skipped, outOf(o))
		}
	}
	stages := stagesOf(objs, opts)
	for i, stage := range stages {
		if len(stage) == 0 {
			continue
		}
		if _, err := manager.ApplyAll(ctx, copies(stage), opts); err == nil {
			continue
		}
		n := i
		out.Stage = &n
		// Every object of the stage that fails, each dry-run alone.
		for _, o := range stage {
			if _, err := manager.ApplyAll(ctx, copies([]*unstructured.Unstructured{o}), opts); err != nil {
				out.Errors = append(out.Errors, err.Error())
			}
		}
		if len(out.Errors) == 0 {
			out.Errors = append(out.Errors, "the stage fails, none of its objects alone")
		}
		for _, later := range stages[i:] {
			for _, o := range later {
				if !ssautil.AnyInMetadata(o, opts.ExclusionSelector) {
					out.NotApplied = append(out.NotApplied, outOf(o))
				}
			}
		}
		return out
	}
	return out
}

// stagesOf splits the objects as ApplyAllStaged does: cluster definitions,
// class definitions, the custom stage kinds, the rest.
func stagesOf(objects []*unstructured.Unstructured, opts ssa.ApplyOptions) [4][]*unstructured.Unstructured {
	var stages [4][]*unstructured.Unstructured
	for _, o := range objects {
		switch {
		case ssautil.IsClusterDefinition(o):
			stages[0] = append(stages[0], o)
		case ssautil.IsClassDefinition(o):
			stages[1] = append(stages[1], o)
		case ssautil.IsCustomStage(o, opts.CustomStageKinds):
			stages[2] = append(stages[2], o)
		default:
			stages[3] = append(stages[3], o)
		}
	}
	return stages
}

// copies are deep copies: an apply through the dry-run client writes the
// API server's answer into the object it is given.
func copies(objects []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objects))
	for i, o := range objects {
		out[i] = o.DeepCopy()
	}
	return out
}
