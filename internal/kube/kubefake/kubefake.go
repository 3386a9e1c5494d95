// Package kubefake adapts a client-go clientset (usually the fake one) to
// kube.Client, for tests. The product never imports it: the clientset
// registers every API group of Kubernetes, which kube.Client exists to avoid.
package kubefake

import (
	"context"

	"github.com/infradns/infradns/internal/kube"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// FromClientset returns a kube.Client reading and writing through cs.
func FromClientset(cs kubernetes.Interface) kube.Client { return clientset{cs} }

type clientset struct{ cs kubernetes.Interface }

// The fake clientset cannot stream a watch-list (no bookmarks);
// ToListWatcherWithWatchListSemantics tells the reflector so, as client-go's
// generated informers do.
func (c clientset) Nodes() cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.cs.CoreV1().Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.cs.CoreV1().Nodes().Watch(ctx, o)
		},
	}, c.cs)
}

func (c clientset) EndpointSlices(namespace, selector string) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return c.cs.DiscoveryV1().EndpointSlices(namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return c.cs.DiscoveryV1().EndpointSlices(namespace).Watch(ctx, o)
		},
	}, c.cs)
}

func (c clientset) Leases(namespace string) kube.LeaseClient {
	return c.cs.CoordinationV1().Leases(namespace)
}
