#!/usr/bin/env bash
# Checks `make run-fleet` as a newcomer uses it, on a machine where port 9443 is already taken:
# it starts anyway, the hub's webhooks on another port (said so, and registered there); a second
# `make run-fleet` over the same directory refuses to start, names the first, and leaves it
# running; the commands it prints, pasted as they are, get alice's request on the hub approved
# by dave there (who sees it in `ozctl approvals`), granted on spoke b (where the request names
# alice and the hub's approver, and the audit file records her exec), and her own `kubectl exec`
# into b's pod prints its hello; on spoke c there is nothing of oz's in namespace demo and alice
# may exec nowhere; Ctrl-C leaves nothing the run started running, not even a command still
# exec'd into a pod.
#
# The run has a directory of its own (OZ_RUN_DIR, a new one under /tmp unless set), so this test
# works beside a `make run-fleet` of the same checkout; removed when the test passes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
own_run=""
[ -n "${OZ_RUN_DIR:-}" ] || { OZ_RUN_DIR=$(mktemp -d /tmp/oz-run-fleet.XXXXXX); own_run=1; }
export OZ_RUN_DIR
run=$OZ_RUN_DIR
out=$(mktemp)
leader=""
# On any failure: stop `make run-fleet` and show what it printed.
failed() {
  [ -z "$leader" ] || { kill -INT -- "-$leader" 2>/dev/null || true; sleep 5; }
  echo "--- make run-fleet printed:" >&2; cat "$out" >&2
}
fail() { echo "$*" >&2; failed; echo "(the run's logs: $run)" >&2; exit 1; }
trap failed ERR

# Hold 9443 (the hub's oz-manager's first webhook port) the way any other program would. If
# something already holds it, that serves as well.
python3 -c '
import socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", 9443)); s.listen()
except OSError as e:
    print("9443 is already held:", e, flush=True)
print("holding", flush=True)
time.sleep(3600)' >"$out.holder" 2>&1 &
holder=$!
trap 'kill $holder 2>/dev/null || true' EXIT
until grep -qs holding "$out.holder"; do kill -0 $holder || fail "the port holder exited"; sleep 0.1; done

# Its own process group, signalled as a terminal's Ctrl-C would be (see test-run-local.sh).
started=$SECONDS
set -m
(cd "$root" && exec env --default-signal=INT,QUIT make --no-print-directory run-fleet) >"$out" 2>&1 &
leader=$!
set +m
# Up to 20 minutes: on a new machine it first builds oz-manager, the control plane, kwok and
# the secretreader plugin.
for _ in $(seq 12000); do grep -q 'Press Ctrl-C' "$out" && break; kill -0 "$leader" 2>/dev/null || break; sleep 0.1; done
grep -q 'Press Ctrl-C' "$out" || fail "make run-fleet did not get ready"
echo "make run-fleet printed its commands after $((SECONDS - started)) s"
script=$(pgrep -P "$leader" -f hack/run-fleet.sh || true)
[ -n "$script" ] || fail "hack/run-fleet.sh is not running under make run-fleet ($leader)"
admin() { local cluster=$1; shift; KUBECONFIG="$run/$cluster/kubeconfig" "$run/hub/bin/kubectl" "$@"; }

# 1. The hub's webhooks moved off 9443, said so, and are registered where they listen.
hub_port=$(sed -n 's/^  hub .* webhooks on port \([0-9]*\),.*/\1/p' "$out")
[ -n "$hub_port" ] && [ "$hub_port" != 9443 ] || fail "the hub's oz-manager did not move off port 9443"
grep -q "port 9443 is taken: hub's webhooks use port $hub_port" "$out" \
  || fail "make run-fleet did not say it moved the hub's webhooks to port $hub_port"
urls=$(admin hub get validatingwebhookconfigurations,mutatingwebhookconfigurations \
  -o jsonpath='{range .items[*].webhooks[*]}{.clientConfig.url}{"\n"}{end}' | grep 127.0.0.1 || true)
[ -n "$urls" ] || fail "no webhook is registered on the hub"
if grep -v "^https://127.0.0.1:$hub_port/" <<<"$urls"; then fail "the hub's webhooks are registered on another port than $hub_port"; fi

# 2. A second make run-fleet over the same directory refuses at once and names the first.
if second=$(cd "$root" && timeout 60 make --no-print-directory run-fleet 2>&1 </dev/null); then
  fail "a second make run-fleet over $run started: $second"
fi
grep -q "another run (pid $script) is using $run" <<<"$second" \
  || fail "the second make run-fleet did not name the first one (pid $script): $second"
admin hub get namespace demo >/dev/null || fail "the second make run-fleet stopped the hub"

# 3. alice's and dave's commands, exactly as printed, as they would paste them. The last one,
# alice's `auth can-i` on c, answers no and so exits 1.
commands=$(sed -n '/^alice asks the hub/,/^Press Ctrl-C/p' "$out" | grep '^  ')
for step in 'kubectl create -f' 'ozctl approvals' 'ozctl approve' 'exec "$pod"' 'auth can-i'; do
  grep -qF -- "$step" <<<"$commands" || fail "no '$step' among the printed commands"
done
took=$SECONDS
commands_out=$(bash -c "$commands" 2>&1) || true
echo "$commands_out"
echo "(alice's and dave's commands took $((SECONDS - took)) s)"
req=$(admin hub get execaccessrequests -n demo -o jsonpath='{.items[0].metadata.name}')
[ -n "$req" ] || fail "alice's request was not created on the hub"
grep -q "^$req .*alice .*web-exec-prod .*INC-7" <<<"$commands_out" \
  || fail "dave's ozctl approvals did not list $req with alice's reason"
grep -q "^Approved ExecAccessRequest $req as dave " <<<"$commands_out" || fail "ozctl approve did not say dave approved $req"
hub_status=$(admin hub get execaccessrequest -n demo "$req" \
  -o jsonpath='{.spec.cluster} {.status.phase} {.status.approvalProgress} {.status.approvals[*].approver}')
[ "$hub_status" = "b Ready 1/1 dave" ] || fail "alice's request on the hub is: $hub_status"
pod=$(admin hub get execaccessrequest -n demo "$req" -o jsonpath='{.status.podName}')
admin b get pod -n demo "$pod" >/dev/null || fail "the hub's request names $pod, which is not a pod of b"
grep -qx "hello from $pod on b" <<<"$commands_out" || fail "alice's kubectl exec on b did not print 'hello from $pod on b'"
[ "$(tail -1 <<<"$commands_out")" = no ] || fail "alice's auth can-i on c did not answer no"

# 4. On b, the request the hub made: alice's, approved by dave on the hub; her exec is audited.
on_b=$(admin b get execaccessrequest -n demo "$req" \
  -o jsonpath='{.spec.requester.username} {.spec.forwarded.requestName} {.spec.forwarded.approvers[*].approver} {.status.phase}')
[ "$on_b" = "alice $req dave Ready" ] || fail "b's request $req is: $on_b"
# The record (its keys in order) names the grant and dave as the hub's approver. It is written
# a moment after the exec is admitted: wait for it (up to 30 s).
audited() {
  grep -s '"subresource":"exec"' "$run/audit-b.jsonl" | grep '"user":"alice"' | grep "\"pod\":\"$pod\"" \
    | grep "\"grant\":{\"approvers\":\[\"dave@hub\"\],\"kind\":\"ExecAccessRequest\",\"name\":\"$req\"" -q
}
for _ in $(seq 300); do audited && break; sleep 0.1; done
audited || fail "no audit record on b of alice's exec into $pod naming dave@hub as approver"

# 5. On c, nothing: no template, request, Role or RoleBinding in demo, and alice may exec into
# none of its pods (Forbidden, not failing for another reason).
found=$(admin c get execaccesstemplates,execaccessrequests,roles,rolebindings -n demo -o name)
[ -z "$found" ] || fail "c has oz's objects in demo: $found"
c_pod=$(admin c get pods -n demo -l app=web -o jsonpath='{.items[0].metadata.name}')
if KUBECONFIG="$run/c/users/alice.kubeconfig" "$run/hub/bin/kubectl" exec "$c_pod" -- true 2>"$out.c"; then
  fail "alice could exec into $c_pod on c"
fi
grep -q Forbidden "$out.c" || fail "alice's exec into $c_pod on c failed, but not as Forbidden: $(cat "$out.c")"

# 6. Ctrl-C, with a command still running in alice's pod on b, ends everything the run started:
# its process group, the three control planes and kwok (sessions of their own, with this run's
# directory in their command line) and what was exec'd into pods (which carry their control
# plane's work dir in their environment).
in_pods() { grep -lzE "^OZ_TESTENV_DIR=$run/(hub|b|c)\$" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true; }
sleeping() { for p in $(in_pods); do [ "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" != "sleep 600 " ] || return 0; done; return 1; }
KUBECONFIG="$run/b/users/alice.kubeconfig" "$run/hub/bin/kubectl" exec "$pod" -- sleep 600 >/dev/null 2>&1 &
exec_client=$!
for _ in $(seq 300); do sleeping && break; sleep 0.1; done
sleeping || fail "alice's kubectl exec -- sleep 600 on b did not start"
pids=$({ pgrep -g "$leader"; pgrep -f "$run/"; in_pods; } | sort -u | paste -sd, -)
ps -o pid=,lstart=,args= -p "$pids" | sort >"$out.started"
for what in hack/run-fleet.sh /debug/oz-manager "kube-testenv run --work-dir $run/hub" \
  "kube-testenv run --work-dir $run/b" "kube-testenv run --work-dir $run/c" /kwok ' sleep 600$'; do
  grep -q -- "$what" "$out.started" || fail "$what is not among what the run started: $(cat "$out.started")"
done
[ "$(grep -c /debug/oz-manager "$out.started")" = 3 ] || fail "not three oz-managers among what the run started"
stopping=$SECONDS
kill -INT -- "-$leader"
wait "$leader" 2>/dev/null || true
left() { { ps -o pid=,lstart=,args= -p "$pids" || true; } | sort | comm -12 - "$out.started"; pgrep -fa "$run/" || true; }
for _ in $(seq 600); do
  [ -z "$(left)" ] && break
  sleep 0.1
done
[ -z "$(left)" ] || fail "Ctrl-C left processes behind: $(left)"
echo "Ctrl-C stopped everything in $((SECONDS - stopping)) s"
leader=""
wait "$exec_client" 2>/dev/null || true
[ -z "$own_run" ] || rm -rf "$run"
rm -f "$out" "$out".*
echo "make run-fleet: 6 passed, 0 failed ($((SECONDS - started)) s)"
