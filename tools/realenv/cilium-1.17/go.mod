// Cilium at the version jfroy/flatops pins (1.17.1), as `../cilium` is at
// the other corpus setups' 1.20.1 (a module holds one version of a module):
// its Helm chart as released and the CRDs cilium-operator registers, see
// `share`. Nothing is compiled.
module bootstrap.test/realenv/cilium-1.17

go 1.26.0

require github.com/cilium/cilium v1.17.1
