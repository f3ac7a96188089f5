// The values helm-controller gives helm for each HelmRelease
// (docs/design.md#flux-oracle): fluxcd/pkg chartutil
// ChartValuesFromReferences, which helm-controller v1.6.4 calls with
// spec.values and spec.valuesFrom, over the ConfigMaps and Secrets the
// tree applies (those of a build Flux fails, of a stage the API server
// refuses, or that the apply skips are not in the cluster).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/chartutil"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The reason of a values reference error, as the comparison names it.
var composeReasons = []struct {
	reason error
	name   string
}{
	{chartutil.ErrResourceNotFound, "not-found"},
	{chartutil.ErrKeyNotFound, "key-not-found"},
	{chartutil.ErrUnsupportedRefKind, "kind"},
	{chartutil.ErrValuesDataRead, "values-read"},
	{chartutil.ErrValueMerge, "target-path"},
}

func objectKey(o map[string]any) string {
	u := unstructured.Unstructured{Object: o}
	return strings.Join([]string{u.GroupVersionKind().Group, u.GetKind(), u.GetNamespace(), u.GetName()}, "/")
}

func outKey(o objectOut) string {
	group := ""
	if i := strings.LastIndex(o.APIVersion, "/"); i >= 0 {
		group = o.APIVersion[:i]
	}
	ns := ""
	if o.Namespace != nil {
		ns = *o.Namespace
	}
	return strings.Join([]string{group, o.Kind, ns, o.Name}, "/")
}

// compose sets each HelmRelease's composed values (or the reason they
// cannot be composed), once every build is done.
func (w *walker) compose() {
	absent := map[string]bool{}
	for _, b := range w.builds {
		if b.Apply == nil {
			continue
		}
		for _, o := range append(append([]objectOut{}, b.Apply.NotApplied...), b.Apply.Skipped...) {
			absent[outKey(o)] = true
		}
	}
	kept := w.applied[:0:0]
	for _, o := range w.applied {
		if !absent[objectKey(o)] {
			kept = append(kept, o)
		}
	}
	all := w.applied
	w.applied = kept
	c, err := w.client()
	w.applied = all
	if err != nil {
		return
	}
	for i := range w.builds {
		for j := range w.builds[i].HelmReleases {
			hr := &w.builds[i].HelmReleases[j]
			// spec.values and spec.valuesFrom as helm-controller reads them
			// (HelmRelease.GetValues, meta.ValuesReference); the rest of the
			// object may not be typed (a field the API server refuses).
			u := unstructured.Unstructured{Object: hr.object}
			values := map[string]any{}
			if v, ok, _ := unstructured.NestedFieldNoCopy(hr.object, "spec", "values"); ok && v != nil {
				data, _ := json.Marshal(v)
				if json.Unmarshal(data, &values) != nil {
					reason := "spec-values"
					hr.ComposeError = &reason
					continue
				}
			}
			var refs []meta.ValuesReference
			if v, ok, _ := unstructured.NestedFieldNoCopy(hr.object, "spec", "valuesFrom"); ok && v != nil {
				data, _ := json.Marshal(v)
				if err := json.Unmarshal(data, &refs); err != nil {
					reason := "unknown: " + err.Error()
					hr.ComposeError = &reason
					continue
				}
			}
			composed, err := chartutil.ChartValuesFromReferences(context.Background(), logr.Discard(), c,
				u.GetNamespace(), values, refs...)
			if err != nil {
				reason := "unknown: " + err.Error()
				for _, r := range composeReasons {
					if errors.Is(err, r.reason) {
						reason = r.name
					}
				}
				hr.ComposeError = &reason
				continue
			}
			if b, err := json.Marshal(composed); err == nil {
				hr.Composed = b
			}
		}
	}
}
