# Development tasks (https://github.com/casey/just); each is one plain command,
# so they work without `just` too.

# What CI runs: fmt, clippy with warnings denied, the tests, the quick benchmarks.
ci:
    bash .ci/run

test:
    cargo test --workspace

lint:
    cargo fmt --all -- --check
    cargo clippy --all-targets --workspace -- -D warnings

bench:
    cargo bench --bench bootstrap

# The end-to-end suite against a real kind cluster (needs kind, docker, helm, kubectl, network).
e2e:
    BOOTSTRAP_E2E=1 cargo test --test it e2e_kind:: -- --nocapture

# bootstrap against the real Helm v4 engine (helm-python-sdk in .venv-helm; README: Development).
real-helm:
    cargo test --test it real_helm::

# Builds the real test environment (kube-apiserver and controllers, kwok, helm 3
# and 4, from pinned Go modules; cached) and runs the real tier against it
# (README: Development, docs/design.md#real-environment).
real-env:
    tools/realenv/build
    cargo test --test it real_cluster::

plan cluster="infra":
    cargo run -- plan {{cluster}}
