package kube

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// Client is the part of the Kubernetes API lbconfig uses: list and watch
// Nodes and EndpointSlices, read and write Leases.
//
// It exists instead of kubernetes.Interface because client-go's clientset,
// informer factory and listers register every API group of Kubernetes at
// init: measured here, importing them costs 8.8 MiB more resident memory in
// every process (18.8 MiB against 10.0 MiB with a client for the three groups
// used), on every node, for a plugin whose other job is a DNS server that must
// stay small. Tests adapt a (fake) clientset with FromClientset in package
// kubefake.
type Client interface {
	// Nodes lists and watches the Nodes sel selects.
	Nodes(sel NodeSelector) cache.ListerWatcher
	// EndpointSlices lists and watches the EndpointSlices of namespace
	// matching labelSelector.
	EndpointSlices(namespace, labelSelector string) cache.ListerWatcher
	// Services lists and watches the Services of every namespace.
	Services() cache.ListerWatcher
	// Leases reads and writes the Leases of namespace.
	Leases(namespace string) LeaseClient
	// ConfigMap lists and watches the ConfigMap namespace/name.
	ConfigMap(namespace, name string) cache.ListerWatcher
	// PatchServiceStatus applies a JSON merge patch to a Service's status:
	// the allocator's write of its addresses.
	PatchServiceStatus(ctx context.Context, namespace, name string, patch []byte) error
	// CreateEvent records an Event.
	CreateEvent(ctx context.Context, ev *corev1.Event) error
}

// LeaseClient is what HolderLease needs of coordination/v1 Leases.
type LeaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
	// List is for `infradns status` (an administrator's identity); the
	// nodes' RBAC does not grant it.
	List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error)
}

// scheme holds only the groups Client speaks.
var (
	scheme         = runtime.NewScheme()
	codecs         = serializer.NewCodecFactory(scheme)
	parameterCodec = runtime.NewParameterCodec(scheme)
)

func init() {
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, discoveryv1.AddToScheme, coordinationv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
}

// restClient is Client over REST.
type restClient struct {
	core, discovery, coordination rest.Interface
}

// NewForConfig returns a Client for the API server of cfg.
func NewForConfig(cfg *rest.Config) (Client, error) {
	core, err := restFor(cfg, corev1.SchemeGroupVersion, "/api")
	if err != nil {
		return nil, err
	}
	disc, err := restFor(cfg, discoveryv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	coord, err := restFor(cfg, coordinationv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	return &restClient{core: core, discovery: disc, coordination: coord}, nil
}

func restFor(cfg *rest.Config, gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gv
	c.APIPath = apiPath
	c.NegotiatedSerializer = codecs.WithoutConversion()
	// Protobuf: every node decodes every Node update it watches, and a
	// Node decodes 8x faster from protobuf than from JSON (27 against
	// 218 µs for a 40-image Node, BenchmarkNodeDecode), in a fifth fewer
	// bytes (9.3 against 11.7 KB). JSON stays acceptable for anything
	// without a protobuf form.
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", gv, err)
	}
	return rc, nil
}

func (c *restClient) Nodes(sel NodeSelector) cache.ListerWatcher {
	return listWatch(c.core, "nodes", "", sel.LabelSelector(), sel.FieldSelector(), func() runtime.Object { return &corev1.NodeList{} })
}

func (c *restClient) EndpointSlices(namespace, labelSelector string) cache.ListerWatcher {
	return listWatch(c.discovery, "endpointslices", namespace, labelSelector, "", func() runtime.Object { return &discoveryv1.EndpointSliceList{} })
}

func (c *restClient) Services() cache.ListerWatcher {
	return listWatch(c.core, "services", "", "", "", func() runtime.Object { return &corev1.ServiceList{} })
}

func (c *restClient) ConfigMap(namespace, name string) cache.ListerWatcher {
	return listWatch(c.core, "configmaps", namespace, "", "metadata.name="+name, func() runtime.Object { return &corev1.ConfigMapList{} })
}

func (c *restClient) PatchServiceStatus(ctx context.Context, namespace, name string, patch []byte) error {
	return c.core.Patch(types.MergePatchType).Namespace(namespace).Resource("services").Name(name).SubResource("status").Body(patch).Do(ctx).Error()
}

func (c *restClient) CreateEvent(ctx context.Context, ev *corev1.Event) error {
	return c.core.Post().Namespace(ev.Namespace).Resource("events").Body(ev).Do(ctx).Error()
}

func listWatch(rc rest.Interface, resource, namespace, labelSelector, fieldSelector string, newList func() runtime.Object) cache.ListerWatcher {
	with := func(o *metav1.ListOptions) {
		if labelSelector != "" {
			o.LabelSelector = labelSelector
		}
		if fieldSelector != "" {
			o.FieldSelector = fieldSelector
		}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			with(&o)
			list := newList()
			err := rc.Get().Namespace(namespace).Resource(resource).VersionedParams(&o, parameterCodec).Do(ctx).Into(list)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			with(&o)
			o.Watch = true
			return rc.Get().Namespace(namespace).Resource(resource).VersionedParams(&o, parameterCodec).Watch(ctx)
		},
	}
}

func (c *restClient) Leases(namespace string) LeaseClient {
	return leases{rc: c.coordination, ns: namespace}
}

type leases struct {
	rc rest.Interface
	ns string
}

func (l leases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := l.rc.Get().Namespace(l.ns).Resource("leases").Name(name).VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
	return out, err
}

func (l leases) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	out := &coordinationv1.LeaseList{}
	err := l.rc.Get().Namespace(l.ns).Resource("leases").VersionedParams(&opts, parameterCodec).Do(ctx).Into(out)
	return out, err
}

func (l leases) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := l.rc.Post().Namespace(l.ns).Resource("leases").VersionedParams(&opts, parameterCodec).Body(lease).Do(ctx).Into(out)
	return out, err
}

func (l leases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := l.rc.Put().Namespace(l.ns).Resource("leases").Name(lease.Name).VersionedParams(&opts, parameterCodec).Body(lease).Do(ctx).Into(out)
	return out, err
}

// FromKubeconfig is the client of the kubeconfig file at path, naming itself
// userAgent in the apiserver's logs and audit. A file it names that is
// missing outside its directory is reported as such (see checkRefs).
func FromKubeconfig(path, userAgent string) (Client, error) {
	rc, err := kubeconfigConfig(path, userAgent)
	if err != nil {
		return nil, err
	}
	return NewForConfig(rc)
}

func kubeconfigConfig(path, userAgent string) (*rest.Config, error) {
	if err := checkRefs(path); err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.UserAgent = userAgent
	// client-go's default of 5 requests a second (burst 10) is a reader's:
	// lbpools writes a status and an event per Service, and at 5/s a
	// burst of 100 new Services waited 38.5 s for its last address (39 ms
	// for the first). kube-controller-manager's own client allows more;
	// watches are not counted.
	rc.QPS, rc.Burst = 50, 100
	return rc, nil
}
