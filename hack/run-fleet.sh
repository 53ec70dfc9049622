#!/usr/bin/env bash
# `make run-fleet`: an oz fleet on three local control planes. The hub, where people ask and
# approve, has no nodes; spokes b and c each have the workload controllers, two kwok nodes and
# Deployment web in namespace demo, as `make run` has. Each runs oz-manager with its webhooks
# (answering only its own apiserver, whose client certificate they verify). The hub lists the
# spokes as ClusterProfiles (b labelled env=prod, c env=dev) and reaches each with a token of the
# ServiceAccount `oz-manager manifests --fleet-spoke` installs there, read by the secretreader
# credential plugin; each spoke's oz is told that account's user (--fleet-hub-user). On the hub,
# namespace demo has the fleet template web-exec-prod (hack/demo/fleet-template.yaml): group devs,
# spokes labelled env=prod, one approval by group leads.
# It prints the commands that get alice an exec on spoke b approved on the hub by dave: alice
# asks on the hub naming the spoke, dave approves there, and alice's own kubectl exec on b works,
# while on c she has nothing. Ctrl-C stops everything, and leaves nothing running.
#
# Everything a run makes (the control planes, logs, audit records) is in one directory:
# .run-fleet/ in the checkout, or OZ_RUN_DIR. As with `make run`, one run at a time may use it.
# Each oz-manager listens on three ports (webhooks, metrics, health probes), searched from
# 9443/9445/8081 for the hub, 9453/9455/8091 for b and 9463/9465/8101 for c; a port that is taken
# moves to the next free one, and the run says so.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "${OZ_RUN_DIR:-$root/.run-fleet}"
run=$(cd "${OZ_RUN_DIR:-$root/.run-fleet}" && pwd)
testenv="$root/hack/testenv.sh"
clusters=(hub b c)
spokes=(b c)
# The namespace of oz on every cluster, and so of the hub's ServiceAccount on the spokes; the
# hub's namespace of ClusterProfiles and of the token Secrets the plugin reads.
oz_ns=oz-system
fleet_ns=oz-fleet

# The lock, as make run's: fd 9, held by this script alone (everything that may outlive it is
# started with fd 9 closed), so a run killed with kill -9 leaves no stale lock.
exec 9>>"$run/lock"
if ! flock -n 9; then
  other=$(cat "$run/pid" 2>/dev/null || true)
  echo "make run-fleet: another run (pid ${other:-unknown}) is using $run, and starting would stop its control planes." >&2
  echo "Stop it with Ctrl-C in its terminal (or: kill ${other:-PID}), or start this one in a directory of its own: OZ_RUN_DIR=/tmp/oz-fleet make run-fleet" >&2
  exit 1
fi
echo $$ >"$run/pid"

# What an earlier run left if it was killed: its control planes (and kwok, and what was exec'd
# into their pods) and its oz-managers, each only if its command line still names this directory.
for cluster in "${clusters[@]}"; do
  "$testenv" down "$run/$cluster" 9>&- 2>/dev/null || true
  if [ -f "$run/oz-manager-$cluster.pid" ]; then
    old=$(cat "$run/oz-manager-$cluster.pid")
    if tr '\0' ' ' <"/proc/$old/cmdline" 2>/dev/null | grep -qF -- "--webhook-client-ca-file=$run/$cluster/"; then
      kill -9 "$old" 2>/dev/null || true
    fi
    rm -f "$run/oz-manager-$cluster.pid"
  fi
done
# Each run's control planes are new, and so are the keys the audit files' checkpoints are signed
# with: an earlier run's files would verify against none of them.
rm -f "$run"/audit-*.jsonl*

declare -A manager_pid=()
cleanup() {
  local cluster pid
  # All at once: a graceful stop finishes in-flight reconciles and releases the Lease.
  for pid in "${manager_pid[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${manager_pid[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -f "$run"/oz-manager-*.pid
  # A control plane still starting (the run failed or was stopped early): its `up` ends soon,
  # once ready or failed, and then `down` knows what to stop.
  wait
  # Also ends kwok and every command anyone exec'd into a demo pod; side by side, as they started.
  for cluster in "${clusters[@]}"; do "$testenv" down "$run/$cluster" & done
  wait
  echo; echo "stopped."
}
trap cleanup EXIT
trap 'exit 0' INT TERM

# The three control planes start side by side, while cargo builds: each mostly waits for its
# apiserver. The spokes are make run's (the workload controllers and two nodes, for web's pods);
# the hub runs nothing, and needs only the garbage collector (a request belongs to its template)
# and the namespace controller.
start_plane() {
  local cluster=$1; shift
  "$testenv" up "$run/$cluster" --user alice:devs --user dave:leads --webhook-client-cert "$@" \
    >"$run/up-$cluster.log" 2>&1 9>&-
}
start_plane hub --controllers gc,namespace & up_hub=$!
start_plane b --controllers all --nodes 2 & up_b=$!
start_plane c --controllers all --nodes 2 & up_c=$!

echo "building oz-manager and ozctl..." >&2
cargo build --quiet -p oz -p ozctl --bin oz-manager --bin ozctl --manifest-path "$root/Cargo.toml" 9>&-
manager="${CARGO_TARGET_DIR:-$root/target}/debug/oz-manager"
ozctl="${CARGO_TARGET_DIR:-$root/target}/debug/ozctl"
# The ClusterProfile CRD and the secretreader plugin (built once per machine).
tools=$("$testenv" build-tools 9>&-)

for cluster in "${clusters[@]}"; do
  up="up_$cluster"
  wait "${!up}" || { cat "$run/up-$cluster.log" >&2; echo "the control plane of $cluster did not start" >&2; exit 1; }
  rm -f "$run/up-$cluster.log"
done
# Every plane's kubectl is the same binary; the hub's bin also holds ozctl, for alice and dave.
export PATH="$run/hub/bin:$PATH"
ln -sf "$ozctl" "$run/hub/bin/ozctl"
ln -sf "$ozctl" "$run/hub/bin/kubectl-oz"
# on CLUSTER ARGS...: kubectl as CLUSTER's admin.
on() { local cluster=$1; shift; kubectl --kubeconfig "$run/$cluster/kubeconfig" "$@"; }
# The demo's users work in namespace demo everywhere: their contexts say so.
for cluster in "${clusters[@]}"; do
  for user in alice dave; do
    kubectl config set-context --current --namespace=demo --kubeconfig="$run/$cluster/users/$user.kubeconfig" >/dev/null
  done
done

# wait_for_crds CLUSTER: kubectl wait fails at once, instead of waiting, on a CRD whose status the
# apiserver has not written yet ("accessor error: <nil>"): retry that for up to a minute.
wait_for_crds() {
  for _ in $(seq 600); do
    on "$1" wait --for=condition=Established crd --all --timeout=60s >/dev/null 2>&1 && return
    sleep 0.1
  done
  on "$1" wait --for=condition=Established crd --all --timeout=60s >/dev/null
}

# Every cluster: oz's CRDs and namespaces; the hub also the ClusterProfile CRD and its fleet
# namespace. Each spoke: the hub's credential (ServiceAccount oz-system/oz-fleet-hub and its
# ClusterRole, which holds oz's templates and requests only).
for cluster in "${clusters[@]}"; do
  "$manager" crds | on "$cluster" apply --server-side --field-manager=oz-run-fleet -f - >/dev/null
  on "$cluster" create namespace "$oz_ns" >/dev/null
  on "$cluster" create namespace demo >/dev/null
done
on hub apply --server-side --field-manager=oz-run-fleet -f "$tools/clusterprofiles-crd.yaml" >/dev/null
on hub create namespace "$fleet_ns" >/dev/null
for spoke in "${spokes[@]}"; do
  "$manager" manifests --fleet-spoke --namespace "$oz_ns" \
    | on "$spoke" apply --server-side --field-manager=oz-run-fleet -f - >/dev/null
done
for cluster in "${clusters[@]}"; do wait_for_crds "$cluster"; done

# register SPOKE ENV: puts SPOKE on the hub. A token of the hub's ServiceAccount on SPOKE, bound
# to Secret oz-system/oz-fleet-hub-token there (deleting that Secret revokes it), goes into the
# hub's Secret oz-fleet/SPOKE, where the plugin reads it; ClusterProfile oz-fleet/SPOKE, labelled
# env=ENV, names SPOKE's server and CA, and the plugin's clusterName, under provider secretreader.
register() {
  local spoke=$1 env=$2 token server ca
  on "$spoke" create secret generic oz-fleet-hub-token -n "$oz_ns" >/dev/null
  token=$(on "$spoke" create token oz-fleet-hub -n "$oz_ns" --duration=168h \
    --bound-object-kind=Secret --bound-object-name=oz-fleet-hub-token)
  on hub create secret generic "$spoke" -n "$fleet_ns" --from-literal=token="$token" >/dev/null
  server=$(on "$spoke" config view --raw -o jsonpath='{.clusters[0].cluster.server}')
  ca=$(on "$spoke" config view --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
  on hub apply --server-side --field-manager=oz-run-fleet -f - >/dev/null <<YAML
apiVersion: multicluster.x-k8s.io/v1alpha1
kind: ClusterProfile
metadata: {name: $spoke, namespace: $fleet_ns, labels: {env: $env}}
spec: {displayName: $spoke, clusterManager: {name: oz-run-fleet}}
YAML
  # status is a subresource: the object's own apply leaves it out.
  on hub apply --server-side --field-manager=oz-run-fleet --subresource=status -f - >/dev/null <<YAML
apiVersion: multicluster.x-k8s.io/v1alpha1
kind: ClusterProfile
metadata: {name: $spoke, namespace: $fleet_ns}
status:
  accessProviders:
    - name: secretreader
      cluster:
        server: $server
        certificate-authority-data: $ca
        extensions:
          - name: client.authentication.k8s.io/exec
            extension: {clusterName: $spoke}
YAML
}
register b prod
register c dev

# The hub's provider file (--fleet-provider-file) runs the plugin for provider secretreader,
# with a hub kubeconfig whose context's namespace is the one it reads token Secrets from.
mkdir -p "$run/hub/fleet"
cp "$run/hub/kubeconfig" "$run/hub/fleet/plugin.kubeconfig"
kubectl config set-context --current --namespace="$fleet_ns" --kubeconfig="$run/hub/fleet/plugin.kubeconfig" >/dev/null
cat >"$run/hub/fleet/providers.json" <<JSON
{"providers": [{
  "name": "secretreader",
  "execConfig": {
    "apiVersion": "client.authentication.k8s.io/v1",
    "command": "$tools/secretreader-plugin",
    "provideClusterInfo": true,
    "env": [{"name": "KUBECONFIG", "value": "$run/hub/fleet/plugin.kubeconfig"}]
  }
}]}
JSON

# pick_port VAR PORT WHAT: sets VAR to the first port from PORT up that nothing answers on and
# that no earlier pick_port chose (as make run does).
chosen=" "
pick_port() {
  local port=$2
  while [[ $chosen == *" $port "* ]] || (: <"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    port=$((port + 1))
  done
  chosen+="$port "
  printf -v "$1" %s "$port"
  [ "$port" = "$2" ] || echo "port $2 is taken: $3 use port $port" >&2
}

# start_manager CLUSTER OFFSET FLAGS...: picks CLUSTER's ports (make run's, plus OFFSET), starts
# its oz-manager and waits until it serves its webhooks (/readyz). Fails if oz-manager exits
# first, e.g. because a port was taken meanwhile.
declare -A webhook_port=() metrics_port=() health_port=()
start_manager() {
  local cluster=$1 offset=$2; shift 2
  local client_ca log="$run/oz-manager-$cluster.log" pid waited=0
  pick_port "webhook_port[$cluster]" $((9443 + offset)) "$cluster's webhooks"
  pick_port "metrics_port[$cluster]" $((9445 + offset)) "$cluster's metrics"
  pick_port "health_port[$cluster]" $((8081 + offset)) "$cluster's health probes"
  # The CA of the client certificate this apiserver presents to webhooks: oz answers no one else.
  client_ca=$(sed -n 's/.*"webhookClientCaFile": "\(.*\)".*/\1/p' "$run/$cluster/ready.json")
  KUBECONFIG="$run/$cluster/kubeconfig" "$manager" --namespace="$oz_ns" \
    --webhook-url-base="https://127.0.0.1:${webhook_port[$cluster]}" --webhook-port="${webhook_port[$cluster]}" \
    --metrics-bind-address="127.0.0.1:${metrics_port[$cluster]}" \
    --health-probe-bind-address="127.0.0.1:${health_port[$cluster]}" \
    --webhook-client-ca-file="$client_ca" --controllers=exec,pod,webhooks \
    --log-level=info "$@" >>"$log" 2>&1 9>&- &
  pid=$!
  manager_pid[$cluster]=$pid
  echo "$pid" >"$run/oz-manager-$cluster.pid"
  until curl -fs "http://127.0.0.1:${health_port[$cluster]}/readyz" >/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      unset "manager_pid[$cluster]"
      return 1
    fi
    [ $waited -lt 600 ] || { echo "$cluster's oz-manager is not ready after 60s; its log: $log" >&2; exit 1; }
    sleep 0.1; waited=$((waited + 1))
  done
}

# start_with_retries CLUSTER OFFSET FLAGS...: start_manager, choosing other ports when one was
# taken while oz-manager started.
start_with_retries() {
  local cluster=$1 log="$run/oz-manager-$1.log"
  : >"$log"
  for attempt in 1 2 3; do
    start_manager "$@" && return
    tail -5 "$log" >&2
    if [ $attempt = 3 ] || ! grep -q 'in use' "$log"; then
      echo "$cluster's oz-manager exited; its log: $log" >&2
      exit 1
    fi
    echo "a port was taken while $cluster's oz-manager started; choosing others" >&2
  done
}

# The spokes first: their webhooks are what lets the hub's credential (and only it) write the
# hub's templates and requests there.
hub_user="system:serviceaccount:$oz_ns:oz-fleet-hub"
start_with_retries b 10 --fleet-hub-user="$hub_user" --audit-log-path="$run/audit-b.jsonl"
start_with_retries c 20 --fleet-hub-user="$hub_user" --audit-log-path="$run/audit-c.jsonl"
start_with_retries hub 0 --fleet-hub --fleet-provider-file="$run/hub/fleet/providers.json" \
  --fleet-namespace="$fleet_ns"

# The demo: Deployment web on the spokes; on the hub, who may ask and who may approve, and the
# fleet template, which the hub copies to b (env=prod) and not to c (env=dev).
for spoke in "${spokes[@]}"; do
  on "$spoke" apply -n demo -f "$root/hack/demo/workload.yaml" >/dev/null
done
on hub apply -n demo -f "$root/hack/demo/requesters.yaml" >/dev/null
on hub apply -n demo -f "$root/hack/demo/approvers.yaml" >/dev/null
on hub apply -n demo -f "$root/hack/demo/fleet-template.yaml" >/dev/null
for spoke in "${spokes[@]}"; do
  on "$spoke" rollout status deployment/web -n demo --timeout=120s >/dev/null
done
# Ready for alice once the hub says b holds the template.
synced=""
for _ in $(seq 1200); do
  synced=$(on hub get execaccesstemplate web-exec-prod -n demo \
    -o jsonpath='{range .status.clusters[*]}{.name}={.synced} {end}')
  [ "$synced" != "b=true " ] || break
  sleep 0.1
done
[ "$synced" = "b=true " ] || { echo "the hub did not put web-exec-prod on b in 120s (its clusters: ${synced:-none}); logs: $run/oz-manager-*.log" >&2; exit 1; }

pods() { on "$1" get pods -n demo -l app=web -o jsonpath='{.items[*].metadata.name}'; }
ports() { echo "webhooks on port ${webhook_port[$1]}, metrics http://127.0.0.1:${metrics_port[$1]}/metrics, health http://127.0.0.1:${health_port[$1]}/readyz"; }
cat <<TXT

An oz fleet is running on three local control planes (kube-apiserver $(on hub version -o json 2>/dev/null | sed -n 's/.*"gitVersion": "\(v[^"]*\)".*/\1/p' | tail -1), on 127.0.0.1):
  hub  where people ask and approve; no nodes. oz-manager --fleet-hub: $(ports hub)
  b    ClusterProfile b, env=prod; Deployment web (pods $(pods b)). oz-manager: $(ports b)
  c    ClusterProfile c, env=dev; Deployment web (pods $(pods c)). oz-manager: $(ports c)
(nodes are simulated by kwok: \`kubectl exec\` runs its command as a local process). Each oz-manager's
webhooks answer only its own apiserver. Logs: $run/oz-manager-{hub,b,c}.log, audit records of the
spokes: $run/audit-{b,c}.jsonl. Admin kubeconfigs: $run/{hub,b,c}/kubeconfig.
The hub reaches each spoke with a token of the spoke's ServiceAccount oz-system/oz-fleet-hub
(\`oz-manager manifests --fleet-spoke\`), kept on the hub in Secret $fleet_ns/<spoke>; deleting Secret
oz-system/oz-fleet-hub-token on a spoke revokes its token.
On the hub, namespace demo has the fleet template web-exec-prod (hack/demo/fleet-template.yaml):
group devs may exec into a pod of web on spokes labelled env=prod, once one member of group leads
approves. The hub keeps its copy on b (not on c). alice (devs) and dave (leads) have kubeconfigs on
every cluster ($run/<cluster>/users/), working in namespace demo.

alice asks the hub for an exec on spoke b; dave approves it on the hub; the hub has b grant it,
and alice's own kubectl exec on b works. In another terminal:

  export PATH="$run/hub/bin:\$PATH" KUBECONFIG="$run/hub/users/alice.kubeconfig"
  req=\$(kubectl create -f $root/hack/demo/fleet-request.yaml -o jsonpath='{.metadata.name}')   # spec.cluster: b
  kubectl wait execaccessrequest "\$req" --for=jsonpath='{.status.phase}'=PendingApproval --timeout=60s
  KUBECONFIG="$run/hub/users/dave.kubeconfig" ozctl approvals        # dave's queue: alice's request, her reason
  KUBECONFIG="$run/hub/users/dave.kubeconfig" ozctl approve "\$req" --comment 'ok for INC-7'
  kubectl wait execaccessrequest "\$req" --for=jsonpath='{.status.phase}'=Ready --timeout=60s
  kubectl get execaccessrequest "\$req"                               # Ready, with b's pod and when it expires
  pod=\$(kubectl get execaccessrequest "\$req" -o jsonpath='{.status.podName}')
  kubectl --kubeconfig $run/b/users/alice.kubeconfig exec "\$pod" -- sh -c 'echo "hello from \$POD_NAME on b"'
  kubectl --kubeconfig $run/c/users/alice.kubeconfig auth can-i create pods/exec   # no: nothing on c

Press Ctrl-C to stop everything.
TXT
# Until Ctrl-C, which runs the trap at once (`wait` returns on a signal), or until an oz-manager
# exits on its own.
wait -n "${manager_pid[@]}" || true
for cluster in "${clusters[@]}"; do
  kill -0 "${manager_pid[$cluster]}" 2>/dev/null || { echo "$cluster's oz-manager exited; its log: $run/oz-manager-$cluster.log" >&2; unset "manager_pid[$cluster]"; }
done
exit 1
