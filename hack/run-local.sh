#!/usr/bin/env bash
# `make run`: a local control plane with the workload controllers and two simulated nodes (kwok),
# oz's CRDs, oz-manager with its webhooks on 127.0.0.1 (answering only the apiserver, which
# presents its webhook client certificate), and a demo namespace with Deployment web,
# whose pods the controllers create and the nodes run, two templates for group devs, a third
# that needs the approval of a member of group leads, and a fourth whose sessions go through oz.
# The demo users' kubeconfigs work in namespace demo, and ozctl is also `kubectl oz` there.
# It prints the commands that get alice access, ending with a real `kubectl exec` into the pod
# oz granted her; then alice asking through the approval template (with ozctl, saying why), dave
# (group leads) seeing and approving her request, and alice's exec; then a brokered session of
# carol's (in the pod's default container of two) that oz closes when her 30 seconds end, and
# dave (who may read recordings) replaying it. Ctrl-C stops everything, and leaves nothing running.
#
# oz-manager listens on four ports: admission webhooks (9443), the brokered sessions API (9444),
# metrics (9445) and health probes (8081). When one is taken it uses the next free port above
# it, and says so. OZ_WEBHOOK_PORT, OZ_SESSIONS_PORT, OZ_METRICS_PORT and OZ_HEALTH_PORT move
# where that search starts. Metrics are not on 8080, oz-manager's usual port: kubectl without a
# kubeconfig falls back to localhost:8080, and would get oz's metrics server for an apiserver.
# The apiserver reaches the sessions API through the ExternalName Service oz-system/oz-sessions
# (localhost), which oz-manager's APIService names.
#
# Everything a run makes (the control plane, logs, audit records, recordings) is in one
# directory: .run/ in the checkout, or OZ_RUN_DIR. One run at a time may use it: a second one
# says which run has it and stops, as starting would stop the first one's control plane.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "${OZ_RUN_DIR:-$root/.run}"
run=$(cd "${OZ_RUN_DIR:-$root/.run}" && pwd)
dir="$run/testenv"
testenv="$root/hack/testenv.sh"

# The lock is on fd 9, which only this script holds: every process that may outlive it is
# started with fd 9 closed. So a run killed with kill -9 leaves no stale lock (the kernel drops
# it with the process), and the next run cleans up what it left.
exec 9>>"$run/lock"
if ! flock -n 9; then
  other=$(cat "$run/pid" 2>/dev/null || true)
  echo "make run: another run (pid ${other:-unknown}) is using $run, and starting would stop its control plane." >&2
  echo "Stop it with Ctrl-C in its terminal (or: kill ${other:-PID}), or start this one in a directory of its own: OZ_RUN_DIR=/tmp/oz-run make run" >&2
  exit 1
fi
echo $$ >"$run/pid"

# What an earlier run left: its control plane (and kwok, and what was exec'd into its pods) if
# it was killed, its oz-manager, and its recordings, which name sessions of a cluster that is
# gone (its audit file goes once the new control plane is up, below).
"$testenv" down "$dir" 9>&- 2>/dev/null || true
if [ -f "$run/oz-manager.pid" ]; then
  old=$(cat "$run/oz-manager.pid")
  # Only if it is that run's oz-manager still: its command line names this directory.
  if tr '\0' ' ' <"/proc/$old/cmdline" 2>/dev/null | grep -qF -- "--audit-log-path=$run/audit.jsonl"; then
    kill -9 "$old" 2>/dev/null || true
  fi
  rm -f "$run/oz-manager.pid"
fi
rm -rf "$run/recordings"

manager_pid=""
cleanup() {
  if [ -n "$manager_pid" ] && kill "$manager_pid" 2>/dev/null; then
    # A graceful stop finishes in-flight reconciles and releases its Lease; don't wait forever.
    for _ in $(seq 100); do kill -0 "$manager_pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$manager_pid" 2>/dev/null || true
    wait "$manager_pid" 2>/dev/null || true
  fi
  rm -f "$run/oz-manager.pid"
  # Also ends kwok and every command anyone exec'd into a demo pod.
  "$testenv" down "$dir"
  echo; echo "stopped."
}
trap cleanup EXIT
trap 'exit 0' INT TERM

echo "building oz-manager and ozctl..." >&2
cargo build --quiet -p oz -p ozctl --bin oz-manager --bin ozctl --manifest-path "$root/Cargo.toml" 9>&-
manager="${CARGO_TARGET_DIR:-$root/target}/debug/oz-manager"
ozctl="${CARGO_TARGET_DIR:-$root/target}/debug/ozctl"

"$testenv" up "$dir" --user alice:devs --user carol:devs --user bob:qa --user dave:leads --controllers all --nodes 2 \
  --webhook-client-cert 9>&-
# The CA of the client certificate the apiserver presents to webhooks: oz answers no one else.
client_ca=$(sed -n 's/.*"webhookClientCaFile": "\(.*\)".*/\1/p' "$dir/ready.json")
# Each run's control plane is new, and so is the key oz signs the audit file's checkpoints with
# (kept in a Secret there): a file from an earlier run would verify against neither.
rm -f "$run"/audit.jsonl*
# shellcheck disable=SC1091
source "$dir/env"
# The demo's users find ozctl next to kubectl, also as the kubectl plugin `kubectl oz` (which
# oz's access instructions for brokered grants name).
ln -sf "$ozctl" "$dir/bin/ozctl"
ln -sf "$ozctl" "$dir/bin/kubectl-oz"
# The demo's users work in namespace demo: their contexts say so, so no command needs -n demo.
for user in alice bob carol dave; do
  kubectl config set-context --current --namespace=demo --kubeconfig="$dir/users/$user.kubeconfig" >/dev/null
done

# pick_port VAR PORT WHAT: sets VAR to the first port from PORT up that nothing answers on and
# that no earlier pick_port chose.
chosen=" "
pick_port() {
  local port=$2
  while [[ $chosen == *" $port "* ]] || (: <"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    port=$((port + 1))
  done
  chosen+="$port "
  printf -v "$1" %s "$port"
  [ "$port" = "$2" ] || echo "port $2 is taken: oz-manager's $3 use port $port" >&2
}

# start_manager: picks its ports, starts oz-manager and waits until it serves its webhooks
# (/readyz). Fails if oz-manager exits first, e.g. because a port was taken meanwhile.
start_manager() {
  pick_port webhook_port "${OZ_WEBHOOK_PORT:-9443}" webhooks
  pick_port sessions_port "${OZ_SESSIONS_PORT:-9444}" sessions
  pick_port metrics_port "${OZ_METRICS_PORT:-9445}" metrics
  pick_port health_port "${OZ_HEALTH_PORT:-8081}" "health probes"
  # The apiserver calls the webhooks at this URL; oz-manager registers it, with its CA, itself.
  "$manager" --namespace=oz-system \
    --webhook-url-base="https://127.0.0.1:$webhook_port" --webhook-port="$webhook_port" \
    --metrics-bind-address="127.0.0.1:$metrics_port" \
    --health-probe-bind-address="127.0.0.1:$health_port" \
    --webhook-client-ca-file="$client_ca" \
    --controllers=exec,pod,webhooks,sessions --sessions-port="$sessions_port" \
    --sessions-service=oz-system/oz-sessions --session-recordings="$run/recordings" \
    --audit-log-path="$run/audit.jsonl" --log-level=info >>"$run/oz-manager.log" 2>&1 9>&- &
  manager_pid=$!
  echo "$manager_pid" >"$run/oz-manager.pid"
  local waited=0
  until curl -fs "http://127.0.0.1:$health_port/readyz" >/dev/null; do
    if ! kill -0 "$manager_pid" 2>/dev/null; then
      manager_pid=""
      return 1
    fi
    [ $waited -lt 600 ] || { echo "oz-manager is not ready after 60s" >&2; exit 1; }
    sleep 0.1; waited=$((waited + 1))
  done
}

"$manager" crds | kubectl apply --server-side --field-manager=oz-make-run -f - >/dev/null
# kubectl wait fails at once, instead of waiting, on a CRD whose status the apiserver has not
# written yet ("accessor error: <nil>"): retry that for up to a minute, then wait for real.
for _ in $(seq 600); do
  kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null 2>&1 && break
  sleep 0.1
done
kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null
kubectl create namespace oz-system >/dev/null
# Brokered sessions: the apiserver dials https://localhost:<sessions port> for this Service.
kubectl create service externalname oz-sessions -n oz-system --external-name=localhost >/dev/null
: >"$run/oz-manager.log"
for attempt in 1 2 3; do
  start_manager && break
  tail -5 "$run/oz-manager.log" >&2
  if [ $attempt = 3 ] || ! grep -q 'in use' "$run/oz-manager.log"; then
    echo "oz-manager exited; its log: $run/oz-manager.log" >&2
    exit 1
  fi
  echo "a port was taken while oz-manager started; choosing others" >&2
done

kubectl create namespace demo >/dev/null
kubectl apply -n demo -f "$root/hack/demo/workload.yaml" >/dev/null
kubectl apply -n demo -f "$root/hack/demo/requesters.yaml" >/dev/null
kubectl apply -n demo -f "$root/hack/demo/approvers.yaml" >/dev/null
kubectl apply -n demo -f "$root/hack/demo/recording-readers.yaml" >/dev/null
for sample in exec_access_template pod_access_template exec_access_template_approval exec_access_template_brokered; do
  kubectl apply -n demo -f "$root/config/samples/$sample.yaml" >/dev/null
done
# The Deployment and ReplicaSet controllers create its pods, the binder puts them on the kwok
# nodes, and kwok reports them Running and Ready.
kubectl rollout status deployment/web -n demo --timeout=120s >/dev/null
pods=$(kubectl get pods -n demo -l app=web -o jsonpath='{.items[*].metadata.name}')

cat <<TXT

oz is running against a real kube-apiserver $(kubectl version -o json 2>/dev/null | sed -n 's/.*"gitVersion": "\(v[^"]*\)".*/\1/p' | tail -1) on 127.0.0.1, with nodes $(kubectl get nodes -o jsonpath='{.items[*].metadata.name}')
(simulated by kwok: \`kubectl exec\` runs its command as a local process, whatever the image).
oz-manager: webhooks on port $webhook_port, metrics http://127.0.0.1:$metrics_port/metrics, health http://127.0.0.1:$health_port/readyz
(logs: $run/oz-manager.log, audit records: $run/audit.jsonl; its webhooks answer only the apiserver,
whose client certificate they verify, so each record says "caller":"apiserver").
Namespace demo has Deployment web (pods ${pods// /, }, each with containers app and sidecar, app
the default that kubectl exec and ozctl exec use), templates web-exec and web-debug for group devs,
web-exec-approved for group devs, which needs the approval of one member of group leads (dave),
and web-exec-brokered for group devs, whose sessions go through oz (recordings: $run/recordings).
The users' kubeconfigs (alice, bob, carol, dave in $dir/users/) work in namespace demo.
ozctl is also the kubectl plugin: \`kubectl oz get\` is \`ozctl get\`.

Get exec access as alice (in group devs), in another terminal:

  export PATH="$dir/bin:\$PATH" KUBECONFIG="$dir/users/alice.kubeconfig"
  kubectl create -f $root/config/samples/exec_access_request.yaml
  kubectl wait execaccessrequests --all --for=jsonpath='{.status.phase}'=Ready --timeout=60s
  kubectl get execaccessrequests           # PHASE Ready, with POD and EXPIRES
  kubectl describe execaccessrequests      # the access command and the conditions
  kubectl auth can-i create pods/exec      # no: only the granted pod
  pod=\$(kubectl get execaccessrequests -o jsonpath='{.items[0].status.podName}')
  kubectl exec "\$pod" -- sh -c 'echo "hello from \$POD_NAME"'
  ozctl get                                # alice's requests

bob (group qa) is refused at creation:
  kubectl --kubeconfig $dir/users/bob.kubeconfig create -f $root/config/samples/exec_access_request.yaml

Access that needs approval: alice asks through web-exec-approved, saying why; dave (group leads)
sees her request and approves it; then alice gets her shell (docs/approvals.md):

  export PATH="$dir/bin:\$PATH" KUBECONFIG="$dir/users/alice.kubeconfig"
  req=\$(ozctl create exec web-exec-approved --reason 'INC-42: web returns 502s' --ticket INC-42 --no-wait | head -1)
  ozctl get requests "\$req"                                   # its reason; PendingApproval (0/1) once oz has seen it
  KUBECONFIG="$dir/users/dave.kubeconfig" ozctl approvals       # dave's queue: alice's request, her reason
  KUBECONFIG="$dir/users/dave.kubeconfig" ozctl approve "\$req" --comment 'ok for INC-42'
  ozctl exec "\$req" -- sh -c 'echo "approved, hello from \$POD_NAME"'
  kubectl oz get requests "\$req"                              # Ready, approved by dave

Brokered sessions: carol (group devs; alice's grants above already let her exec into both pods)
asks for 30 seconds through web-exec-brokered. Plain kubectl exec is Forbidden; kubectl oz exec
(ozctl exec) goes through oz, which records the session and, when her access expires, closes it
with a line of its own (exit code 3). dave (group leads, who may read recordings:
hack/demo/recording-readers.yaml) lists her sessions and replays one (docs/sessions.md):

  export PATH="$dir/bin:\$PATH" KUBECONFIG="$dir/users/carol.kubeconfig"
  req=\$(ozctl create exec web-exec-brokered --duration 30s --no-wait | head -1)
  kubectl wait execaccessrequest "\$req" --for=jsonpath='{.status.phase}'=Ready --timeout=60s
  pod=\$(kubectl get execaccessrequest "\$req" -o jsonpath='{.status.podName}')
  kubectl exec "\$pod" -- true                                 # Forbidden: only through oz
  kubectl oz exec "\$req" -- sh -c 'echo "brokered, hello from \$POD_NAME"; sleep 3600'; echo "exit code: \$?"
  kubectl wait execaccessrequest "\$req" --for=jsonpath='{.status.sessions[0].endReason}'=Expired --timeout=30s
  KUBECONFIG="$dir/users/dave.kubeconfig" ozctl sessions "\$req"     # the session's id first; REASON Expired
  id=\$(kubectl get execaccessrequest "\$req" -o jsonpath='{.status.sessions[0].id}')
  KUBECONFIG="$dir/users/dave.kubeconfig" ozctl replay "\$id"        # what carol saw, pauses cut to 2s

Press Ctrl-C to stop everything.
TXT
# Until Ctrl-C, which runs the trap at once (`wait` returns on a signal), or until oz-manager
# exits on its own. Waiting on oz-manager, not on a sleep, leaves nothing to end: a background
# sleep ignores the terminal's SIGINT, and outlived the run if this script was killed.
wait "$manager_pid" || true
manager_pid=""
echo "oz-manager exited; its log: $run/oz-manager.log" >&2
exit 1
