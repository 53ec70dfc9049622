#!/usr/bin/env bash
# `make run`: a local control plane, oz's CRDs, oz-manager with its webhooks on 127.0.0.1, and a
# demo namespace with a Deployment, its (simulated) pods and two templates for group devs.
# It prints the commands to get access as alice. Ctrl-C stops everything.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
run="$root/.run"
dir="$run/testenv"
testenv="$root/hack/testenv.sh"
webhook_port=${OZ_WEBHOOK_PORT:-9443}
metrics_port=${OZ_METRICS_PORT:-8080}

mkdir -p "$run"
"$testenv" down "$dir" 2>/dev/null || true
echo "building oz-manager..." >&2
cargo build --quiet --bin oz-manager --manifest-path "$root/Cargo.toml"
manager="${CARGO_TARGET_DIR:-$root/target}/debug/oz-manager"

"$testenv" up "$dir" --user alice:devs --user carol:devs --user bob:qa --controllers gc,namespace
# shellcheck disable=SC1091
source "$dir/env"
manager_pid=""
cleanup() {
  if [ -n "$manager_pid" ] && kill "$manager_pid" 2>/dev/null; then
    # A graceful stop finishes in-flight reconciles and releases its Lease; don't wait forever.
    (sleep 10; kill -9 "$manager_pid" 2>/dev/null) &
    local watchdog=$!
    wait "$manager_pid" 2>/dev/null || true
    kill "$watchdog" 2>/dev/null || true
  fi
  "$testenv" down "$dir"
  echo; echo "stopped."
}
trap cleanup EXIT
trap 'exit 0' INT TERM

"$manager" crds | kubectl apply --server-side --field-manager=oz-make-run -f - >/dev/null
kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null
kubectl create namespace oz-system >/dev/null
"$manager" --namespace=oz-system \
  --webhook-url-base="https://127.0.0.1:$webhook_port" --webhook-port="$webhook_port" \
  --metrics-bind-address="127.0.0.1:$metrics_port" --health-probe-bind-address=0 \
  --audit-log-path="$run/audit.jsonl" --log-level=info >"$run/oz-manager.log" 2>&1 &
manager_pid=$!
# The webhooks must be registered before anyone creates a request.
for _ in $(seq 300); do
  kubectl get mutatingwebhookconfiguration oz-requests >/dev/null 2>&1 && break
  kill -0 "$manager_pid" 2>/dev/null || { tail -20 "$run/oz-manager.log" >&2; echo "oz-manager exited" >&2; exit 1; }
  sleep 0.1
done

kubectl create namespace demo >/dev/null
kubectl apply -n demo -f "$root/hack/demo/workload.yaml" >/dev/null
# The pods the ReplicaSet would make, controlled by it.
rs_uid=$(kubectl get replicaset web-7c5d8b6f9d -n demo -o jsonpath='{.metadata.uid}')
for i in 0 1; do
  kubectl create -n demo -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: web-$i
  labels: {app: web, pod-template-hash: 7c5d8b6f9d}
  ownerReferences:
    - {apiVersion: apps/v1, kind: ReplicaSet, name: web-7c5d8b6f9d, uid: "$rs_uid", controller: true, blockOwnerDeletion: true}
spec:
  containers:
    - name: app
      image: nginx:stable
YAML
done
# No kubelet runs: report the demo pods Running and Ready, as a kubelet would.
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for i in 0 1; do
  kubectl patch pod "web-$i" -n demo --subresource=status --type=merge -p "{\"status\":{\"phase\":\"Running\",\
\"podIP\":\"10.244.0.1$i\",\"startTime\":\"$now\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\
\"lastTransitionTime\":\"$now\"},{\"type\":\"ContainersReady\",\"status\":\"True\",\"lastTransitionTime\":\"$now\"}],\
\"containerStatuses\":[{\"name\":\"app\",\"image\":\"nginx\",\"imageID\":\"\",\"ready\":true,\"started\":true,\
\"restartCount\":0,\"state\":{\"running\":{\"startedAt\":\"$now\"}}}]}}" >/dev/null
done
for sample in exec_access_template pod_access_template; do
  kubectl apply -n demo -f "$root/config/samples/$sample.yaml" >/dev/null
done

cat <<TXT

oz is running against a real kube-apiserver $(kubectl version -o json 2>/dev/null | sed -n 's/.*"gitVersion": "\(v[^"]*\)".*/\1/p' | tail -1) on 127.0.0.1
(logs: $run/oz-manager.log, audit records: $run/audit.jsonl, metrics: http://127.0.0.1:$metrics_port/metrics).
Namespace demo has Deployment web (pods web-0, web-1) and templates web-exec and web-debug for group devs.

Get exec access as alice (in group devs), in another terminal:

  export PATH="$dir/bin:\$PATH" KUBECONFIG="$dir/users/alice.kubeconfig"
  kubectl create -n demo -f $root/config/samples/exec_access_request.yaml
  kubectl get execaccessrequests -n demo          # PHASE Ready, with POD and EXPIRES
  kubectl get oz -n demo -o wide
  kubectl auth can-i create pods/exec -n demo --subresource=exec    # no: only the granted pod
  kubectl describe execaccessrequests -n demo     # the access command and the conditions

bob (group qa) is refused at creation:
  kubectl --kubeconfig $dir/users/bob.kubeconfig create -n demo -f $root/config/samples/exec_access_request.yaml

Press Ctrl-C to stop everything.
TXT
while true; do sleep 3600 & wait $!; done
