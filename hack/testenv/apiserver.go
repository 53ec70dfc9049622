package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	basecompatibility "k8s.io/component-base/compatibility"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// kubernetesVersion is stamped into the binary by build.sh (-X main.kubernetesVersion=...).
var kubernetesVersion = "unknown"

// startAPIServer runs kube-apiserver in this process, the way its own command does, on a
// listener bound here so no other process can take the port between probing and binding.
// port 0 picks a free port. It returns the server URL and a channel that receives the
// apiserver's exit error.
func startAPIServer(ctx context.Context, dir string, pki *pkiFiles, etcdURL string, port int, extraFlags []string) (string, <-chan error, error) {
	listener, err := listen(port)
	if err != nil {
		return "", nil, err
	}
	port = listener.Addr().(*net.TCPAddr).Port

	s := options.NewServerRunOptions()
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, set := range s.Flags().FlagSets {
		fs.AddFlagSet(set)
	}
	flags := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		// Without an explicit loopback advertise address the apiserver looks for a default route,
		// which offline machines lack; with it, the endpoint reconciler would reject loopback.
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + pki.apiserverCert,
		"--tls-private-key-file=" + pki.apiserverKey,
		"--cert-dir=" + filepath.Join(dir, "pki", "apiserver"),
		"--client-ca-file=" + pki.clientCACert,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + pki.saPublic,
		"--service-account-signing-key-file=" + pki.saPrivate,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=RBAC",
		// No controller creates the default ServiceAccount, and none releases PVC finalizers.
		"--disable-admission-plugins=ServiceAccount,StorageObjectInUseProtection",
		// As production clusters do: setting blockOwnerDeletion on an owner needs the right to
		// update its finalizers, so the */finalizers rules oz's RBAC carries are exercised.
		"--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
		// The simulated nodes' kubelet API (kwok.go) presents a certificate from the serving CA;
		// exec, attach, logs and port-forward verify it instead of trusting any server.
		"--kubelet-certificate-authority=" + pki.servingCA,
		"--kubelet-preferred-address-types=InternalIP",
		// The aggregation layer, as kubeadm sets it up: the apiserver proxies /apis/<group> of an
		// APIService to its server with this client certificate and the user in X-Remote-*
		// headers, and publishes the CA and names in kube-system/extension-apiserver-authentication
		// for that server to verify them.
		"--requestheader-client-ca-file=" + pki.frontProxyCA,
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + pki.frontProxyClientCert,
		"--proxy-client-key-file=" + pki.frontProxyClientKey,
		"--allow-privileged=true",
		"--shutdown-delay-duration=0s",
		"--profiling=false",
		"--v=1",
	}
	if err := fs.Parse(append(flags, extraFlags...)); err != nil {
		return "", nil, fmt.Errorf("apiserver flags: %w", err)
	}
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return "", nil, err
	}
	featureGate := s.GenericServerRunOptions.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
	if err := logsapi.ValidateAndApply(s.Logs, featureGate); err != nil {
		return "", nil, err
	}
	s.SecureServing.Listener = listener

	completed, err := s.Complete(ctx)
	if err != nil {
		return "", nil, err
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return "", nil, fmt.Errorf("invalid apiserver options: %v", errs)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, completed) }()
	return fmt.Sprintf("https://127.0.0.1:%d", port), done, nil
}

// listen binds 127.0.0.1:port. A fixed port may still be held for a moment by the process this
// one replaces (a restart on the same port), so that is retried for up to 10 s.
func listen(port int) (net.Listener, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil || port == 0 || time.Now().After(deadline) {
			return listener, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitReady polls /readyz as admin, then waits for the default namespace, which the apiserver
// creates shortly after it first reports ready.
func waitReady(ctx context.Context, adminKubeconfig string, timeout time.Duration, apiErr <-chan error) error {
	config, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case err := <-apiErr:
			return fmt.Errorf("kube-apiserver exited during startup: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			lastErr = fmt.Errorf("%w: %s", err, body)
			continue
		}
		if _, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			lastErr = err
			continue
		}
		return nil
	}
	return fmt.Errorf("control plane not ready within %s: %v", timeout, lastErr)
}
