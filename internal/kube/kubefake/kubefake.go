// Package kubefake adapts a client-go clientset (usually the fake one) to
// kube.Client, for tests. The product never imports it: the clientset
// registers every API group of Kubernetes, which kube.Client exists to avoid.
package kubefake

import (
	"context"
	"slices"

	"github.com/infradns/infradns/internal/kube"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
//
// The fake clientset ignores field selectors and a watch's label selector,
// so the Nodes sel does not select are filtered out here, as the API server
// would.
func (c clientset) Nodes(sel kube.NodeSelector) cache.ListerWatcher {
	match := func(n *corev1.Node) bool {
		if sel.Name != "" && n.Name != sel.Name {
			return false
		}
		if sel.Label != "" {
			if _, ok := n.Labels[sel.Label]; !ok {
				return false
			}
		}
		return true
	}
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector, o.FieldSelector = sel.LabelSelector(), sel.FieldSelector()
			list, err := c.cs.CoreV1().Nodes().List(ctx, o)
			if err != nil {
				return nil, err
			}
			list.Items = slices.DeleteFunc(list.Items, func(n corev1.Node) bool { return !match(&n) })
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector, o.FieldSelector = sel.LabelSelector(), sel.FieldSelector()
			w, err := c.cs.CoreV1().Nodes().Watch(ctx, o)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				n, ok := e.Object.(*corev1.Node)
				return e, !ok || match(n)
			}), nil
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

func (c clientset) Services() cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.cs.CoreV1().Services(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.cs.CoreV1().Services(metav1.NamespaceAll).Watch(ctx, o)
		},
	}, c.cs)
}

func (c clientset) Leases(namespace string) kube.LeaseClient {
	return c.cs.CoordinationV1().Leases(namespace)
}

// ConfigMap filters by name here: the fake clientset ignores field
// selectors.
func (c clientset) ConfigMap(namespace, name string) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			list, err := c.cs.CoreV1().ConfigMaps(namespace).List(ctx, o)
			if err != nil {
				return nil, err
			}
			list.Items = slices.DeleteFunc(list.Items, func(cm corev1.ConfigMap) bool { return cm.Name != name })
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := c.cs.CoreV1().ConfigMaps(namespace).Watch(ctx, o)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				cm, ok := e.Object.(*corev1.ConfigMap)
				return e, !ok || cm.Name == name
			}), nil
		},
	}, c.cs)
}

func (c clientset) PatchServiceStatus(ctx context.Context, namespace, name string, patch []byte) error {
	_, err := c.cs.CoreV1().Services(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

func (c clientset) CreateEvent(ctx context.Context, ev *corev1.Event) error {
	_, err := c.cs.CoreV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	return err
}
