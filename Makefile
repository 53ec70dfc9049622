# The README's two commands: `make run` and `make test`. Everything else here serves them.
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: run test crds fmt-check clippy testenv-script-test cargo-test testenv

## run: start a local control plane (and, as it lands, the operator); Ctrl-C stops everything
run:
	hack/run-local.sh

## test: everything CI checks: formatting, lints, CRD drift, unit and integration tests
test: fmt-check clippy testenv-script-test cargo-test

## crds: regenerate config/crd/crds.yaml from the Rust types (a test fails when it drifts)
crds:
	$(CARGO) run -q --bin oz-manager -- crds > config/crd/crds.yaml

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Builds (or reuses) the control plane binary before the tests ask for it, so its build time
# shows up as its own step.
testenv:
	hack/testenv.sh build >/dev/null

testenv-script-test: testenv
	hack/test-testenv-script.sh

cargo-test: testenv
	$(CARGO) test --workspace
