# The README's two commands: `make run` and `make test`. Everything else here serves them.
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: run run-fleet test image release bench crds manifests fmt-check clippy structure-check doc-check fuzz-check testenv-script-test cargo-test make-run-test make-run-fleet-test testenv

## run: start a local control plane with two kwok nodes, oz-manager and a demo; Ctrl-C stops everything
run:
	hack/run-local.sh

## run-fleet: an oz fleet on three local control planes: a hub where alice asks and dave approves,
##            spokes b (env=prod) and c (env=dev) with two kwok nodes each; prints the commands
##            that get alice an exec on b approved on the hub; Ctrl-C stops everything
run-fleet:
	hack/run-fleet.sh

## test: everything CI checks: formatting, lints, the layout (no import cycles, no file over 600 lines), CRD and install drift, unit and integration tests, and both make runs followed as they say
test: fmt-check clippy structure-check doc-check fuzz-check testenv-script-test cargo-test make-run-test make-run-fleet-test

## image: oz-manager in a minimal non-root image, built here with nothing pulled: static x86_64
##        (musl) binaries, assembled by buildah into target/image/oz.oci.tar, tagged oz:VERSION.
##        IMAGE_PROFILE=ci-image builds the same recipe optimised less (what CI tests). Needs
##        musl-tools and buildah (docs/development.md).
IMAGE_PROFILE ?= release
image:
	hack/image.sh $(IMAGE_PROFILE)

## release: everything a release ships, into target/release-artifacts/: the image, static ozctl,
##          the packaged chart, the CRDs and install.yaml, a krew manifest, SBOMs and SHA256SUMS.
##          Always the full release profile.
release:
	hack/release.sh

## bench: API calls per grant, time to access, revocation lag, scale (10,000 and 50,000 grants),
##        webhook latency and brokered sessions of a release oz-manager on a private local control
##        plane, then fleets of 2 and 10 spokes on control planes of their own; prints a
##        table next to the previous run's, writes target/bench/results.json. Takes ~20 minutes;
##        `make bench BENCH_ARGS=--quick` is a three-minute smoke run. Not part of `make test`.
##        Method and latest results: docs/benchmarks.md
bench: testenv
	$(CARGO) build --release --bin oz-manager
	$(CARGO) run --release -p oz-bench -- $(BENCH_ARGS)

## crds: regenerate config/crd/crds.yaml (and the chart's copy) from the Rust types (a test fails when either drifts)
crds:
	$(CARGO) run -q --bin oz-manager -- crds > config/crd/crds.yaml
	cp config/crd/crds.yaml charts/oz/crds/crds.yaml

## manifests: regenerate config/default/install.yaml, the default install (a test fails when it drifts)
manifests:
	$(CARGO) run -q --bin oz-manager -- manifests --no-crds --unverified-webhook-callers > config/default/install.yaml
	OZ_WRITE_CHART_RULES=1 $(CARGO) test -q -p oz --lib install::chart::tests::chart_rules_match_the_generator

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# No import cycle between the files of a crate, no source file over 600 lines (docs/development.md).
structure-check:
	hack/check-structure.py

# The module docs say which file holds each step and link to it: a moved file breaks the build.
doc-check:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --workspace
	hack/check-doc-paths.py

# The fuzz targets are a workspace of their own (cargo-fuzz instruments them), so nothing else
# compiles them: checking them here keeps them building as the code they call changes. It shares
# target/ so the dependencies they have in common with oz are checked once.
fuzz-check:
	$(CARGO) check --manifest-path fuzz/Cargo.toml --target-dir target --bins --locked

# Builds (or reuses) the control plane, kwok (its simulated nodes), gofakes3 (a local S3 server
# for session recordings), helm, promtool and the fleet tests' secretreader plugin before the tests
# ask for them, so their build time shows up as its own step.
testenv:
	hack/testenv.sh build >/dev/null
	hack/testenv.sh build-kwok >/dev/null
	hack/testenv.sh build-s3 >/dev/null
	hack/testenv.sh build-tools >/dev/null

testenv-script-test: testenv
	hack/test-testenv-script.sh

# ozctl's integration tests build ozctl on first use (it is another package, so cargo does not
# hand them its path); building it first keeps that build from running alongside timed tests.
cargo-test: testenv
	$(CARGO) build -p ozctl
	$(CARGO) test --workspace

# `make run` as a newcomer uses it: the printed commands get alice a Ready request and a real
# exec into her pod, with oz-manager moved to free ports when the default ones are taken.
make-run-test: testenv
	hack/test-run-local.sh

# `make run-fleet` likewise: the printed commands get alice's request on the hub approved by dave
# and her own exec on spoke b, and nothing on c; Ctrl-C leaves nothing running.
make-run-fleet-test: testenv
	hack/test-run-fleet.sh

## fuzz-TARGET: run a cargo-fuzz target for FUZZ_SECONDS (default 60): fuzz-duration,
## fuzz-pod_mutation, fuzz-admission; not part of `make test` (needs cargo-fuzz; see
## hack/fuzz.sh and docs/reliability.md)
FUZZ_SECONDS ?= 60
fuzz-%:
	hack/fuzz.sh $* $(FUZZ_SECONDS)
