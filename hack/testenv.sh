#!/usr/bin/env bash
# A real local control plane (embedded etcd 3.6 + kube-apiserver 1.35) for tests and local runs.
#
#   hack/testenv.sh build                     build kube-testenv, or reuse the cached one; print its path
#   hack/testenv.sh build-kwok                build kwok (the simulated nodes), or reuse it; print its dir
#   hack/testenv.sh build-s3                  build gofakes3 (a local S3 server for recordings), or
#                                             reuse it; print its path
#   hack/testenv.sh build-tools               build helm and promtool (the chart's and the alerts'
#                                             checks) and the ClusterProfile secretreader plugin
#                                             with its CRD (the fleet tests), or reuse them; print
#                                             their dir
#   hack/testenv.sh up DIR [--user NAME:G1,G2]... [--controllers all|gc,namespace,...] [--nodes N]
#                          [--webhook-client-cert]
#                                             start it in the background; return once /readyz is ok
#                                             (and, with --nodes, once N kwok nodes are Ready)
#   hack/testenv.sh down DIR                  stop it, and every process it started, and remove DIR
#   hack/testenv.sh kubectl ARGS...           run the bundled kubectl (same version as the apiserver)
#
# `up` writes DIR/kubeconfig (admin, system:masters), DIR/users/NAME.kubeconfig per --user, and
# DIR/env, which exports KUBECONFIG and puts the bundled kubectl first on PATH. With
# --webhook-client-cert the apiserver presents a client certificate (CN kube-apiserver-webhook-client)
# to every admission webhook; DIR/ready.json names its CA (webhookClientCaFile), for a webhook to
# verify it against, and the certificate and key (webhookClientCertFile, webhookClientKeyFile).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src="$here/testenv"
kwok_src="$here/kwok"
cache="${OZ_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oz-testenv}"
k8s_version=v1.35.8

die() { echo "testenv: $*" >&2; exit 1; }

# The binary is cached under a key made of everything that affects it, so it is built once per
# machine and rebuilt only when the Go sources, the module graph or the Go toolchain change.
cache_key() {
  command -v go >/dev/null || die "Go is not installed; it is needed to build the control plane (see README)"
  {
    cat "$src/go.mod" "$src/go.sum" "$src"/*.go
    go env GOVERSION GOOS GOARCH
    echo "$ldflags"
  } | sha256sum | cut -c1-16
}

# -s -w keeps the binary small; the -X flags give it a real version instead of v0.0.0-master.
ldflags="-s -w -X main.kubernetesVersion=$k8s_version \
-X k8s.io/component-base/version.gitVersion=$k8s_version \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=35 \
-X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"

# build_once DIR FILE WHAT BUILD: unless DIR/FILE exists, runs `BUILD TMP` under a lock (several
# test binaries may ask at once: one builds, the others wait and reuse its result) and moves TMP
# to DIR, so a cache entry is either complete or absent.
build_once() {
  local dir=$1 file=$2 what=$3 build=$4
  if [ ! -x "$dir/$file" ]; then
    mkdir -p "$cache"
    exec 9>"$cache/.lock"
    flock 9
    if [ ! -x "$dir/$file" ]; then
      echo "testenv: building $what; a cold build takes minutes" >&2
      local start=$SECONDS tmp="$dir.tmp.$$"
      rm -rf "$tmp"; mkdir -p "$tmp"
      "$build" "$tmp" >&2 || { rm -rf "$tmp"; die "building $what failed"; }
      rm -rf "$dir"; mv "$tmp" "$dir"
      echo "testenv: built $what in $((SECONDS - start))s: $dir" >&2
    fi
    exec 9>&-
  fi
}

go_build_testenv() {
  (cd "$src" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" \
    go build -trimpath -tags grpcnotrace -ldflags "$ldflags" -o "$1/kube-testenv" .)
}

cmd_build() {
  local dir; dir="$cache/$(cache_key)"
  build_once "$dir" kube-testenv "kube-testenv (kube-apiserver $k8s_version, etcd 3.6)" go_build_testenv
  echo "$dir/kube-testenv"
}

# kwok is its own Go module (hack/kwok: it needs k8s.io 0.36 libraries, the control plane pins
# 0.35), cached by its own key: the binary, and the stages and CRD the standalone binary does not
# ship, copied from the same pinned module.
kwok_stages="kustomize/stage/node/fast/node-initialize.yaml kustomize/stage/node/heartbeat/node-heartbeat.yaml
kustomize/stage/pod/fast/pod-ready.yaml kustomize/stage/pod/fast/pod-complete.yaml kustomize/stage/pod/fast/pod-delete.yaml"
kwok_crd=kustomize/crd/bases/kwok.x-k8s.io_execs.yaml

kwok_cache_key() {
  command -v go >/dev/null || die "Go is not installed; it is needed to build kwok (see README)"
  {
    cat "$kwok_src/go.mod" "$kwok_src/go.sum"
    go env GOVERSION GOOS GOARCH
    echo "$kwok_stages $kwok_crd"
  } | sha256sum | cut -c1-16
}

go_build_kwok() {
  (cd "$kwok_src" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" \
    go build -trimpath -ldflags '-s -w' -o "$1/kwok" sigs.k8s.io/kwok/cmd/kwok) || return
  local module stage
  module=$(cd "$kwok_src" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' sigs.k8s.io/kwok) || return
  for stage in $kwok_stages; do
    { cat "$module/$stage"; echo "---"; } >>"$1/stages.yaml"
  done
  cp "$module/$kwok_crd" "$1/execs-crd.yaml"
}

cmd_build_kwok() {
  local dir; dir="$cache/kwok-$(kwok_cache_key)"
  build_once "$dir" kwok "kwok (the simulated nodes)" go_build_kwok
  echo "$dir"
}

# The S3 server the recording tests write to: gofakes3's command (hack/s3, its own Go module),
# chosen because it is one small pure-Go binary with an in-memory backend and no setup (any
# credentials are accepted, `-initialbucket` makes the bucket), where MinIO or versitygw are large
# builds with many more features than a test needs.
s3_src="$here/s3"

s3_cache_key() {
  command -v go >/dev/null || die "Go is not installed; it is needed to build the S3 server (see README)"
  {
    cat "$s3_src/go.mod" "$s3_src/go.sum"
    go env GOVERSION GOOS GOARCH
  } | sha256sum | cut -c1-16
}

go_build_s3() {
  (cd "$s3_src" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" \
    go build -trimpath -ldflags '-s -w' -o "$1/gofakes3" github.com/johannesboyne/gofakes3/cmd/gofakes3)
}

cmd_build_s3() {
  local dir; dir="$cache/s3-$(s3_cache_key)"
  build_once "$dir" gofakes3 "gofakes3 (the local S3 server)" go_build_s3
  echo "$dir/gofakes3"
}

# helm (the chart's lint, template, install and upgrade tests), promtool (the alerting rules'
# checks and unit tests) and the sig-multicluster secretreader credential plugin (the fleet tests:
# it turns a ClusterProfile's access provider into a spoke token): one Go module (hack/tools, each
# a `tool` directive) built in one `go build`, so the many modules they share (client-go above
# all) are compiled once. `remove_all_sd` leaves Prometheus's service-discovery plugins (cloud SDKs
# promtool never needs for rule checks) out of the build. The plugin's command is the directory
# `cmd/plugin`, hence the rename; the ClusterProfile CRD comes from the same pinned module, since
# the binary does not ship it.
tools_src="$here/tools"
cluster_inventory=sigs.k8s.io/cluster-inventory-api
cluster_profile_crd=config/crd/bases/multicluster.x-k8s.io_clusterprofiles.yaml
helm_version=v4.3.1
promtool_version=3.16.0
tools_ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$helm_version \
-X github.com/prometheus/common/version.Version=$promtool_version"

tools_cache_key() {
  command -v go >/dev/null || die "Go is not installed; it is needed to build helm, promtool and the secretreader plugin (see README)"
  {
    cat "$tools_src/go.mod" "$tools_src/go.sum"
    go env GOVERSION GOOS GOARCH
    echo "$tools_ldflags $cluster_profile_crd"
  } | sha256sum | cut -c1-16
}

go_build_tools() {
  (cd "$tools_src" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" \
    go build -trimpath -tags remove_all_sd -ldflags "$tools_ldflags" -o "$1/" \
    helm.sh/helm/v4/cmd/helm github.com/prometheus/prometheus/cmd/promtool \
    "$cluster_inventory/plugins/secretreader/cmd/plugin") || return
  mv "$1/plugin" "$1/secretreader-plugin" || return
  local module
  module=$(cd "$tools_src" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' "$cluster_inventory") || return
  cp "$module/$cluster_profile_crd" "$1/clusterprofiles-crd.yaml"
}

cmd_build_tools() {
  local dir; dir="$cache/tools-$(tools_cache_key)"
  build_once "$dir" promtool "helm $helm_version, promtool $promtool_version and the secretreader plugin" \
    go_build_tools
  echo "$dir"
}

cmd_up() {
  [ $# -ge 1 ] || die "usage: testenv.sh up DIR [--user NAME:GROUPS]... [--controllers LIST] [--nodes N] [--webhook-client-cert]"
  local dir=$1; shift
  local args=()
  while [ $# -gt 0 ]; do
    case $1 in
      --user|--controllers|--nodes) [ $# -ge 2 ] || die "$1 needs a value"; args+=("$1=$2"); shift 2 ;;
      --user=*|--controllers=*|--nodes=*|--webhook-client-cert) args+=("$1"); shift ;;
      *) die "unknown argument $1" ;;
    esac
  done
  if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
    die "a control plane is already running in $dir (pid $(cat "$dir/pid")); run: $0 down $dir"
  fi
  local bin; bin=$(cmd_build)
  case " ${args[*]} " in
    *" --nodes="*) args+=("--kwok-dir=$(cmd_build_kwok)") ;;
  esac
  mkdir -p "$dir/logs" "$dir/bin"
  dir=$(cd "$dir" && pwd)
  rm -f "$dir/ready.json"
  ln -sf "$bin" "$dir/bin/kubectl"
  # setsid + nohup: the control plane outlives this script and stops only on `down`.
  setsid nohup "$bin" run --work-dir "$dir" "${args[@]}" </dev/null >>"$dir/logs/testenv.log" 2>&1 &
  local pid=$!
  echo "$pid" >"$dir/pid"
  local waited=0
  until [ -f "$dir/ready.json" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 30 "$dir/logs/testenv.log" >&2 || true
      die "the control plane exited during startup; full log: $dir/logs/testenv.log"
    fi
    [ $waited -lt 1200 ] || { kill "$pid" 2>/dev/null; die "not ready after 120s; log: $dir/logs/testenv.log"; }
    sleep 0.1; waited=$((waited + 1))
  done
  cat >"$dir/env" <<ENV
export KUBECONFIG="$dir/kubeconfig"
export PATH="$dir/bin:\$PATH"
ENV
  echo "testenv: control plane ready at $(sed -n 's/.*"server": "\(.*\)".*/\1/p' "$dir/ready.json") (pid $pid)" >&2
  echo "testenv: source $dir/env to use it; users' kubeconfigs are in $dir/users/" >&2
}

cmd_down() {
  [ $# -eq 1 ] || die "usage: testenv.sh down DIR"
  local dir=$1
  if [ -f "$dir/pid" ]; then
    local pid; pid=$(cat "$dir/pid")
    if kill "$pid" 2>/dev/null; then
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  # kube-testenv ends kwok and what it exec'd when it stops; if it was killed, its leftovers
  # carry the work dir in their environment.
  if [ -d "$dir" ]; then
    local abs marker p
    abs=$(cd "$dir" && pwd); marker="OZ_TESTENV_DIR=$abs"
    for p in /proc/[0-9]*; do
      if grep -qxzF "$marker" "$p/environ" 2>/dev/null; then
        kill -9 "${p#/proc/}" 2>/dev/null || true
      fi
    done
  fi
  rm -rf "$dir"
}

cmd_kubectl() {
  local bin; bin=$(cmd_build)
  exec "$bin" kubectl "$@"
}

case "${1:-}" in
  build) shift; cmd_build "$@" ;;
  build-kwok) shift; cmd_build_kwok "$@" ;;
  build-s3) shift; cmd_build_s3 "$@" ;;
  build-tools) shift; cmd_build_tools "$@" ;;
  up) shift; cmd_up "$@" ;;
  down) shift; cmd_down "$@" ;;
  kubectl) shift; cmd_kubectl "$@" ;;
  *) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
