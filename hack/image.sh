#!/usr/bin/env bash
# `make image`: oz-manager and ozctl built statically for x86_64 Linux (musl), and oz-manager in a
# minimal non-root image assembled by buildah, with nothing pulled from a registry.
#
#   hack/image.sh [PROFILE]     PROFILE: the cargo profile, `release` (the default, what
#                               `make release` ships) or `ci-image` (the same recipe, optimised
#                               less, for CI)
#
# Writes target/image/oz.oci.tar (an OCI archive tagged oz:VERSION), tags oz:VERSION in the
# buildah store target/image/containers, and leaves the static binaries in target/image/bin.
# The image holds oz-manager (its entrypoint), the secretreader credential plugin a fleet hub
# runs (docs/fleet.md), the CA certificates and time zones of Debian's ca-certificates and
# tzdata packages, and a passwd naming the user it runs as, 65532 (the `nonroot` of distroless,
# as the Dockerfile's image): no shell, no libc, no package manager.
#
# Needs: the rustup target x86_64-unknown-linux-musl, musl-gcc (Debian's musl-tools: ring and
# mimalloc have C parts), buildah, dpkg's record of ca-certificates and tzdata, and Go (the
# plugin is `hack/testenv.sh build-tools`'s, built once per machine and reused). The store is
# a private one under target/ with the vfs driver, which works in a container and on a fresh
# machine (no overlay mounts, nothing shared with other users of buildah). As a user other than
# root, buildah needs that user's ranges in /etc/subuid and /etc/subgid.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=${1:-release}
case $profile in release | ci-image) ;; *) echo "image: profile $profile: want release or ci-image" >&2; exit 2 ;; esac
rust_target=x86_64-unknown-linux-musl
out=target/image
store=$out/containers
archive=$out/oz.oci.tar

die() { echo "image: $*" >&2; exit 1; }

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
[ -n "$version" ] || die "no version in Cargo.toml's [workspace.package]"
# The commit `--version` names; `-dirty` when tracked files differ from it.
if [ -z "${OZ_GIT_COMMIT:-}" ]; then
  OZ_GIT_COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  if [ "$OZ_GIT_COMMIT" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    OZ_GIT_COMMIT="$OZ_GIT_COMMIT-dirty"
  fi
fi
export OZ_GIT_COMMIT
# The image's timestamps: the commit's time, so rebuilding a commit gives the same metadata.
created=$(git log -1 --format=%ct 2>/dev/null || date +%s)

command -v musl-gcc >/dev/null || die "musl-gcc is missing: apt-get install musl-tools"
command -v buildah >/dev/null || die "buildah is missing: apt-get install buildah"
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx "$rust_target"; then
  rustup target add "$rust_target"
fi
for package in ca-certificates tzdata; do
  dpkg -s "$package" >/dev/null 2>&1 || die "Debian's $package is not installed: apt-get install $package"
done

# The binaries. Keep these flags as the Dockerfile's (src/install/tests/image_recipe.rs checks):
# both binaries in one build, so both recipes build oz-manager with the same features.
profile_variable=$(echo "$profile" | tr 'a-z-' 'A-Z_')
export "CARGO_PROFILE_${profile_variable}_STRIP=symbols"
echo "image: building oz-manager and ozctl $version (commit $OZ_GIT_COMMIT, profile $profile, $rust_target)" >&2
cargo build --locked --profile "$profile" --target "$rust_target" -p oz -p ozctl --bin oz-manager --bin ozctl
built="${CARGO_TARGET_DIR:-target}/$rust_target/$profile"
mkdir -p "$out/bin"
install -m 0755 "$built/oz-manager" "$built/ozctl" "$out/bin/"

# The fleet hub's credential plugin: the static (CGO_ENABLED=0) build of the Cluster Inventory
# API's secretreader that the tests use, from the version hack/tools/go.mod pins, built once per
# machine and reused (CI has built it before this).
tools=$(hack/testenv.sh build-tools)
[ -x "$tools/secretreader-plugin" ] || die "hack/testenv.sh build-tools left no secretreader-plugin in $tools"

# The image's files, laid out in a directory that becomes its one layer.
rootfs=$out/rootfs
rm -rf "$rootfs"
mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc/ssl/certs" "$rootfs/tmp" "$rootfs/home"
install -m 0755 "$out/bin/oz-manager" "$rootfs/usr/local/bin/oz-manager"
install -m 0755 "$tools/secretreader-plugin" "$rootfs/usr/local/bin/secretreader-plugin"
# The Mozilla roots exactly as the package ships them, not the machine's bundle, which may hold
# certificates added locally.
dpkg -L ca-certificates | grep '^/usr/share/ca-certificates/mozilla/.*\.crt$' | LC_ALL=C sort \
  | xargs cat > "$rootfs/etc/ssl/certs/ca-certificates.crt"
[ -s "$rootfs/etc/ssl/certs/ca-certificates.crt" ] || die "no certificates in Debian's ca-certificates"
dpkg -L tzdata | grep '^/usr/share/zoneinfo/' | sed 's|^/||' \
  | tar -C / --no-recursion -cf - -T - | tar -C "$rootfs" -xf -
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
  > "$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$rootfs/etc/group"
chmod 1777 "$rootfs/tmp"
# The user's home, copied apart to be theirs: a copy gives its owner to what it creates, not to
# a directory that is already there.
home=$out/home
rm -rf "$home"
mkdir -p "$home"

export BUILDAH_ISOLATION=chroot
storage=(--root "$PWD/$store/root" --runroot "$PWD/$store/run" --storage-driver vfs)
b() { buildah "${storage[@]}" "$@"; }
container=$(b from scratch)
trap 'b rm "$container" >/dev/null 2>&1 || true' EXIT
b copy --quiet "$container" "$rootfs" /
b copy --quiet --chown 65532:65532 "$container" "$home" /home/nonroot
# Every port oz-manager serves (the constants in src/install/options.rs, checked by a test):
# metrics, health probes, webhooks, the brokered sessions API.
b config \
  --user 65532:65532 \
  --entrypoint '["/usr/local/bin/oz-manager"]' \
  --workingdir / \
  --port 8080/tcp --port 8081/tcp --port 9443/tcp --port 9444/tcp \
  --created-by "make image (hack/image.sh)" \
  --label org.opencontainers.image.title=oz \
  --label "org.opencontainers.image.description=Just-in-time kubectl exec and debug-pod access for Kubernetes" \
  --label org.opencontainers.image.source=https://github.com/oz-rs/oz \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$OZ_GIT_COMMIT" \
  "$container"
b commit --quiet --format oci --timestamp "$created" --rm "$container" "oz:$version" >/dev/null
trap - EXIT
rm -f "$archive"
b push --quiet "oz:$version" "oci-archive:$PWD/$archive:oz:$version"
# Earlier builds' images, untagged by this one.
b rmi --prune >/dev/null 2>&1 || true
echo "image: oz:$version written to $archive ($(du -h "$archive" | cut -f1)); binaries in $out/bin" >&2
