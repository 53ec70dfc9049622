#!/usr/bin/env bash
# Checks `make run` as a newcomer uses it, on a machine where port 9443 is already taken: it
# starts anyway on other ports, and its webhooks, metrics and health probes follow them (metrics
# not on 8080, where kubectl without a kubeconfig looks for an apiserver); it starts over what a
# killed earlier run left (lock, control plane, oz-manager, recordings) and cleans it up; a second
# `make run` over the same directory refuses to start, names the first, and leaves it running;
# the commands it prints (without -n demo: the users' contexts name it) get alice a Ready request
# and a real `kubectl exec` into the granted pod (and no other), recorded by the audit webhook;
# bob is refused; the approval demo's commands get alice's request through a template that needs
# a lead's approval approved by dave (who sees it in `ozctl approvals`), and her exec into the
# granted pod is recorded with dave as approver; ozctl's hints point at the right fix; the
# brokered demo's session of carol's (`kubectl oz exec`, into the pod's default container of two)
# is closed by oz at expiry (its line, exit code 3) and replayed by dave, and its start and end
# are audited;
# Ctrl-C leaves nothing the run started running, not even a command still exec'd into a pod.
#
# The run has a directory of its own (OZ_RUN_DIR, a new one under /tmp unless set), so this test
# works beside a `make run` of the same checkout; removed when the test passes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
own_run=""
[ -n "${OZ_RUN_DIR:-}" ] || { OZ_RUN_DIR=$(mktemp -d /tmp/oz-make-run.XXXXXX); own_run=1; }
export OZ_RUN_DIR
run=$OZ_RUN_DIR
dir="$run/testenv"
out=$(mktemp)
leader=""
# On any failure: stop `make run` and show what it printed.
failed() {
  [ -z "$leader" ] || { kill -INT -- "-$leader" 2>/dev/null || true; sleep 2; }
  # The earlier run's stand-ins, if make run did not stop them.
  [ -z "${earlier_manager:-}" ] || kill "$earlier_manager" 2>/dev/null || true
  [ -n "$leader" ] || "$root/hack/testenv.sh" down "$dir" >/dev/null 2>&1 || true
  echo "--- make run printed:" >&2; cat "$out" >&2
}
fail() { echo "$*" >&2; failed; echo "(the run's logs: $run)" >&2; exit 1; }
trap failed ERR

# Hold 9443 (oz-manager's default webhook port) the way any other program would. If something
# already holds it, that serves as well.
python3 -c '
import socket, sys, time
s = socket.socket()
# As servers do: a port left in TIME_WAIT by an earlier run is free.
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

# What an earlier run that was killed (kill -9) left in the directory: its lock file and pid, a
# control plane, an oz-manager (a stand-in with its command line), and a recording of a session
# in that cluster.
mkdir -p "$run/recordings/demo"
echo stale >"$run/recordings/demo/earlier-run.cast"
: >"$run/lock"
sh -c 'exit 0' & echo $! >"$run/pid"
"$root/hack/testenv.sh" up "$run/testenv" >/dev/null 2>&1 || fail "cannot start the earlier run's control plane"
earlier_plane=$(cat "$run/testenv/pid")
# Not this script's child, as the killed run's was not.
(python3 -c 'import time; time.sleep(600)' "--audit-log-path=$run/audit.jsonl" & echo $! >"$run/oz-manager.pid")
earlier_manager=$(cat "$run/oz-manager.pid")

# Job control gives `make run` a process group of its own (pgid = its pid), so the whole group can
# be signalled the way a terminal's Ctrl-C would. In a terminal SIGINT is never ignored; a shell
# started as a background job (nohup, some CI runners) inherits it ignored, and a shell cannot
# trap a signal ignored on entry: env restores the terminal's disposition.
set -m
(cd "$root" && exec env --default-signal=INT,QUIT make --no-print-directory run) >"$out" 2>&1 &
leader=$!
set +m
# Up to 20 minutes: on a new machine make run first builds oz-manager, the control plane and kwok.
for _ in $(seq 12000); do grep -q 'Press Ctrl-C' "$out" && break; kill -0 "$leader" 2>/dev/null || break; sleep 0.1; done
grep -q 'Press Ctrl-C' "$out" || fail "make run did not get ready"
# make runs the script itself, without a shell in between.
script=$(pgrep -P "$leader" -f hack/run-local.sh || true)
[ -n "$script" ] || fail "hack/run-local.sh is not running under make run ($leader)"
[ ! -e "$run/recordings/demo/earlier-run.cast" ] || fail "make run kept the recordings of an earlier run"
# A process killed but not yet reaped (a zombie) is not running.
running() { local state; state=$(ps -o stat= -p "$1") && [[ $state != Z* ]]; }
! running "$earlier_plane" || fail "make run left the earlier run's control plane ($earlier_plane) running"
! running "$earlier_manager" || fail "make run left the earlier run's oz-manager ($earlier_manager) running"

# 1. The free-port fallback: another webhook port, said so, and registered with the apiserver.
webhook_port=$(sed -n 's/^oz-manager: webhooks on port \([0-9]*\),.*/\1/p' "$out")
[ -n "$webhook_port" ] && [ "$webhook_port" != 9443 ] || fail "make run did not move off port 9443"
grep -q "port 9443 is taken: oz-manager's webhooks use port $webhook_port" "$out" \
  || fail "make run did not say it moved the webhooks to port $webhook_port"
admin() { KUBECONFIG="$dir/kubeconfig" "$dir/bin/kubectl" "$@"; }
urls=$(admin get mutatingwebhookconfigurations,validatingwebhookconfigurations \
  -o jsonpath='{range .items[*].webhooks[*]}{.clientConfig.url}{"\n"}{end}' | grep 127.0.0.1 || true)
[ -n "$urls" ] || fail "no webhook is registered"
if grep -v "^https://127.0.0.1:$webhook_port/" <<<"$urls"; then fail "webhooks registered on another port than $webhook_port"; fi
metrics_url=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$out")
health_url=$(grep -o 'http://127.0.0.1:[0-9]*/readyz' "$out")
curl -fsS "$metrics_url" >"$out.metrics" && grep -q '^# TYPE' "$out.metrics" || fail "no metrics at $metrics_url"
curl -fsS "$health_url" >"$out.health" && grep -qx ok "$out.health" || fail "not ready at $health_url"
metrics_port=${metrics_url##*:}; metrics_port=${metrics_port%%/*}
[ "$metrics_port" != 8080 ] || fail "make run serves oz's metrics on 8080, where kubectl without a kubeconfig looks for an apiserver"

# 2. A second make run over the same directory (a second terminal, or make test beside make run)
# refuses at once, names the first run and how to stop it, and leaves the first one running,
# recordings and all. Only the first run's script holds the lock, so killing it frees the lock.
mkdir -p "$run/recordings/demo"; echo live >"$run/recordings/demo/live-run.cast"
started=$SECONDS
if second=$(cd "$root" && timeout 120 make --no-print-directory run 2>&1 </dev/null); then
  fail "a second make run over $run started: $second"
fi
echo "$second"
[ $((SECONDS - started)) -lt 30 ] || fail "the second make run took $((SECONDS - started)) s to refuse"
grep -q "another run (pid $script) is using $run" <<<"$second" \
  || fail "the second make run did not name the first one (pid $script): $second"
grep -q "kill $script" <<<"$second" || fail "the second make run did not say how to stop the first: $second"
admin get namespace demo >/dev/null || fail "the second make run stopped the first one's control plane"
curl -fsS "$health_url" >/dev/null || fail "the second make run stopped the first one's oz-manager"
[ -e "$run/recordings/demo/live-run.cast" ] || fail "the second make run cleared the live run's recordings"
rm -f "$run/recordings/demo/live-run.cast"
holders=$(for fd in /proc/[0-9]*/fd/*; do
  [ "$(readlink "$fd" 2>/dev/null)" != "$run/lock" ] || { p=${fd#/proc/}; echo "${p%%/*}"; }
done | sort -u)
[ "$holders" = "$script" ] || fail "the lock $run/lock is held by $(echo $holders), not by the run's script $script alone"

# 3. Run exactly the commands it printed for alice, as she would paste them.
alice=$(sed -n '/^Get exec access as alice/,/^bob/p' "$out" | grep '^  ')
grep -q 'kubectl exec' <<<"$alice" || fail "no kubectl exec among alice's commands"
alice_out=$(bash -c "$alice" 2>&1) || true
echo "$alice_out"
eval "$(grep -E '^  export PATH=' <<<"$alice")"
phase=$(kubectl get execaccessrequests -n demo -o jsonpath='{.items[0].status.phase}')
[ "$phase" = Ready ] || fail "alice's request is $phase, not Ready"
pod=$(kubectl get execaccessrequests -n demo -o jsonpath='{.items[0].status.podName}')
# $POD_NAME is set in the pod, so this line shows the command ran there.
grep -qx "hello from $pod" <<<"$alice_out" || fail "alice's kubectl exec did not print 'hello from $pod'"
# The grant is for that pod only.
other=$(admin get pods -n demo -l app=web -o name | grep -v "^pod/$pod\$" | head -1)
[ -n "$other" ] || fail "the demo has only one pod"
if kubectl exec -n demo "${other#pod/}" -- true 2>"$out.other"; then fail "alice could exec into $other too"; fi
grep -q Forbidden "$out.other" || fail "exec into $other failed, but not as Forbidden: $(cat "$out.other")"
grep '"subresource":"exec"' "$run/audit.jsonl" | grep '"user":"alice"' | grep "\"pod\":\"$pod\"" \
  | grep -q '"grant":{"kind":"ExecAccessRequest"' || fail "no audit record of alice's exec into $pod"
# Her ozctl get, without -n: her context names namespace demo.
first_req=$(kubectl get execaccessrequests -n demo -o jsonpath='{.items[0].metadata.name}')
grep -q "^$first_req  *exec  *web-exec  *$pod  *Ready " <<<"$alice_out" \
  || fail "alice's ozctl get (no -n) did not list $first_req as Ready"

# 4. bob is refused, and told why.
if eval "$(grep -E '^  kubectl --kubeconfig .*bob' "$out")" 2>"$out.bob"; then
  fail "bob's request was accepted"
fi
grep -q 'allowedGroups' "$out.bob" || fail "bob's refusal does not say why: $(cat "$out.bob")"

# 5. The approval demo, run exactly as printed: alice asks with a reason, dave sees the request in
# his queue and approves it, alice's ozctl exec runs in the pod granted after that.
approval=$(sed -n '/^Access that needs approval/,/^Brokered sessions/p' "$out" | grep '^  ')
grep -q 'ozctl approve' <<<"$approval" || fail "no ozctl approve among the approval demo's commands"
approval_out=$(bash -c "set -e; $approval" 2>&1) || fail "the approval demo failed: $approval_out"
echo "$approval_out"
req=$(kubectl get execaccessrequests -n demo \
  -o jsonpath='{.items[?(@.spec.templateName=="web-exec-approved")].metadata.name}')
[ -n "$req" ] || fail "alice's request through web-exec-approved was not created"
grep -q "^$req .*alice .*web-exec-approved .*INC-42" <<<"$approval_out" \
  || fail "dave's ozctl approvals did not list $req with alice's reason and ticket"
grep -q "^Approved ExecAccessRequest $req as dave " <<<"$approval_out" || fail "ozctl approve did not say dave approved $req"
approved=$(kubectl get execaccessrequests -n demo "$req" \
  -o jsonpath='{.status.phase} {.status.approvalProgress} {.status.approvals[*].approver} {.spec.reason}')
[ "$approved" = "Ready 1/1 dave INC-42: web returns 502s" ] || fail "alice's approved request is: $approved"
approved_pod=$(kubectl get execaccessrequests -n demo "$req" -o jsonpath='{.status.podName}')
grep -qx "approved, hello from $approved_pod" <<<"$approval_out" \
  || fail "alice's ozctl exec did not print 'approved, hello from $approved_pod'"
grep '"subresource":"exec"' "$run/audit.jsonl" | grep '"user":"alice"' | grep "\"name\":\"$req\"" \
  | grep -q '"approvers":\["dave"\]' || fail "no audit record of alice's exec under $req naming dave as approver"
# The last line, `kubectl oz get requests`: ozctl as the kubectl plugin.
grep -q 'kubectl oz get requests' <<<"$approval" || fail "no kubectl oz command among the approval demo's commands"
[ "$(grep -c '^Phase: *Ready' <<<"$approval_out")" = 1 ] || fail "kubectl oz get requests $req did not show it Ready"

# 6. ozctl's hints point at the fix that works: bob, revoking alice's request, is told to ask
# alice or an admin; a duration above the template's maxDuration is said to be clamped; alice,
# who may not read oz's audit keys, is told where a key comes from.
bob_kc="$dir/users/bob.kubeconfig"
if ozctl --kubeconfig "$bob_kc" revoke "$req" 2>"$out.revoke"; then fail "bob revoked alice's request $req"; fi
grep -q "ask alice (who requested it) or " "$out.revoke" && ! grep -q "ask a cluster admin to grant it" "$out.revoke" \
  || fail "bob's refused revoke does not tell him to ask alice: $(cat "$out.revoke")"
ozctl create exec web-exec --duration 10h --no-wait >/dev/null 2>"$out.clamp" || fail "ozctl create --duration 10h failed: $(cat "$out.clamp")"
grep -q "10h0m0s.* maxDuration (4h0m0s).* 4h0m0s" "$out.clamp" || fail "ozctl create --duration 10h did not say it was clamped to 4h: $(cat "$out.clamp")"
if ozctl audit "$run/audit.jsonl" >/dev/null 2>"$out.audit"; then fail "alice read oz's audit keys"; fi
grep -q "kubectl get configmap oz-audit -n oz-system" "$out.audit" \
  || fail "ozctl audit does not say where a public key comes from: $(cat "$out.audit")"

# 7. The brokered demo, run exactly as printed, each line it prints stamped with when it came:
# carol's request (alice's grants cover both pods by now) through web-exec-brokered is Ready and
# Brokered, her plain kubectl exec is Forbidden, her session through oz (`kubectl oz exec`, no -c:
# the pod's default container, app, of two) prints its hello and is closed by oz after expiresAt
# but less than 5 s after it (oz's line, exit code 3); dave lists the session as Expired and its
# replay shows what carol saw; the audit file has the session's start and end.
brokered=$(sed -n '/^Brokered sessions/,/^Press Ctrl-C/p' "$out" | grep '^  ')
grep -q 'ozctl replay' <<<"$brokered" || fail "no ozctl replay among the brokered demo's commands"
stamped() { while IFS= read -r line; do printf '%s %s\n' "${EPOCHREALTIME/,/.}" "${line%$'\r'}"; done; }
started=$SECONDS
# Some of its commands fail on purpose (the plain kubectl exec, ozctl's exit code 3): the checks
# below say what each should have done. A session oz failed to close would sleep for an hour.
brokered_out=$(timeout 120 bash -c "$brokered" </dev/null 2>&1 | stamped) || true
echo "$brokered_out"
echo "(the brokered demo took $((SECONDS - started)) s)"
breq=$(kubectl get execaccessrequests -n demo \
  -o jsonpath='{.items[?(@.spec.templateName=="web-exec-brokered")].metadata.name}')
[ -n "$breq" ] || fail "carol's request through web-exec-brokered was not created"
# '|' apart: a Direct request has no status.sessionMode, and blanks would run together.
IFS='|' read -r mode bpod expires_at id < <(kubectl get execaccessrequests -n demo "$breq" \
  -o jsonpath='{.status.sessionMode}|{.status.podName}|{.status.expiresAt}|{.status.sessions[0].id}{"\n"}')
[ "$mode" = Brokered ] || fail "carol's request through web-exec-brokered has sessionMode '$mode'"
# Before the plain kubectl exec: the first kubectl wait, for Ready.
sed '/Forbidden/q' <<<"$brokered_out" | grep -q "/$breq condition met$" \
  || fail "carol's brokered request did not become Ready before her kubectl exec"
grep -q "(Forbidden): .*User \"carol\"" <<<"$brokered_out" || fail "carol's plain kubectl exec into $bpod was not Forbidden"
grep -q "^[0-9.]* brokered, hello from $bpod$" <<<"$brokered_out" \
  || fail "carol's session through oz did not print 'brokered, hello from $bpod'"
grep -q 'kubectl oz exec' <<<"$brokered" || fail "no kubectl oz exec among the brokered demo's commands"
closed=$(grep -m1 "^[0-9.]* oz: your access expired; session closed$" <<<"$brokered_out" | cut -d' ' -f1)
[ -n "$closed" ] || fail "carol's session did not end with oz's line"
grep -q "^[0-9.]* oz closed the session: your access expired$" <<<"$brokered_out" \
  || fail "ozctl exec did not print why oz closed the session"
exited=$(grep -m1 "^[0-9.]* exit code: " <<<"$brokered_out") || fail "kubectl oz exec's exit code was not printed"
[ "${exited#* exit code: }" = 3 ] || fail "kubectl oz exec exited with ${exited#* exit code: }, not 3"
expires=$(date -d "$expires_at" +%s.%N)
awk -v e="$expires" -v c="$closed" -v x="${exited%% *}" 'BEGIN { exit !(c >= e && x < e + 5) }' \
  || fail "carol's session was closed at $closed and ozctl exited at ${exited%% *}, not within 5 s after expiresAt $expires_at ($expires)"
echo "oz closed carol's session $(awk -v e="$expires" -v c="$closed" 'BEGIN { printf "%.3f", c - e }') s after expiresAt"
[ -n "$id" ] || fail "carol's brokered request lists no session"
grep -q "^[0-9.]* $id  *$breq  *carol  *$bpod/app .*Expired *$" <<<"$brokered_out" \
  || fail "dave's ozctl sessions did not list session $id of $breq, in container app, as Expired"
# The replay: what follows the sessions table.
replayed=$(sed -n "/^[0-9.]* $id /,\$p" <<<"$brokered_out")
grep -q "^[0-9.]* brokered, hello from $bpod$" <<<"$replayed" || fail "dave's replay of $id did not show carol's hello"
grep -q "^[0-9.]* oz: your access expired; session closed$" <<<"$replayed" || fail "dave's replay of $id did not show oz's line"
grep -q "replayed .* by carol: ended (expired)$" <<<"$replayed" || fail "dave's replay of $id did not say it was carol's, ended at expiry"
# oz writes the end's audit record just after the request's status: wait for it.
audit_of() {
  grep "\"event\":\"$1\"" "$run/audit.jsonl" | grep '"user":"carol"' | grep '"brokered":true' \
    | grep "\"name\":\"$breq\"" | grep "\"id\":\"$id\"" | grep -q "$2"
}
for _ in $(seq 100); do audit_of session-end '"endReason":"expired"' && break; sleep 0.1; done
audit_of session-start "\"pod\":\"$bpod\"" || fail "no session-start audit record of carol's session $id"
audit_of session-end '"endReason":"expired"' || fail "no session-end audit record of carol's session $id, ended at expiry"

# 8. Ctrl-C, with a command still running in alice's pod, ends everything the run started: its
# process group (make, the script, oz-manager, and anything else the script started, such as a
# background sleep, which ignores SIGINT), the control plane and kwok (started in a session of
# their own, with this run's directory in their command line) and what was exec'd into pods
# (which carry the control plane's work dir in their environment).
in_pods() { grep -lxzF "OZ_TESTENV_DIR=$dir" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true; }
# alice's `sleep 600`, not the brokered demo's `sleep 3600`, which is still running in its pod.
sleeping() { for p in $(in_pods); do [ "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" != "sleep 600 " ] || return 0; done; return 1; }
kubectl exec -n demo "$pod" -- sleep 600 >/dev/null 2>&1 &
exec_client=$!
for _ in $(seq 300); do sleeping && break; sleep 0.1; done
sleeping || fail "alice's kubectl exec -- sleep 600 did not start"
pids=$({ pgrep -g "$leader"; pgrep -f "$run/"; in_pods; } | sort -u | paste -sd, -)
# Each with its start time, so that a pid used again meanwhile does not count.
ps -o pid=,lstart=,args= -p "$pids" | sort >"$out.started"
# run-local.sh runs oz-manager from cargo's target directory, wherever CARGO_TARGET_DIR puts it.
for what in hack/run-local.sh /debug/oz-manager 'kube-testenv run' /kwok ' sleep 600$'; do
  grep -q -- "$what" "$out.started" || fail "$what is not among what the run started: $(cat "$out.started")"
done
kill -INT -- "-$leader"
wait "$leader" 2>/dev/null || true
left() { { ps -o pid=,lstart=,args= -p "$pids" || true; } | sort | comm -12 - "$out.started"; pgrep -fa "$run/" || true; }
for _ in $(seq 600); do
  [ -z "$(left)" ] && break
  sleep 0.1
done
[ -z "$(left)" ] || fail "Ctrl-C left processes behind: $(left)"
wait "$exec_client" 2>/dev/null || true
[ -z "$own_run" ] || rm -rf "$run"
rm -f "$out" "$out".*
echo "make run: 8 passed, 0 failed"
