package main

import (
	"context"
	"fmt"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// binder does the one job of kube-scheduler that tests need: it binds every pod without a node
// to one. It honours what workload controllers and tests put in a pod to choose its node (a
// nodeSelector, and the node-name affinity the DaemonSet controller sets) and otherwise spreads
// pods over the nodes; it knows nothing of resources, taints or topology. The real scheduler
// would add minutes to the control plane's build for behaviour oz does not depend on.
type binder struct {
	client kubernetes.Interface
	pods   corelisters.PodLister
	nodes  corelisters.NodeLister
	queue  workqueue.TypedRateLimitingInterface[string]
	// prepare runs before a pod is bound (kwok.go creates the pod's exec config there).
	prepare func(ctx context.Context, pod *v1.Pod) error

	mu     sync.Mutex
	placed map[string]int // pods bound per node by this binder, to spread them
}

func newBinder(client kubernetes.Interface, pods coreinformers.PodInformer, nodes coreinformers.NodeInformer, prepare func(context.Context, *v1.Pod) error) *binder {
	b := &binder{
		client:  client,
		pods:    pods.Lister(),
		nodes:   nodes.Lister(),
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		prepare: prepare,
		placed:  map[string]int{},
	}
	enqueue := func(obj any) {
		if pod, ok := obj.(*v1.Pod); ok && pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
			if key, err := cache.MetaNamespaceKeyFunc(pod); err == nil {
				b.queue.Add(key)
			}
		}
	}
	_, _ = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	// A pod that found no node is retried by the queue's backoff; a new node also retries
	// every waiting pod at once.
	_, _ = nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) {
			all, _ := b.pods.List(labels.Everything())
			for _, pod := range all {
				enqueue(pod)
			}
		},
	})
	return b
}

func (b *binder) run(ctx context.Context, workers int) {
	defer b.queue.ShutDown()
	for i := 0; i < workers; i++ {
		go func() {
			for b.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
}

func (b *binder) next(ctx context.Context) bool {
	key, quit := b.queue.Get()
	if quit {
		return false
	}
	defer b.queue.Done(key)
	if err := b.bind(ctx, key); err != nil {
		klog.FromContext(ctx).Info("binder: will retry", "pod", key, "err", err)
		b.queue.AddRateLimited(key)
		return true
	}
	b.queue.Forget(key)
	return true
}

func (b *binder) bind(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := b.pods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return nil
	}
	if pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != v1.DefaultSchedulerName {
		return nil // another scheduler's pod
	}
	node, err := b.choose(pod)
	if err != nil {
		return err
	}
	if b.prepare != nil {
		if err := b.prepare(ctx, pod); err != nil {
			return fmt.Errorf("preparing the node for it: %w", err)
		}
	}
	err = b.client.CoreV1().Pods(namespace).Bind(ctx, &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // deleted, or bound meanwhile
	}
	return err
}

// choose picks the node for pod: among schedulable nodes that match its nodeSelector and its
// required node-name affinity, the one this binder has placed the fewest pods on.
func (b *binder) choose(pod *v1.Pod) (string, error) {
	nodes, err := b.nodes.List(labels.SelectorFromSet(pod.Spec.NodeSelector))
	if err != nil {
		return "", err
	}
	names := requiredNodeNames(pod)
	var fits []string
	for _, node := range nodes {
		if node.Spec.Unschedulable || (names != nil && !names[node.Name]) {
			continue
		}
		fits = append(fits, node.Name)
	}
	if len(fits) == 0 {
		return "", fmt.Errorf("no node fits (nodeSelector %v, node names %v)", pod.Spec.NodeSelector, names)
	}
	sort.Strings(fits)
	b.mu.Lock()
	defer b.mu.Unlock()
	best := fits[0]
	for _, n := range fits[1:] {
		if b.placed[n] < b.placed[best] {
			best = n
		}
	}
	b.placed[best]++
	return best, nil
}

// requiredNodeNames are the node names a pod's required node affinity allows through
// `matchFields: metadata.name In [...]` (what the DaemonSet controller sets); nil when it
// names none.
func requiredNodeNames(pod *v1.Pod) map[string]bool {
	affinity := pod.Spec.Affinity
	if affinity == nil || affinity.NodeAffinity == nil || affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	var names map[string]bool
	for _, term := range affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, field := range term.MatchFields {
			if field.Key == "metadata.name" && field.Operator == v1.NodeSelectorOpIn {
				if names == nil {
					names = map[string]bool{}
				}
				for _, v := range field.Values {
					names[v] = true
				}
			}
		}
	}
	return names
}
