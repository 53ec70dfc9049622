#!/usr/bin/env bash
# Checks hack/testenv.sh's interface as a user would use it: up with a user, kubectl as that
# user, and down leaving nothing behind.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=$(mktemp -d)/testenv
trap '"$here/testenv.sh" down "$dir" >/dev/null 2>&1 || true' EXIT

"$here/testenv.sh" up "$dir" --user alice:devs,auditors
pid=$(cat "$dir/pid")
whoami=$("$here/testenv.sh" kubectl --kubeconfig "$dir/users/alice.kubeconfig" auth whoami)
grep -q 'Username *alice' <<<"$whoami" || { echo "auth whoami did not print alice:"; echo "$whoami"; exit 1; }
grep -q 'Groups *\[devs auditors system:authenticated\]' <<<"$whoami" \
  || { echo "auth whoami did not print alice's groups:"; echo "$whoami"; exit 1; }
# DIR/env puts the bundled kubectl on PATH with the admin kubeconfig.
(source "$dir/env" && kubectl get namespace default -o name) | grep -qx 'namespace/default'

"$here/testenv.sh" down "$dir"
if kill -0 "$pid" 2>/dev/null; then echo "the control plane (pid $pid) survived down"; exit 1; fi
[ ! -e "$dir" ] || { echo "down left $dir behind"; exit 1; }
echo "testenv.sh: 3 passed, 0 failed"
