#!/usr/bin/env bash
# Checks `make run` as a newcomer uses it: start it, follow the commands it prints as alice until
# her request is Ready, check bob is refused, then Ctrl-C it and check nothing is left running.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$(mktemp)
# Free ports of its own, so nothing else on the machine (a developer's own `make run`) collides.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
export OZ_WEBHOOK_PORT=${OZ_WEBHOOK_PORT:-$(free_port)} OZ_METRICS_PORT=${OZ_METRICS_PORT:-$(free_port)}
# Job control gives `make run` a process group of its own (pgid = its pid), so the whole group can
# be signalled the way a terminal's Ctrl-C would.
set -m
(cd "$root" && exec make --no-print-directory run) >"$out" 2>&1 &
leader=$!
set +m
stop() { kill -INT -- "-$leader" 2>/dev/null || true; }
failed() { stop; sleep 2; echo "--- make run printed:" >&2; cat "$out" >&2; }
trap failed ERR
for _ in $(seq 1800); do grep -q 'Press Ctrl-C' "$out" && break; kill -0 "$leader" 2>/dev/null || break; sleep 0.1; done
grep -q 'Press Ctrl-C' "$out" || { echo "make run did not get ready"; false; }

# Run exactly the commands it printed for alice.
eval "$(grep -E '^  export PATH=' "$out")"
eval "$(grep -E '^  kubectl create -n demo' "$out" | head -1)"
for _ in $(seq 200); do
  phase=$(kubectl get execaccessrequests -n demo -o jsonpath='{.items[0].status.phase}')
  [ "$phase" = Ready ] && break
  sleep 0.1
done
[ "$phase" = Ready ] || { echo "alice's request is $phase, not Ready"; false; }
kubectl get execaccessrequests -n demo
if eval "$(grep -E '^  kubectl --kubeconfig .*bob' "$out")" 2>"$out.bob"; then
  echo "bob's request was accepted"; false
fi
grep -q 'allowedGroups' "$out.bob" || { echo "bob's refusal does not say why:"; cat "$out.bob"; false; }

stop
wait "$leader" 2>/dev/null || true
# The script's cleanup stops oz-manager gracefully, then the control plane.
for _ in $(seq 600); do
  pgrep -f "$root/.run/testenv|$root/target/debug/oz-manager" >/dev/null || break
  sleep 0.1
done
if pgrep -f "$root/.run/testenv|$root/target/debug/oz-manager" >/dev/null; then
  echo "Ctrl-C left processes behind"; pgrep -fa "$root/.run/testenv|$root/target/debug/oz-manager"; exit 1
fi
echo "make run: 3 passed, 0 failed"
