#!/usr/bin/env bash
# `make run`: a local control plane with test users, ready for oz. Ctrl-C stops everything.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir="$root/.run/testenv"
testenv="$root/hack/testenv.sh"

"$testenv" down "$dir" 2>/dev/null || true
"$testenv" up "$dir" --user alice:devs --user carol:devs --user bob:qa --controllers gc,namespace
trap '"$testenv" down "$dir"; echo; echo "stopped."' EXIT
trap 'exit 0' INT TERM

cat <<TXT

A real kube-apiserver $("$testenv" kubectl --kubeconfig "$dir/kubeconfig" version -o json 2>/dev/null \
  | sed -n 's/.*"gitVersion": "\(v[^"]*\)".*/\1/p' | tail -1) and etcd are running on 127.0.0.1.

  source $dir/env                        # admin (system:masters) and the bundled kubectl
  kubectl get namespaces
  kubectl --kubeconfig $dir/users/alice.kubeconfig auth whoami   # alice, in group devs
  kubectl --kubeconfig $dir/users/bob.kubeconfig auth whoami     # bob, in group qa

Users alice and carol are in group devs, bob in qa. Press Ctrl-C to stop.
TXT
while true; do sleep 3600 & wait $!; done
