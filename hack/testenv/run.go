package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
)

// user is a test identity given as NAME:GROUP1,GROUP2 on the command line.
type user struct {
	Name   string   `json:"name"`
	Groups []string `json:"groups"`
}

type userList []user

func (u *userList) String() string { return fmt.Sprint(*u) }

func (u *userList) Set(v string) error {
	name, groups, _ := strings.Cut(v, ":")
	if name == "" || name == "admin" {
		return fmt.Errorf("--user %q: want NAME:GROUP1,GROUP2 with a name other than admin", v)
	}
	parsed := user{Name: name, Groups: []string{}}
	for _, g := range strings.Split(groups, ",") {
		if g = strings.TrimSpace(g); g != "" {
			parsed.Groups = append(parsed.Groups, g)
		}
	}
	*u = append(*u, parsed)
	return nil
}

// readyInfo is written to ready.json once the control plane answers; the Rust test support and
// hack/testenv.sh read it.
type readyInfo struct {
	Server          string            `json:"server"`
	CAFile          string            `json:"caFile"`
	AdminKubeconfig string            `json:"adminKubeconfig"`
	Users           map[string]string `json:"users"`
	ClientCACert    string            `json:"clientCaCert"`
	ClientCAKey     string            `json:"clientCaKey"`
	EtcdURL         string            `json:"etcdUrl"`
	Controllers     []string          `json:"controllers"`
	Nodes           []string          `json:"nodes"`
	KubeletPort     int               `json:"kubeletPort,omitempty"`
	// With --webhook-client-cert: the CA a webhook verifies the apiserver's client certificate
	// against, and that certificate and key (to call a webhook as the apiserver does).
	WebhookClientCAFile   string `json:"webhookClientCaFile,omitempty"`
	WebhookClientCertFile string `json:"webhookClientCertFile,omitempty"`
	WebhookClientKeyFile  string `json:"webhookClientKeyFile,omitempty"`
	// The aggregation layer's front proxy: the CA an aggregated API server verifies the
	// apiserver's client certificate against, and that certificate and key (to call one as the
	// apiserver does, or to prove a forgery is refused).
	FrontProxyCAFile         string  `json:"frontProxyCaFile"`
	FrontProxyClientCertFile string  `json:"frontProxyClientCertFile"`
	FrontProxyClientKeyFile  string  `json:"frontProxyClientKeyFile"`
	Version                  string  `json:"version"`
	PID                      int     `json:"pid"`
	StartupSeconds           float64 `json:"startupSeconds"`
}

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	workDir := fs.String("work-dir", "", "directory for certificates, kubeconfigs, etcd data and logs (required)")
	controllers := fs.String("controllers", "", "in-process controllers to run: all, or some of "+strings.Join(knownControllers, ",")+" (default none)")
	nodes := fs.Int("nodes", 0, "simulated nodes to run pods on (kwok; needs --kwok-dir)")
	kwokDir := fs.String("kwok-dir", "", "what hack/testenv.sh build-kwok printed: the kwok binary, its stages and CRD")
	exitOnEOF := fs.Bool("exit-on-stdin-eof", false, "exit when standard input closes (the parent died)")
	removeOnExit := fs.Bool("remove-work-dir-on-exit", false, "delete --work-dir when exiting")
	timeout := fs.Duration("startup-timeout", 120*time.Second, "how long to wait for /readyz")
	webhookClientCert := fs.Bool("webhook-client-cert", false, "the apiserver presents a client certificate to admission webhooks (CN kube-apiserver-webhook-client,\n"+
		"from a CA of its own: ready.json's webhookClientCaFile)")
	port := fs.Int("port", 0, "the apiserver's port on 127.0.0.1 (default: a free one); to restart a control plane on\n"+
		"the same --work-dir, pass the port it had, so existing kubeconfigs and clients reach it again")
	var users userList
	fs.Var(&users, "user", "a test user NAME:GROUP1,GROUP2 (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *workDir == "" {
		return errors.New("--work-dir is required")
	}
	if *nodes > 0 && *kwokDir == "" {
		return errors.New("--nodes needs --kwok-dir (hack/testenv.sh build-kwok prints it)")
	}
	wanted, err := parseControllers(*controllers)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(*workDir)
	if err != nil {
		return err
	}
	for _, sub := range []string{"pki", "etcd", "logs", "users"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return err
		}
	}
	logFile, err := os.OpenFile(filepath.Join(dir, "logs", "testenv.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	redirectLogs(logFile)
	// A ready.json left by an earlier run in this work dir is not about this one.
	_ = os.Remove(filepath.Join(dir, "ready.json"))

	// Every way out goes through exit, so the work dir is removed however the process ends,
	// short of SIGKILL.
	exit := func(code int) {
		runCleanups()
		if *removeOnExit {
			_ = os.RemoveAll(dir)
		}
		os.Exit(code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopOnSignal(cancel, exit)
	if *exitOnEOF {
		go func() {
			// Nothing is ever written to stdin; a read returns only when the parent has gone.
			_, _ = io.Copy(io.Discard, os.Stdin)
			fmt.Fprintln(logFile, "stdin closed: parent is gone, exiting")
			exit(0)
		}()
	}
	plan := plan{users: users, controllers: wanted, nodes: *nodes, kwokDir: *kwokDir, port: *port, timeout: *timeout, webhookClientCert: *webhookClientCert, apiserverFlags: fs.Args()}
	if err := serve(ctx, dir, logFile, plan); err != nil {
		fmt.Fprintf(logFile, "kube-testenv: %v\n", err)
		exit(1)
	}
	exit(0)
	return nil
}

// serve starts everything, writes ready.json and blocks until ctx is cancelled or the apiserver
// stops. A work dir that a stopped run left behind (without --remove-work-dir-on-exit) is
// reused: its certificates and keys, and etcd's data, so a control plane can be restarted with
// its objects, clients and tokens intact (pass --port with the port it had).
func serve(ctx context.Context, dir string, logFile *os.File, p plan) error {
	started := time.Now()
	pki, reused, err := loadOrGeneratePKI(filepath.Join(dir, "pki"), p.users)
	if err != nil {
		return fmt.Errorf("generating certificates: %w", err)
	}
	if reused {
		fmt.Fprintf(logFile, "reusing the certificates and etcd data in %s\n", dir)
	}
	etcd, err := startEtcd(filepath.Join(dir, "etcd"), logFile)
	if err != nil {
		return fmt.Errorf("starting etcd: %w", err)
	}
	defer etcd.Close()

	apiserverFlags := p.apiserverFlags
	if p.webhookClientCert {
		admission, err := writeWebhookClientConfig(dir, pki)
		if err != nil {
			return fmt.Errorf("writing the webhook client configuration: %w", err)
		}
		apiserverFlags = append([]string{"--admission-control-config-file=" + admission}, apiserverFlags...)
	}
	server, apiErr, err := startAPIServer(ctx, dir, pki, etcd.URL, p.port, apiserverFlags)
	if err != nil {
		return fmt.Errorf("starting kube-apiserver: %w", err)
	}
	kubeconfigs, err := writeKubeconfigs(dir, server, pki, p.users)
	if err != nil {
		return err
	}
	if err := waitReady(ctx, kubeconfigs.admin, p.timeout, apiErr); err != nil {
		return err
	}
	var prepare func(context.Context, *v1.Pod) error
	nodeNames := []string{}
	kubeletPort := 0
	if p.nodes > 0 {
		kwok, err := startKwok(ctx, dir, p.kwokDir, p.nodes, pki, kubeconfigs.admin)
		if err != nil {
			return fmt.Errorf("starting the simulated nodes: %w", err)
		}
		onCleanup(kwok.stop)
		kwok.watchPods(ctx)
		prepare, nodeNames, kubeletPort = kwok.prepare, kwok.names, kwok.port
	}
	if err := startControllers(ctx, kubeconfigs.admin, p.controllers, prepare); err != nil {
		return fmt.Errorf("starting controllers: %w", err)
	}

	info := readyInfo{
		Server:          server,
		CAFile:          pki.servingCA,
		AdminKubeconfig: kubeconfigs.admin,
		Users:           kubeconfigs.users,
		ClientCACert:    pki.clientCACert,
		ClientCAKey:     pki.clientCAKey,
		EtcdURL:         etcd.URL,
		Controllers:     p.controllers,
		Nodes:           nodeNames,
		KubeletPort:     kubeletPort,

		FrontProxyCAFile:         pki.frontProxyCA,
		FrontProxyClientCertFile: pki.frontProxyClientCert,
		FrontProxyClientKeyFile:  pki.frontProxyClientKey,
		Version:                  kubernetesVersion,
		PID:                      os.Getpid(),
		StartupSeconds:           time.Since(started).Seconds(),
	}
	if p.webhookClientCert {
		info.WebhookClientCAFile, info.WebhookClientCertFile, info.WebhookClientKeyFile = pki.webhookCA, pki.webhookClientCert, pki.webhookClientKey
	}
	if err := writeJSONAtomically(filepath.Join(dir, "ready.json"), info); err != nil {
		return err
	}
	fmt.Fprintf(logFile, "ready in %.1fs at %s\n", info.StartupSeconds, server)

	select {
	case <-ctx.Done():
	case err := <-apiErr:
		return fmt.Errorf("kube-apiserver stopped: %w", err)
	}
	return nil
}

// plan is what `run` was asked to start.
type plan struct {
	users       userList
	controllers []string
	nodes       int
	kwokDir     string
	port        int
	timeout     time.Duration
	// webhookClientCert: the apiserver presents pki.webhookClientCert to admission webhooks.
	webhookClientCert bool
	apiserverFlags    []string
}

var (
	cleanupsMu sync.Mutex
	cleanups   []func()
)

// onCleanup registers f to run before the process exits, however it exits short of SIGKILL.
func onCleanup(f func()) {
	cleanupsMu.Lock()
	defer cleanupsMu.Unlock()
	cleanups = append(cleanups, f)
}

func runCleanups() {
	cleanupsMu.Lock()
	defer cleanupsMu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	cleanups = nil
}

// stopOnSignal cancels ctx on SIGTERM or SIGINT; a second signal, or a shutdown that takes more
// than 2 s, ends the process at once: a throwaway control plane has nothing worth draining.
func stopOnSignal(cancel context.CancelFunc, exit func(int)) {
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		cancel()
		select {
		case <-signals:
		case <-time.After(2 * time.Second):
		}
		exit(1)
	}()
}

func writeJSONAtomically(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
