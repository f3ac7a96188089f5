// The CustomResourceDefinitions of the Flux controllers at the versions the
// current flux2 release (v2.9.5) pins, from each controller's config/crd
// (see `share`): the real tier installs them on its API server. With them,
// flux-operator's (v0.58.0, the version tools/realenv/flux-operator pins):
// the Flux oracle's apply step serves ResourceSets. Nothing is compiled.
module bootstrap.test/realenv/flux-crds

go 1.26.0

require (
	github.com/controlplaneio-fluxcd/flux-operator v0.58.0
	github.com/fluxcd/helm-controller v1.6.4
	github.com/fluxcd/kustomize-controller v1.9.5
	github.com/fluxcd/source-controller v1.9.5
)
