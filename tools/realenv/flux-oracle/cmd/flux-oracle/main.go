// Command flux-oracle resolves a GitOps tree with Flux's own code and prints,
// as JSON, what each build applies: the test oracle `bootstrap check` is
// compared with (docs/design.md#flux-oracle).
//
//	flux-oracle [-flux-operator CLI] -root DIR -entrypoint PATH
//	flux-oracle [-flux-operator CLI] -serve
//
// With -serve it reads one request a line on stdin, {"root": DIR,
// "entrypoint": PATH}, and answers each with one line on stdout, {"builds":
// [...]} or {"error": "..."}: one process resolves any number of trees (the
// generated trees of the differential tests), instead of one Go process per
// tree.
//
// The artifact is what source-controller archives (fluxcd/pkg
// sourceignore.LoadIgnorePatterns + the GitRepository's spec.ignore,
// artifact/storage.SourceIgnoreFilter and Storage.Archive, extracted with
// fluxcd/pkg/tar). Each build is kustomize-controller's: fluxcd/pkg/kustomize
// NewGenerator(...).WriteFile, SecureBuild, then SubstituteVariables on every
// resource when the Kustomization has a postBuild (not strict; the
// substituteFrom ConfigMaps and Secrets served from those the tree applied
// so far). HelmRelease identities are helm-controller's api/v2 methods.
//
// What is walked, and in which order, follows `check` (the entrypoint is the
// build of the Kustomization that reconciles it; Kustomizations reading the
// root GitRepository are followed breadth-first), so the two print the same
// builds. A ResourceSet is built by flux-operator's own CLI (`flux-operator
// build resourceset`, the builder the operator runs, given with
// -flux-operator), with the Static ResourceSetInputProviders the tree applied
// so far; without the CLI, or for inputs only the cluster has (another
// provider type, a label selector), it is reported as not expanded.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/artifact/storage"
	generator "github.com/fluxcd/pkg/kustomize"
	securefs "github.com/fluxcd/pkg/kustomize/filesys"
	"github.com/fluxcd/pkg/sourceignore"
	"github.com/fluxcd/pkg/tar"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/openapi"
	"sigs.k8s.io/yaml"
)

// The Kustomization fields that make the entrypoint's build differ from a
// plain kustomize build (as `check` has them).
var buildFields = []string{"targetNamespace", "namePrefix", "nameSuffix", "patches",
	"components", "patchesStrategicMerge", "patchesJson6902", "postBuild"}

const maxDeferrals = 3

type objectOut struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Namespace  *string `json:"namespace"`
	Name       string  `json:"name"`
}

type valuesRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

type helmReleaseOut struct {
	Namespace        *string         `json:"namespace"`
	Name             string          `json:"name"`
	ReleaseName      string          `json:"releaseName"`
	ReleaseNamespace *string         `json:"releaseNamespace"`
	StorageNamespace *string         `json:"storageNamespace"`
	Values           json.RawMessage `json:"values"`
	ValuesFrom       []valuesRef     `json:"valuesFrom"`
	// The values helm-controller composes (values.go), or why it cannot.
	Composed     json.RawMessage `json:"composed,omitempty"`
	ComposeError *string         `json:"composeError,omitempty"`
	object       map[string]any
}

type buildOut struct {
	By           *string          `json:"by"`
	Path         string           `json:"path"`
	Error        *string          `json:"error"`
	Unsupported  *string          `json:"unsupported,omitempty"`
	Objects      []objectOut      `json:"objects"`
	HelmReleases []helmReleaseOut `json:"helmReleases"`
	// With a kubeconfig in the request: the build's staged apply (apply.go).
	Apply *applyOut `json:"apply,omitempty"`
}

type pending struct {
	by        *string
	path      string // relative to the artifact root, cleaned
	ks        *unstructured.Unstructured
	deferrals int
}

type walker struct {
	operator string // flux-operator's CLI; "" when absent
	// A kustomization sets `openapi` or `crds` (see secureBuild).
	schemaFields bool
	artifact     string
	builds       []buildOut
	applied      []map[string]any // every object applied so far, first wins
	seen         map[string]bool
	started      map[string]bool
	queue        []pending
	rootGit      *[2]string // name, namespace
	entryPath    string
	applier      *applier // nil: no apply step
}

// fluxOperator is the flux-operator CLI that builds ResourceSets.
var fluxOperator string

func main() {
	root := flag.String("root", "", "the directory the root GitRepository points at")
	entry := flag.String("entrypoint", "", "the path the root Kustomization reconciles, relative to -root")
	serve := flag.Bool("serve", false, "answer one request a line on stdin")
	flag.StringVar(&fluxOperator, "flux-operator", "", "flux-operator's CLI, which builds ResourceSets")
	flag.Parse()
	if *serve {
		if err := serveRequests(os.Stdin, os.Stdout); err != nil {
			fail(err)
		}
		return
	}
	if *root == "" || *entry == "" {
		fmt.Fprintln(os.Stderr, "usage: flux-oracle [-flux-operator CLI] (-root DIR -entrypoint PATH | -serve)")
		os.Exit(2)
	}
	out, err := resolveDir(*root, *entry, "")
	if err != nil {
		fail(err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]any{"builds": out}); err != nil {
		fail(err)
	}
}

type request struct {
	Root       string `json:"root"`
	Entrypoint string `json:"entrypoint"`
	// When set, every build is also applied (dry-run) to this API server.
	Kubeconfig string `json:"kubeconfig"`
}

// serveRequests answers each request line with one response line.
func serveRequests(in *os.File, out *os.File) error {
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	for scanner.Scan() {
		var req request
		var resp map[string]any
		if err := json.Unmarshal(scanner.Bytes(), &req); err != nil {
			resp = map[string]any{"error": fmt.Sprintf("bad request: %v", err)}
		} else if builds, err := resolveDir(req.Root, req.Entrypoint, req.Kubeconfig); err != nil {
			resp = map[string]any{"error": err.Error()}
		} else {
			resp = map[string]any{"builds": builds}
		}
		if err := enc.Encode(resp); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return scanner.Err()
}

func resolveDir(root, entry, kubeconfig string) ([]buildOut, error) {
	if root == "" || entry == "" {
		return nil, fmt.Errorf("a request needs root and entrypoint")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	var a *applier
	if kubeconfig != "" {
		if a, err = applierFor(kubeconfig); err != nil {
			return nil, err
		}
	}
	return resolve(abs, entry, a)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "flux-oracle: %v\n", err)
	os.Exit(1)
}

// resolve walks the tree; when the root GitRepository has spec.ignore, the
// walk is done again over the artifact it leaves (as `check` does).
func resolve(root, entry string, a *applier) ([]buildOut, error) {
	w, err := walk(root, entry, nil, nil, a)
	if err != nil {
		return nil, err
	}
	if ignore := w.rootIgnore(); ignore != nil {
		return rewalk(root, entry, ignore, w, a)
	}
	w.compose()
	return w.builds, nil
}

func rewalk(root, entry string, ignore *string, first *walker, a *applier) ([]buildOut, error) {
	w, err := walk(root, entry, ignore, first.entryKs(), a)
	if err != nil {
		return nil, err
	}
	w.compose()
	return w.builds, nil
}

func walk(root, entry string, ignore *string, entryKs *unstructured.Unstructured, a *applier) (*walker, error) {
	art, cleanup, err := artifact(root, ignore)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	w := &walker{operator: fluxOperator, artifact: art, schemaFields: changesSchema(art), seen: map[string]bool{}, started: map[string]bool{},
		entryPath: clean(entry), applier: a}
	w.queue = append(w.queue, pending{path: w.entryPath, ks: entryKs})
	first := true
	for len(w.queue) > 0 {
		b := w.queue[0]
		w.queue = w.queue[1:]
		if b.by != nil {
			if w.started[*b.by] {
				continue
			}
			// Another GitRepository's content is not in this checkout.
			if src := gitSource(b.ks); w.rootGit != nil && src != nil && *src != *w.rootGit {
				continue
			}
			if len(w.queue) > 0 && b.deferrals < maxDeferrals && !w.sourcesFound(b.ks) {
				b.deferrals++
				w.queue = append(w.queue, b)
				continue
			}
			w.started[*b.by] = true
		}
		w.build(b)
		if first {
			first = false
			own := w.entryKs()
			if entryKs == nil && own != nil && hasBuildFields(own) {
				// The entrypoint is the build of the Kustomization that
				// reconciles it: with build fields of its own, again with them.
				return walk(root, entry, ignore, own, w.applier)
			}
			w.rootGit = w.pickRootSource()
			if ignore == nil && w.rootIgnore() != nil {
				return w, nil
			}
			// The Kustomizations that reconcile the entrypoint are the build just done.
			for _, p := range w.queue {
				if p.path == w.entryPath && p.by != nil {
					w.started[*p.by] = true
				}
			}
		}
	}
	return w, nil
}

// artifact archives root the way source-controller does and extracts it.
func artifact(root string, ignore *string) (string, func(), error) {
	tmp, err := os.MkdirTemp("", "flux-oracle-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	domain := strings.Split(root, string(filepath.Separator))
	ps, err := sourceignore.LoadIgnorePatterns(root, domain)
	if err != nil {
		cleanup()
		return "", nil, err
	}
	if ignore != nil {
		ps = append(ps, sourceignore.ReadPatterns(strings.NewReader(*ignore), domain)...)
	}
	st := storage.Storage{BasePath: filepath.Join(tmp, "storage")}
	art := meta.Artifact{Path: "gitrepository/flux-system/root/artifact.tar.gz"}
	if err := st.MkdirAll(art); err != nil {
		cleanup()
		return "", nil, err
	}
	if err := st.Archive(&art, root, storage.SourceIgnoreFilter(ps, domain)); err != nil {
		cleanup()
		return "", nil, err
	}
	f, err := os.Open(st.LocalPath(art))
	if err != nil {
		cleanup()
		return "", nil, err
	}
	defer f.Close()
	dir := filepath.Join(tmp, "source")
	if err := tar.Untar(f, dir, tar.WithMaxUntarSize(-1)); err != nil {
		cleanup()
		return "", nil, err
	}
	return dir, cleanup, nil
}

func clean(p string) string {
	c := filepath.Clean("/" + strings.TrimPrefix(p, "/"))
	return strings.TrimPrefix(c, "/")
}

func hasBuildFields(ks *unstructured.Unstructured) bool {
	spec, _ := ks.Object["spec"].(map[string]any)
	for _, f := range buildFields {
		if v, ok := spec[f]; ok && v != nil {
			return true
		}
	}
	return false
}

func isKind(obj map[string]any, group, kind string) bool {
	u := unstructured.Unstructured{Object: obj}
	return u.GetKind() == kind && u.GroupVersionKind().Group == group
}

func ksPath(ks *unstructured.Unstructured) string {
	p, _, _ := unstructured.NestedString(ks.Object, "spec", "path")
	if p == "" {
		p = "./"
	}
	return clean(p)
}

// gitSource is a Kustomization's GitRepository (name, namespace); nil for
// another kind of source.
func gitSource(ks *unstructured.Unstructured) *[2]string {
	kind, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "kind")
	if kind != "" && kind != "GitRepository" {
		return nil
	}
	name, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "name")
	ns, _, _ := unstructured.NestedString(ks.Object, "spec", "sourceRef", "namespace")
	if ns == "" {
		ns = ks.GetNamespace()
	}
	return &[2]string{name, ns}
}

func (w *walker) kustomizations() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range w.applied {
		if isKind(o, "kustomize.toolkit.fluxcd.io", "Kustomization") {
			out = append(out, &unstructured.Unstructured{Object: o})
		}
	}
	return out
}

// entryKs is the Kustomization that reconciles the entrypoint, with build fields.
func (w *walker) entryKs() *unstructured.Unstructured {
	for _, ks := range w.kustomizations() {
		if ksPath(ks) == w.entryPath && hasBuildFields(ks) {
			return ks.DeepCopy()
		}
	}
	return nil
}

func (w *walker) pickRootSource() *[2]string {
	kss := w.kustomizations()
	for _, ks := range kss {
		if ksPath(ks) == w.entryPath && gitSource(ks) != nil {
			return gitSource(ks)
		}
	}
	for _, ks := range kss {
		if s := gitSource(ks); s != nil {
			return s
		}
	}
	return nil
}

func (w *walker) rootIgnore() *string {
	if w.rootGit == nil {
		return nil
	}
	for _, o := range w.applied {
		u := unstructured.Unstructured{Object: o}
		if isKind(o, "source.toolkit.fluxcd.io", "GitRepository") &&
			u.GetName() == w.rootGit[0] && u.GetNamespace() == w.rootGit[1] {
			if s, ok, _ := unstructured.NestedString(o, "spec", "ignore"); ok {
				return &s
			}
		}
	}
	return nil
}

func (w *walker) sourcesFound(ks *unstructured.Unstructured) bool {
	refs, _, _ := unstructured.NestedSlice(ks.Object, "spec", "postBuild", "substituteFrom")
	for _, r := range refs {
		m, _ := r.(map[string]any)
		kind, _ := m["kind"].(string)
		name, _ := m["name"].(string)
		if w.find(kind, name, ks.GetNamespace()) == nil {
			return false
		}
	}
	return true
}

func (w *walker) find(kind, name, ns string) map[string]any {
	for _, o := range w.applied {
		u := unstructured.Unstructured{Object: o}
		if u.GetKind() == kind && u.GroupVersionKind().Group == "" && u.GetName() == name && u.GetNamespace() == ns {
			return o
		}
	}
	return nil
}

func (w *walker) findGroup(group, kind, name, ns string) map[string]any {
	for _, o := range w.applied {
		u := unstructured.Unstructured{Object: o}
		if u.GetKind() == kind && u.GroupVersionKind().Group == group && u.GetName() == name && u.GetNamespace() == ns {
			return o
		}
	}
	return nil
}

// client serves the ConfigMaps and Secrets applied so far.
func (w *walker) client() (client.Client, error) {
	var objs []runtime.Object
	for _, o := range w.applied {
		u := unstructured.Unstructured{Object: o}
		if u.GroupVersionKind().Group != "" || u.GetNamespace() == "" {
			continue
		}
		switch u.GetKind() {
		case "ConfigMap":
			var cm corev1.ConfigMap
			if runtime.DefaultUnstructuredConverter.FromUnstructured(o, &cm) == nil {
				objs = append(objs, &cm)
			}
		case "Secret":
			var s corev1.Secret
			if runtime.DefaultUnstructuredConverter.FromUnstructured(o, &s) == nil {
				// The API server folds stringData into data.
				if s.Data == nil {
					s.Data = map[string][]byte{}
				}
				for k, v := range s.StringData {
					s.Data[k] = []byte(v)
				}
				s.StringData = nil
				objs = append(objs, &s)
			}
		}
	}
	return fake.NewClientBuilder().WithRuntimeObjects(objs...).Build(), nil
}

func (w *walker) build(b pending) {
	out := buildOut{By: b.by, Path: b.path, Objects: []objectOut{}, HelmReleases: []helmReleaseOut{}}
	objects, err := w.kustomizeBuild(b)
	if err != nil {
		msg := err.Error()
		out.Error = &msg
		w.builds = append(w.builds, out)
		return
	}
	for _, o := range objects {
		u := unstructured.Unstructured{Object: o}
		out.Objects = append(out.Objects, objectOut{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(),
			Namespace: nonEmpty(u.GetNamespace()), Name: u.GetName()})
		if isKind(o, "helm.toolkit.fluxcd.io", "HelmRelease") {
			out.HelmReleases = append(out.HelmReleases, helmRelease(o))
		}
	}
	if w.applier != nil {
		out.Apply = w.applier.kustomization(objects, b.ks)
	}
	w.builds = append(w.builds, out)
	w.emit(objects, 0)
}

// emit records the objects a build applies (the first to apply one wins),
// then follows the Kustomizations and builds the ResourceSets among them,
// in `check`'s order.
func (w *walker) emit(objects []map[string]any, depth int) {
	var fresh []map[string]any
	for _, o := range objects {
		u := unstructured.Unstructured{Object: o}
		key := strings.Join([]string{u.GroupVersionKind().Group, u.GetKind(), u.GetNamespace(), u.GetName()}, "/")
		if w.seen[key] {
			continue
		}
		w.seen[key] = true
		w.applied = append(w.applied, o)
		fresh = append(fresh, o)
	}
	for _, o := range fresh {
		u := unstructured.Unstructured{Object: o}
		switch {
		case isKind(o, "kustomize.toolkit.fluxcd.io", "Kustomization"):
			w.schedule(&u)
		case isKind(o, "fluxcd.controlplane.io", "ResourceSet") && depth < 8:
			w.buildResourceSet(&u, depth)
		}
	}
}

// buildResourceSet is flux-operator's build of a ResourceSet.
func (w *walker) buildResourceSet(rs *unstructured.Unstructured, depth int) {
	by := fmt.Sprintf("ResourceSet/%s/%s", rs.GetNamespace(), rs.GetName())
	out := buildOut{By: &by, Path: "", Objects: []objectOut{}, HelmReleases: []helmReleaseOut{}}
	objects, why, err := w.resourceSetObjects(rs)
	switch {
	case why != "":
		out.Unsupported = &why
	case err != nil:
		msg := err.Error()
		out.Error = &msg
	default:
		for _, o := range objects {
			u := unstructured.Unstructured{Object: o}
			out.Objects = append(out.Objects, objectOut{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(),
				Namespace: nonEmpty(u.GetNamespace()), Name: u.GetName()})
			if isKind(o, "helm.toolkit.fluxcd.io", "HelmRelease") {
				out.HelmReleases = append(out.HelmReleases, helmRelease(o))
			}
		}
		if w.applier != nil {
			out.Apply = w.applier.resourceSet(objects, rs)
		}
	}
	w.builds = append(w.builds, out)
	if why == "" && err == nil {
		w.emit(objects, depth+1)
	}
}

// resourceSetObjects runs `flux-operator build resourceset` on rs, with the
// Static input providers applied so far. A non-empty reason says why it is
// not built here (no CLI, inputs only the cluster has).
func (w *walker) resourceSetObjects(rs *unstructured.Unstructured) ([]map[string]any, string, error) {
	if w.operator == "" {
		return nil, "ResourceSets are not expanded by this oracle (no -flux-operator)", nil
	}
	refs, _, _ := unstructured.NestedSlice(rs.Object, "spec", "inputsFrom")
	var providers []map[string]any
	for _, r := range refs {
		m, _ := r.(map[string]any)
		name, _ := m["name"].(string)
		if name == "" {
			return nil, "inputsFrom selects providers by label: the cluster's are not known", nil
		}
		p := w.findGroup("fluxcd.controlplane.io", "ResourceSetInputProvider", name, rs.GetNamespace())
		if p == nil {
			return nil, fmt.Sprintf("input provider %s is not in the tree", name), nil
		}
		if t, _, _ := unstructured.NestedString(p, "spec", "type"); t != "Static" {
			return nil, fmt.Sprintf("input provider %s has type %q: its inputs come from the cluster", name, t), nil
		}
		providers = append(providers, p)
	}
	tmp, err := os.MkdirTemp("", "flux-oracle-rset-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(tmp)
	file := filepath.Join(tmp, "resourceset.yaml")
	if err := writeYAML(file, []map[string]any{rs.Object}); err != nil {
		return nil, "", err
	}
	args := []string{"build", "resourceset", "-f", file}
	if len(providers) > 0 {
		pfile := filepath.Join(tmp, "providers.yaml")
		if err := writeYAML(pfile, providers); err != nil {
			return nil, "", err
		}
		args = append(args, "--inputs-from-provider", pfile)
	}
	cmd := exec.Command(w.operator, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String() + stdout.String())
		// The CLI refuses an empty result; the operator applies nothing.
		if strings.Contains(msg, "no objects were generated") {
			return nil, "", nil
		}
		return nil, "", fmt.Errorf("flux-operator build resourceset: %s", msg)
	}
	var objects []map[string]any
	for _, doc := range strings.Split(stdout.String(), "\n---\n") {
		doc = strings.TrimPrefix(strings.TrimSpace(doc), "---")
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, "", fmt.Errorf("reading flux-operator's output: %w", err)
		}
		if obj != nil {
			objects = append(objects, normalizeJSON(obj))
		}
	}
	return objects, "", nil
}

func writeYAML(path string, docs []map[string]any) error {
	var buf bytes.Buffer
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return err
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return os.WriteFile(path, buf.Bytes(), 0o600)
}

// normalizeJSON gives an object from YAML the number types JSON decoding
// with UseNumber gives (as the builds' objects have).
func normalizeJSON(obj map[string]any) map[string]any {
	data, err := json.Marshal(obj)
	if err != nil {
		return obj
	}
	var out map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if dec.Decode(&out) != nil {
		return obj
	}
	return out
}

func (w *walker) schedule(ks *unstructured.Unstructured) {
	if gitSource(ks) == nil {
		return
	}
	by := fmt.Sprintf("Kustomization/%s/%s", ks.GetNamespace(), ks.GetName())
	w.queue = append(w.queue, pending{by: &by, path: ksPath(ks), ks: ks.DeepCopy()})
}

// kustomizeBuild is kustomize-controller's build of one Kustomization.
func (w *walker) kustomizeBuild(b pending) ([]map[string]any, error) {
	dir := filepath.Join(w.artifact, b.path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("kustomization path not found: %s", b.path)
	}
	ks := b.ks
	if ks == nil {
		ks = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
			"metadata": map[string]any{"name": "entrypoint", "namespace": "flux-system"},
			"spec":     map[string]any{"path": b.path},
		}}
	}
	// The original kustomization file is put back after the build (as
	// CleanDirectory does with the saved copy): the next build of the same
	// path, by another Kustomization, must not see this one's fields.
	action, err := generator.NewGenerator(w.artifact, *ks).WriteFile(dir, generator.WithSaveOriginalKustomization())
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	defer generator.CleanDirectory(dir, action)
	m, err := w.secureBuild(dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build failed: %w", err)
	}
	_, hasPostBuild, _ := unstructured.NestedMap(ks.Object, "spec", "postBuild")
	var kube client.Client
	if hasPostBuild {
		if kube, err = w.client(); err != nil {
			return nil, err
		}
	}
	strategy, _, _ := unstructured.NestedString(ks.Object, "spec", "postBuild", "substituteStrategy")
	var out []map[string]any
	for _, res := range m.Resources() {
		if res.GetName() == "" || res.GetKind() == "" || res.GetApiVersion() == "" {
			return nil, fmt.Errorf("failed to decode Kubernetes apiVersion, kind and name from: %v", res.String())
		}
		if hasPostBuild {
			outRes, err := generator.SubstituteVariables(context.Background(), kube, *ks, res,
				generator.SubstituteWithStrict(false),
				generator.SubstituteWithAlways(strategy == "Always"))
			if err != nil {
				return nil, fmt.Errorf("post build failed for '%s/%s': %w", res.GetGvk(), res.GetName(), err)
			}
			if outRes != nil {
				if _, err := m.Replace(res); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, res := range m.Resources() {
		data, err := res.MarshalJSON()
		if err != nil {
			return nil, err
		}
		var obj map[string]any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&obj); err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

// secureBuild is fluxcd/pkg kustomize.SecureBuild (a secure on-disk file
// system rooted at the artifact, no load restrictions, builtin plugins
// only). SecureBuild parses kyaml's builtin OpenAPI schema again for every
// build, to undo what a kustomization's `openapi:` or `crds:` field adds to
// that global schema: three quarters of the oracle's time. When no
// kustomization file in the artifact has either field the schema never
// changes, so it is parsed once; otherwise SecureBuild itself runs.
func (w *walker) secureBuild(dir string) (res resmap.ResMap, err error) {
	if w.schemaFields {
		return generator.SecureBuild(w.artifact, dir, false)
	}
	fs, err := securefs.MakeFsOnDiskSecure(w.artifact)
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("recovered from kustomize build panic: %v", r)
		}
	}()
	_ = openapi.Schema()
	k := krusty.MakeKustomizer(&krusty.Options{
		LoadRestrictions: kustypes.LoadRestrictionsNone,
		PluginConfig:     kustypes.DisabledPluginConfig(),
	})
	return k.Run(fs, dir)
}

// changesSchema tells whether a kustomization file under root sets
// `openapi` or `crds`, the fields that change kyaml's global schema.
func changesSchema(root string) bool {
	found := false
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || found {
			return nil
		}
		switch d.Name() {
		case "kustomization.yaml", "kustomization.yml", "Kustomization":
		default:
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		var doc map[string]any
		if yaml.Unmarshal(data, &doc) != nil {
			// Unreadable: let SecureBuild itself judge it.
			found = true
			return nil
		}
		_, openAPI := doc["openapi"]
		_, crds := doc["crds"]
		found = openAPI || crds
		return nil
	})
	return found
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// shortenName is helm-controller's internal/release ShortenName, which it
// applies to every release name: over 53 bytes, the first 40, a dash and 12
// hex digits of the SHA-256 of the whole name.
func shortenName(name string) string {
	if len(name) <= 53 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:40] + "-" + hex.EncodeToString(sum[:])[:12]
}

func helmRelease(o map[string]any) helmReleaseOut {
	data, _ := json.Marshal(o)
	var hr helmv2.HelmRelease
	_ = json.Unmarshal(data, &hr)
	values := json.RawMessage("{}")
	if v, ok, _ := unstructured.NestedFieldNoCopy(o, "spec", "values"); ok && v != nil {
		if b, err := json.Marshal(v); err == nil {
			values = b
		}
	}
	refs := []valuesRef{}
	for _, r := range hr.Spec.ValuesFrom {
		refs = append(refs, valuesRef{Kind: r.Kind, Name: r.Name})
	}
	return helmReleaseOut{
		Namespace:        nonEmpty(hr.Namespace),
		Name:             hr.Name,
		ReleaseName:      shortenName(hr.GetReleaseName()),
		ReleaseNamespace: nonEmpty(hr.GetReleaseNamespace()),
		StorageNamespace: nonEmpty(hr.GetStorageNamespace()),
		Values:           values,
		ValuesFrom:       refs,
		object:           o,
	}
}
