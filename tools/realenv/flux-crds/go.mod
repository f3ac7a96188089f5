// The CustomResourceDefinitions of the Flux controllers at the versions the
// current flux2 release (v2.9.5) pins, from each controller's config/crd
// (see `share`): the real tier installs them on its API server. Nothing is
// compiled.
module bootstrap.test/realenv/flux-crds

go 1.26.0

require (
	github.com/fluxcd/helm-controller v1.6.4
	github.com/fluxcd/kustomize-controller v1.9.5
	github.com/fluxcd/source-controller v1.9.5
)
