package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/kubernetes/pkg/controller/clusterroleaggregation"
	"k8s.io/kubernetes/pkg/controller/daemon"
	"k8s.io/kubernetes/pkg/controller/deployment"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	namespacecontroller "k8s.io/kubernetes/pkg/controller/namespace"
	"k8s.io/kubernetes/pkg/controller/replicaset"
	"k8s.io/kubernetes/pkg/controller/statefulset"
)

// knownControllers are the kube-controller-manager controllers (and the scheduler's one job,
// binding) that kube-testenv can run in-process; `all` turns on every one of them.
var knownControllers = []string{
	"gc", "namespace", "deployment", "replicaset", "statefulset", "daemonset",
	"clusterrole-aggregation", "scheduler",
}

func parseControllers(list string) ([]string, error) {
	wanted := []string{}
	add := func(c string) {
		for _, have := range wanted {
			if have == c {
				return
			}
		}
		wanted = append(wanted, c)
	}
	for _, c := range strings.Split(list, ",") {
		switch c = strings.TrimSpace(c); c {
		case "", "none":
		case "all":
			for _, k := range knownControllers {
				add(k)
			}
		default:
			known := false
			for _, k := range knownControllers {
				known = known || k == c
			}
			if !known {
				return nil, fmt.Errorf("--controllers: unknown controller %q (known: all, %s)", c, strings.Join(knownControllers, ", "))
			}
			add(c)
		}
	}
	return wanted, nil
}

// startControllers runs the chosen controllers in this process, wired the way
// kube-controller-manager wires them, so workloads and deletes behave as in a real cluster:
//   - gc: deletes objects whose ownerReferences point at deleted owners;
//   - namespace: empties and finally removes a deleted namespace;
//   - deployment, replicaset, statefulset, daemonset: the workload controllers, which create
//     the pods (and ReplicaSets) of a workload;
//   - clusterrole-aggregation: fills ClusterRoles that aggregate others (view, edit, admin);
//   - scheduler: binds each unscheduled pod to a node (see binder.go).
//
// prepare, when not nil, runs for each pod before the scheduler binds it.
func startControllers(ctx context.Context, adminKubeconfig string, wanted []string, prepare func(context.Context, *v1.Pod) error) error {
	if len(wanted) == 0 {
		return nil
	}
	config, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig)
	if err != nil {
		return err
	}
	// These controllers issue bursts of creates and deletes; the default client limits would
	// throttle them.
	config.QPS, config.Burst = 500, 1000
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	metadataClient, err := metadata.NewForConfig(config)
	if err != nil {
		return err
	}
	discoveryClient, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return err
	}
	const resync = 12 * time.Hour
	sharedInformers := informers.NewSharedInformerFactory(client, resync)
	metadataInformers := metadatainformer.NewSharedInformerFactory(metadataClient, resync)
	informersStarted := make(chan struct{})
	apps := sharedInformers.Apps().V1()
	core := sharedInformers.Core().V1()
	var runs []func()

	for _, name := range wanted {
		switch name {
		case "gc":
			restMapper := restmapper.NewDeferredDiscoveryRESTMapper(cacheddiscovery.NewMemCacheClient(discoveryClient))
			gc, err := garbagecollector.NewGarbageCollector(ctx, client, metadataClient, restMapper,
				garbagecollector.DefaultIgnoredResources(),
				informerfactory.NewInformerFactory(sharedInformers, metadataInformers), informersStarted)
			if err != nil {
				return err
			}
			// A short sync period so CRDs installed by a test are garbage-collected within seconds.
			const syncPeriod = 5 * time.Second
			runs = append(runs, func() { go gc.Run(ctx, 5, syncPeriod); go gc.Sync(ctx, discoveryClient, syncPeriod) })
		case "namespace":
			nc := namespacecontroller.NewNamespaceController(ctx, client, metadataClient,
				client.Discovery().ServerPreferredNamespacedResources,
				core.Namespaces(), 5*time.Minute, v1.FinalizerKubernetes)
			runs = append(runs, func() { go nc.Run(ctx, 5) })
		case "deployment":
			dc, err := deployment.NewDeploymentController(ctx, apps.Deployments(), apps.ReplicaSets(), core.Pods(), client)
			if err != nil {
				return err
			}
			runs = append(runs, func() { go dc.Run(ctx, 5) })
		case "replicaset":
			// 500 is kube-controller-manager's default burst of pod creations per sync.
			rc := replicaset.NewReplicaSetController(ctx, apps.ReplicaSets(), core.Pods(), client, 500)
			runs = append(runs, func() { go rc.Run(ctx, 5) })
		case "statefulset":
			sc := statefulset.NewStatefulSetController(ctx, core.Pods(), apps.StatefulSets(),
				core.PersistentVolumeClaims(), apps.ControllerRevisions(), client)
			runs = append(runs, func() { go sc.Run(ctx, 5) })
		case "daemonset":
			dsc, err := daemon.NewDaemonSetsController(ctx, apps.DaemonSets(), apps.ControllerRevisions(),
				core.Pods(), core.Nodes(), client, flowcontrol.NewBackOff(time.Second, 15*time.Minute))
			if err != nil {
				return err
			}
			runs = append(runs, func() { go dsc.Run(ctx, 2) })
		case "clusterrole-aggregation":
			crc := clusterroleaggregation.NewClusterRoleAggregation(sharedInformers.Rbac().V1().ClusterRoles(), client.RbacV1())
			runs = append(runs, func() { go crc.Run(ctx, 2) })
		case "scheduler":
			b := newBinder(client, core.Pods(), core.Nodes(), prepare)
			runs = append(runs, func() { go b.run(ctx, 2) })
		}
	}
	sharedInformers.Start(ctx.Done())
	metadataInformers.Start(ctx.Done())
	close(informersStarted)
	for _, run := range runs {
		run()
	}
	return nil
}
