# syntax=docker/dockerfile:1
# oz-manager as a small, static image that runs as non-root, for those with registries at hand:
#
#   docker build --build-arg OZ_GIT_COMMIT=$(git rev-parse --short=12 HEAD) -t oz:dev .
#
# `make image` (hack/image.sh) builds the same binaries with the same cargo flags without pulling
# anything, and src/install/tests/image_recipe.rs keeps the two recipes alike.
#
# The build stage is Rust on Alpine, so the binary links musl statically (the default for musl
# targets; ring's C and assembly need gcc and musl-dev). The final stage is distroless static:
# no shell, no libc, no package manager; just CA certificates, tzdata and the nonroot user 65532.
# It also carries the credential plugin a fleet hub reaches its spokes with (docs/fleet.md).

ARG RUST_VERSION=1.95
ARG GO_VERSION=1.26

# The Cluster Inventory API's secretreader credential plugin, static (no cgo), from the module at
# the version hack/tools/go.mod pins for `make image` (src/install/tests/image_recipe.rs checks),
# with the dependencies its own go.mod asks for. Through a throwaway module rather than
# `go install ...@VERSION`, which also lists the module's versions: a proxy that serves exact
# versions only (as a local mirror may) refuses that.
FROM golang:${GO_VERSION}-alpine AS secretreader
WORKDIR /plugin
RUN go mod init oz.local/secretreader \
 && go get sigs.k8s.io/cluster-inventory-api/plugins/secretreader/cmd/plugin@v0.1.0 \
 && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o /out/secretreader-plugin \
      sigs.k8s.io/cluster-inventory-api/plugins/secretreader/cmd/plugin

FROM rust:${RUST_VERSION}-alpine AS build
RUN apk add --no-cache gcc musl-dev
# Smaller binary; set before the dependency layer so both builds share one profile.
ENV CARGO_PROFILE_RELEASE_STRIP=symbols
WORKDIR /src

# Dependencies first, in a layer rebuilt only when a manifest or Cargo.lock changes: the
# workspace's manifests, with empty stand-ins for every target they declare. A new workspace
# member (or explicitly declared target) needs a line here too.
COPY Cargo.toml Cargo.lock ./
COPY api/Cargo.toml api/
COPY audit/Cargo.toml audit/
COPY platform/Cargo.toml platform/
COPY webhooks/Cargo.toml webhooks/
COPY sessions/Cargo.toml sessions/
COPY cli/Cargo.toml cli/
COPY tests/support/Cargo.toml tests/support/
COPY measure/bench/Cargo.toml measure/bench/
COPY measure/heap/Cargo.toml measure/heap/
RUN mkdir -p src/bin api/src audit/src platform/src webhooks/src sessions/src cli/src tests/support/src \
          tests/integration measure/bench/src measure/heap/src \
 && echo 'fn main() {}' > src/bin/oz-manager.rs \
 && echo 'fn main() {}' > measure/bench/src/main.rs \
 && echo 'fn main() {}' > cli/src/main.rs \
 && touch src/lib.rs api/src/lib.rs audit/src/lib.rs platform/src/lib.rs webhooks/src/lib.rs sessions/src/lib.rs \
          cli/src/lib.rs tests/support/src/lib.rs tests/integration/main.rs measure/heap/src/lib.rs \
 && cargo build --locked --profile release -p oz -p ozctl --bin oz-manager --bin ozctl \
 && rm -rf src api/src audit/src platform/src webhooks/src sessions/src cli/src tests measure

# Then oz itself. COPY keeps the files' own modification times, which can be older than the
# stand-ins' build: touching the sources makes cargo rebuild oz's crates (and only those).
COPY . .
# The commit `--version` names (`unknown` unless given).
ARG OZ_GIT_COMMIT
RUN find src api/src audit/src platform/src webhooks/src sessions/src cli/src -name '*.rs' -exec touch {} + \
 && cargo build --locked --profile release -p oz -p ozctl --bin oz-manager --bin ozctl \
 && install -D target/release/oz-manager /out/oz-manager

FROM gcr.io/distroless/static:nonroot
LABEL org.opencontainers.image.title="oz" \
      org.opencontainers.image.description="Just-in-time kubectl exec and debug-pod access for Kubernetes" \
      org.opencontainers.image.source="https://github.com/oz-rs/oz" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/oz-manager /usr/local/bin/oz-manager
COPY --from=secretreader /out/secretreader-plugin /usr/local/bin/secretreader-plugin
USER 65532:65532
# Metrics, health probes, webhooks, the brokered sessions API (the ports config/default uses).
EXPOSE 8080 8081 9443 9444
ENTRYPOINT ["/usr/local/bin/oz-manager"]
