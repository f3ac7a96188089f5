// Cilium at the version the corpus setups pin (1.20.1), for the corpus
// journey (tests/it/corpus_applied.rs): its Helm chart as released
// (install/kubernetes/cilium, Chart.yaml 1.20.1) and the CRDs that
// cilium-operator registers when it starts (pkg/k8s/apis/cilium.io/client/crds),
// see `share`. Nothing is compiled.
module bootstrap.test/realenv/cilium

go 1.26.0

require github.com/cilium/cilium v1.20.1
