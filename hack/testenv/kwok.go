package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

// Simulated nodes: a KWOK process (sigs.k8s.io/kwok, built by hack/testenv.sh build-kwok) plays a
// kubelet for N nodes. It moves their pods to Running and Ready, and serves the kubelet API on
// 127.0.0.1, so exec, attach, logs and port-forward go through the real apiserver to it; an exec
// runs its command as a local process in a directory of the pod's own.
//
// What a kubelet does and kwok does not, this file does: when a pod goes, every process exec'd
// into it is killed, which ends those streams; when the control plane stops, so does every
// process kwok started. It finds them by two environment variables each one carries:
// OZ_TESTENV_DIR (this control plane's work dir, inherited from kwok) and OZ_TESTENV_POD
// (namespace/name, from the pod's kwok Exec object, which prepare creates before the pod is bound).
const (
	nodeAnnotation = "kwok.x-k8s.io/node"
	envWorkDir     = "OZ_TESTENV_DIR"
	envPod         = "OZ_TESTENV_POD"
)

var execGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "execs"}

type kwokNodes struct {
	workDir string
	names   []string
	port    int
	client  kubernetes.Interface
	dynamic dynamic.Interface
	cmd     *exec.Cmd
	exited  chan struct{}
	// prepared holds the UIDs of pods whose Exec config exists: the binder and the pod watcher
	// both ask for it, and only the first asks the apiserver.
	prepared sync.Map
}

// nodeName is the name of the i-th simulated node.
func nodeName(i int) string { return fmt.Sprintf("kwok-node-%d", i) }

// startKwok installs kwok's Exec CRD, starts kwok for `count` nodes, creates the nodes and
// waits until they are Ready. kwokDir holds the kwok binary, its stages and the CRD.
func startKwok(ctx context.Context, workDir, kwokDir string, count int, pki *pkiFiles, adminKubeconfig string) (*kwokNodes, error) {
	config, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig)
	if err != nil {
		return nil, err
	}
	config.QPS, config.Burst = 200, 400
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	k := &kwokNodes{workDir: workDir, client: client, dynamic: dyn, exited: make(chan struct{})}
	for i := 0; i < count; i++ {
		k.names = append(k.names, nodeName(i))
	}
	if err := installCRD(ctx, dyn, filepath.Join(kwokDir, "execs-crd.yaml")); err != nil {
		return nil, fmt.Errorf("installing kwok's Exec CRD: %w", err)
	}
	stateDir := filepath.Join(workDir, "kwok")
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	configFile, err := writeKwokConfig(stateDir, kwokDir)
	if err != nil {
		return nil, err
	}
	// The port is recorded in each node's status, so a restarted control plane must reuse it.
	if k.port, err = kubeletPort(filepath.Join(stateDir, "port")); err != nil {
		return nil, err
	}
	address := "127.0.0.1:" + strconv.Itoa(k.port)
	logFile, err := os.OpenFile(filepath.Join(workDir, "logs", "kwok.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	k.cmd = exec.Command(filepath.Join(kwokDir, "kwok"),
		"--kubeconfig="+adminKubeconfig,
		"--config="+configFile,
		"--manage-nodes-with-annotation-selector="+nodeAnnotation+"=fake",
		"--node-ip=127.0.0.1", "--node-name=127.0.0.1",
		"--node-port="+strconv.Itoa(k.port), "--server-address="+address,
		"--tls-cert-file="+pki.kubeletCert, "--tls-private-key-file="+pki.kubeletKey,
		// Pod IPs outside the service range (10.0.0.0/24).
		"--cidr=10.244.0.1/16",
		"--enable-crds=Exec",
	)
	k.cmd.Env = append(os.Environ(), envWorkDir+"="+workDir)
	k.cmd.Stdout, k.cmd.Stderr = logFile, logFile
	// kwok must not outlive this process, however it ends.
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kwok: %w", err)
	}
	go func() { _ = k.cmd.Wait(); logFile.Close(); close(k.exited) }()

	if err := k.createNodes(ctx); err != nil {
		k.stop()
		return nil, err
	}
	if err := k.waitNodesReady(ctx, 60*time.Second); err != nil {
		k.stop()
		return nil, err
	}
	if err := k.removeNotReadyTaints(ctx); err != nil {
		k.stop()
		return nil, err
	}
	return k, nil
}

// removeNotReadyTaints does for the Ready nodes what the node lifecycle controller (which does
// not run here) does: the apiserver taints every new node node.kubernetes.io/not-ready, and
// only that controller lifts it. DaemonSet pods do not tolerate it.
func (k *kwokNodes) removeNotReadyTaints(ctx context.Context) error {
	for _, name := range k.names {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			node, err := k.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			kept := node.Spec.Taints[:0]
			for _, t := range node.Spec.Taints {
				if t.Key != v1.TaintNodeNotReady {
					kept = append(kept, t)
				}
			}
			if len(kept) == len(node.Spec.Taints) {
				return nil
			}
			node.Spec.Taints = kept
			_, err = k.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("removing the not-ready taint from node %s: %w", name, err)
		}
	}
	return nil
}

// writeKwokConfig writes kwok's --config: the stages that make nodes and pods Ready and delete
// pods (copied from the kwok module by the build), plus where attach, logs and port-forward go.
func writeKwokConfig(stateDir, kwokDir string) (string, error) {
	stages, err := os.ReadFile(filepath.Join(kwokDir, "stages.yaml"))
	if err != nil {
		return "", err
	}
	// What `kubectl logs` and `kubectl attach` show for every container: one line, in the CRI
	// log format kwok reads.
	logsFile := filepath.Join(stateDir, "container.log")
	line := time.Now().UTC().Format(time.RFC3339Nano) + " stdout F oz-testenv: a container on a kwok node\n"
	if err := os.WriteFile(logsFile, []byte(line), 0o600); err != nil {
		return "", err
	}
	streaming := fmt.Sprintf(`---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata: {name: all-containers}
spec:
  logs: [{logsFile: %[1]q}]
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterAttach
metadata: {name: all-containers}
spec:
  attaches: [{logsFile: %[1]q}]
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterPortForward
metadata: {name: all-ports}
spec:
  # Every port of every pod answers with one line, then echoes what it is sent.
  forwards: [{command: [sh, -c, "echo oz-testenv port-forward; exec cat"]}]
`, logsFile)
	path := filepath.Join(stateDir, "config.yaml")
	return path, os.WriteFile(path, append(append(stages, '\n'), streaming...), 0o600)
}

// kubeletPort is the port kwok serves the kubelet API on: the one recorded in path by an
// earlier run of this work dir, or a free one.
func kubeletPort(path string) (int, error) {
	if data, err := os.ReadFile(path); err == nil {
		return strconv.Atoi(strings.TrimSpace(string(data)))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port, os.WriteFile(path, []byte(strconv.Itoa(port)), 0o600)
}

func installCRD(ctx context.Context, dyn dynamic.Interface, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &crd.Object); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		got, err := crds.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err == nil {
			conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conditions {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("CRD %s not established within 30s", crd.GetName())
}

func (k *kwokNodes) createNodes(ctx context.Context) error {
	for _, name := range k.names {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{nodeAnnotation: "fake"},
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
			},
		}}
		if _, err := k.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", name, err)
		}
	}
	return nil
}

func (k *kwokNodes) waitNodesReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		notReady := []string{}
		for _, name := range k.names {
			node, err := k.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || !nodeReady(node) {
				notReady = append(notReady, name)
			}
		}
		if len(notReady) == 0 {
			return nil
		}
		select {
		case <-k.exited:
			return fmt.Errorf("kwok exited while starting; see logs/kwok.log")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nodes %v not Ready within %s; see logs/kwok.log", notReady, timeout)
		}
	}
}

func nodeReady(node *v1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// prepare gives a pod its kwok Exec config before it lands on a node: commands exec'd into it
// run in its own directory and carry its markers. Owned by the pod, so it goes with it.
func (k *kwokNodes) prepare(ctx context.Context, pod *v1.Pod) error {
	if _, done := k.prepared.LoadOrStore(pod.UID, struct{}{}); done {
		return nil
	}
	if err := k.createExec(ctx, pod); err != nil {
		k.prepared.Delete(pod.UID) // asked again at the pod's next event
		return err
	}
	return nil
}

func (k *kwokNodes) createExec(ctx context.Context, pod *v1.Pod) error {
	dir := filepath.Join(k.workDir, "pods", pod.Namespace, pod.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	object := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "Exec",
		"metadata": map[string]any{
			"name":      pod.Name,
			"namespace": pod.Namespace,
			"ownerReferences": []any{map[string]any{
				"apiVersion": "v1", "kind": "Pod", "name": pod.Name, "uid": string(pod.UID),
			}},
		},
		"spec": map[string]any{"execs": []any{map[string]any{"local": map[string]any{
			"workDir": dir,
			"envs": []any{
				map[string]any{"name": envPod, "value": pod.Namespace + "/" + pod.Name},
				map[string]any{"name": "POD_NAME", "value": pod.Name},
				map[string]any{"name": "POD_NAMESPACE", "value": pod.Namespace},
			},
		}}}},
	}}
	_, err := k.dynamic.Resource(execGVR).Namespace(pod.Namespace).Create(ctx, object, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err) {
		// Forbidden: the namespace is being deleted, and so is the pod.
		return nil
	}
	return err
}

// watchPods prepares pods created with a node already set (the binder prepares the others),
// and ends every process exec'd into a pod once the pod is being deleted, as a kubelet
// stopping its containers would.
func (k *kwokNodes) watchPods(ctx context.Context) {
	factory := informers.NewSharedInformerFactory(k.client, 12*time.Hour)
	onPod := func(obj any) {
		pod := obj.(*v1.Pod)
		if pod.DeletionTimestamp != nil {
			killProcesses(k.workDir, pod.Namespace+"/"+pod.Name)
			return
		}
		if pod.Spec.NodeName != "" && k.isOurNode(pod.Spec.NodeName) {
			_ = k.prepare(ctx, pod) // on failure, retried at the pod's next event
		}
	}
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onPod,
		UpdateFunc: func(_, obj any) { onPod(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				killProcesses(k.workDir, pod.Namespace+"/"+pod.Name)
				k.prepared.Delete(pod.UID)
			}
		},
	})
	factory.Start(ctx.Done())
}

func (k *kwokNodes) isOurNode(name string) bool {
	for _, n := range k.names {
		if n == name {
			return true
		}
	}
	return false
}

// stop ends kwok and every process it started.
func (k *kwokNodes) stop() {
	if k.cmd != nil && k.cmd.Process != nil {
		_ = k.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-k.exited:
		case <-time.After(2 * time.Second):
			_ = k.cmd.Process.Kill()
		}
	}
	killProcesses(k.workDir, "")
}

// killProcesses SIGKILLs every process started for this control plane (pod "" ) or for one pod
// ("namespace/name"), found by the environment markers kwok's exec gives each one.
func killProcesses(workDir, pod string) {
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	wantDir := []byte(envWorkDir + "=" + workDir)
	wantPod := []byte(envPod + "=" + pod)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		var inDir, inPod bool
		for _, kv := range bytes.Split(environ, []byte{0}) {
			inDir = inDir || bytes.Equal(kv, wantDir)
			inPod = inPod || bytes.Equal(kv, wantPod)
		}
		if inDir && (pod == "" || inPod) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
