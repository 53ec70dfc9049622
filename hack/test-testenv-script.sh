#!/usr/bin/env bash
# Checks hack/testenv.sh's interface as a user would use it: up with a user, kubectl as that
# user, the apiserver presenting its webhook client certificate to a webhook, and down leaving
# nothing behind; then up with kwok nodes (and no webhook client certificate), a pod that runs,
# an exec into it, and down ending every process kwok started, even after the control plane was
# killed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=$(mktemp -d)/testenv
trap '"$here/testenv.sh" down "$dir" >/dev/null 2>&1 || true' EXIT

"$here/testenv.sh" up "$dir" --user alice:devs,auditors --webhook-client-cert
pid=$(cat "$dir/pid")
whoami=$("$here/testenv.sh" kubectl --kubeconfig "$dir/users/alice.kubeconfig" auth whoami)
grep -q 'Username *alice' <<<"$whoami" || { echo "auth whoami did not print alice:"; echo "$whoami"; exit 1; }
grep -q 'Groups *\[devs auditors system:authenticated\]' <<<"$whoami" \
  || { echo "auth whoami did not print alice's groups:"; echo "$whoami"; exit 1; }
# DIR/env puts the bundled kubectl on PATH with the admin kubeconfig.
(source "$dir/env" && kubectl get namespace default -o name) | grep -qx 'namespace/default'

# --webhook-client-cert: the apiserver presents the certificate ready.json names to a webhook
# that requires one from ready.json's CA (openssl's test server, -Verify: no certificate, no
# handshake), and the webhook sees its CN.
field() { sed -n "s/.*\"$1\": \"\(.*\)\".*/\1/p" "$dir/ready.json"; }
ca=$(field webhookClientCaFile)
[ -f "$ca" ] && [ -f "$(field webhookClientCertFile)" ] && [ -f "$(field webhookClientKeyFile)" ] \
  || { echo "ready.json names no webhook client CA, certificate and key:"; cat "$dir/ready.json"; exit 1; }
openssl verify -CAfile "$ca" "$(field webhookClientCertFile)" >/dev/null
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
openssl s_server -accept "127.0.0.1:$port" -naccept 1 -Verify 1 -verify_return_error -CAfile "$ca" \
  -cert "$dir/pki/apiserver.crt" -key "$dir/pki/apiserver.key" -www >"$dir/s_server.out" 2>&1 &
s_server=$!
(
  source "$dir/env"
  kubectl apply -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: client-cert-probe}
webhooks:
- name: client-cert-probe.testenv.oz
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  timeoutSeconds: 5
  clientConfig: {url: "https://127.0.0.1:$port/", caBundle: $(base64 -w0 "$dir/pki/serving-ca.crt")}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
YAML
  # The apiserver picks up a new webhook configuration within moments: create until it calls.
  for i in $(seq 300); do
    grep -q 'CN = kube-apiserver-webhook-client' "$dir/s_server.out" && break
    kubectl create configmap "probe-$i" --dry-run=server >/dev/null
    sleep 0.1
  done
)
kill "$s_server" 2>/dev/null || true
grep -q 'depth=0 CN = kube-apiserver-webhook-client' "$dir/s_server.out" \
  || { echo "the apiserver presented no webhook client certificate:"; cat "$dir/s_server.out"; exit 1; }

"$here/testenv.sh" down "$dir"
if kill -0 "$pid" 2>/dev/null; then echo "the control plane (pid $pid) survived down"; exit 1; fi
[ ! -e "$dir" ] || { echo "down left $dir behind"; exit 1; }

# Nodes: a Deployment's pod runs on a kwok node and exec reaches it. Then the control plane is
# killed outright (kwok dies with it, the exec'd process does not) and down ends what is left.
"$here/testenv.sh" up "$dir" --nodes 1 --controllers all
! grep -q webhookClientCaFile "$dir/ready.json" || { echo "webhook client certificate without the option"; exit 1; }
(
  source "$dir/env"
  kubectl create deployment web --image=any >/dev/null
  kubectl rollout status deployment/web --timeout=120s >/dev/null
  pod=$(kubectl get pods -l app=web -o jsonpath='{.items[0].metadata.name}')
  out=$(kubectl exec "$pod" -- sh -c 'echo ran in $POD_NAME')
  [ "$out" = "ran in $pod" ] || { echo "exec printed: $out"; exit 1; }
  kubectl exec "$pod" -- sleep 600 >/dev/null 2>&1 &
  for _ in $(seq 100); do pgrep -f '^sleep 600$' >/dev/null && break; sleep 0.1; done
)
marker="OZ_TESTENV_DIR=$(cd "$dir" && pwd)"
left() { grep -lzxF "$marker" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true; }
[ -n "$(left)" ] || { echo "no process carries $marker: the exec did not run"; exit 1; }
kill -9 "$(cat "$dir/pid")"
"$here/testenv.sh" down "$dir"
[ -z "$(left)" ] || { echo "down left processes of the control plane behind: $(left)"; exit 1; }
echo "testenv.sh: 6 passed, 0 failed"
