package main

import (
	"context"
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
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	namespacecontroller "k8s.io/kubernetes/pkg/controller/namespace"
)

// startControllers runs the chosen kube-controller-manager controllers in this process, wired the
// way kube-controller-manager wires them, so cascading deletes behave as in a real cluster:
//   - gc: deletes objects whose ownerReferences point at deleted owners;
//   - namespace: empties and finally removes a deleted namespace.
func startControllers(ctx context.Context, adminKubeconfig string, wanted []string) error {
	if len(wanted) == 0 {
		return nil
	}
	config, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig)
	if err != nil {
		return err
	}
	// These controllers issue bursts of deletes; the default client limits would throttle them.
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
			go gc.Run(ctx, 5, syncPeriod)
			go gc.Sync(ctx, discoveryClient, syncPeriod)
		case "namespace":
			nc := namespacecontroller.NewNamespaceController(ctx, client, metadataClient,
				client.Discovery().ServerPreferredNamespacedResources,
				sharedInformers.Core().V1().Namespaces(), 5*time.Minute, v1.FinalizerKubernetes)
			go nc.Run(ctx, 5)
		}
	}
	sharedInformers.Start(ctx.Done())
	metadataInformers.Start(ctx.Done())
	close(informersStarted)
	return nil
}
