#!/usr/bin/env bash
# `make release`: everything a release ships, in target/release-artifacts/, for x86_64 Linux:
#
#   oz-VERSION-linux-amd64.oci.tar      the image (hack/image.sh, full release profile), oz:VERSION
#   ozctl-VERSION-linux-amd64           static ozctl; installed as `kubectl-oz` it is `kubectl oz`
#   ozctl-VERSION-linux-amd64.tar.gz    the same, archived for krew
#   oz-krew.yaml                        krew's plugin manifest for `kubectl oz`
#   oz-VERSION.tgz                      the Helm chart (`helm package`), appVersion and image tag VERSION
#   crds.yaml, install.yaml             the CRDs and the default install, image oz:VERSION
#   oz-manager.cdx.json, ozctl.cdx.json the Rust dependencies of each binary (CycloneDX SBOMs)
#   SHA256SUMS                          the SHA-256 of every file above (`sha256sum -c SHA256SUMS`)
#
# One version for all of them: the workspace's. The SBOMs come from cargo-cyclonedx (OWASP's
# CycloneDX tool for cargo), installed with `cargo install` when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "release: $*" >&2; exit 1; }

cyclonedx_version=0.5.9
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
out=target/release-artifacts
bin=target/image/bin
rust_target=x86_64-unknown-linux-musl
# Archive timestamps: the commit's time, so the same commit gives the same archives.
created=$(git log -1 --format=%ct 2>/dev/null || date +%s)

# The chart carries the version in two places a build does not rewrite: refuse a mismatch.
for field in version appVersion; do
  chart=$(sed -n "s/^$field: \"\{0,1\}\([^\"]*\)\"\{0,1\}$/\1/p" charts/oz/Chart.yaml)
  [ "$chart" = "$version" ] || die "charts/oz/Chart.yaml's $field is $chart, the workspace's version $version"
done

hack/image.sh release
helm="$(hack/testenv.sh build-tools)/helm"
if ! cargo cyclonedx --version 2>/dev/null | grep -q "$cyclonedx_version"; then
  # Its own target directory: a tool's build has nothing to share with oz's.
  env -u CARGO_TARGET_DIR cargo install --locked "cargo-cyclonedx@$cyclonedx_version"
fi

rm -rf "$out"
mkdir -p "$out"
platform="linux-amd64"
cp target/image/oz.oci.tar "$out/oz-$version-$platform.oci.tar"
install -m 0755 "$bin/ozctl" "$out/ozctl-$version-$platform"
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
install -m 0755 "$bin/ozctl" "$staging/ozctl"
tar -C "$staging" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$created" -cf - ozctl \
  | gzip -n -9 > "$out/ozctl-$version-$platform.tar.gz"

"$helm" package charts/oz --destination "$out" >/dev/null
[ -f "$out/oz-$version.tgz" ] || die "helm package wrote no oz-$version.tgz"

# From the release's own oz-manager: what it prints must be what is committed.
"$bin/oz-manager" crds > "$out/crds.yaml"
"$bin/oz-manager" manifests --no-crds > "$out/install.yaml"
cmp -s "$out/crds.yaml" config/crd/crds.yaml || die "config/crd/crds.yaml is out of date: run make crds"
cmp -s "$out/install.yaml" config/default/install.yaml \
  || die "config/default/install.yaml is out of date: run make manifests"
grep -q "image: oz:$version\$" "$out/install.yaml" || die "install.yaml's image is not oz:$version"

sha=$(sha256sum "$out/ozctl-$version-$platform.tar.gz" | cut -d' ' -f1)
cat > "$out/oz-krew.yaml" <<EOF
# krew's manifest for \`kubectl oz\`. With the archive beside it:
#   kubectl krew install --manifest=oz-krew.yaml --archive=ozctl-$version-$platform.tar.gz
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: oz
spec:
  version: v$version
  homepage: https://github.com/oz-rs/oz
  shortDescription: Just-in-time exec and debug-pod access through oz
  description: |
    Ask oz for time-limited access to a pod through a template, wait until it is ready, exec
    into the pod, end the access early, and list who had access. The same program as ozctl.
  platforms:
    - selector:
        matchLabels:
          os: linux
          arch: amd64
      uri: https://github.com/oz-rs/oz/releases/download/v$version/ozctl-$version-$platform.tar.gz
      sha256: $sha
      bin: ozctl
EOF

# One SBOM per shipped binary, for the target it is built for. cargo-cyclonedx writes each next
# to its package's Cargo.toml: under a name of our own, then moved out of the source tree.
sbom_name=oz-release-sbom
cargo cyclonedx --format json --spec-version 1.5 --target "$rust_target" \
  --override-filename "$sbom_name" >/dev/null
mv "$sbom_name.json" "$out/oz-manager.cdx.json"
mv "cli/$sbom_name.json" "$out/ozctl.cdx.json"
find . -name "$sbom_name.json" -not -path './target/*' -delete

(cd "$out" && sha256sum -- * > "$staging/SHA256SUMS" && mv "$staging/SHA256SUMS" SHA256SUMS)
echo "release: oz $version in $out:" >&2
ls -l "$out" >&2
