package kube

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infradns/infradns/internal/cluster"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// ReasonHostname: an AnnotationHostname value that is not a host name.
const ReasonHostname = "invalid-hostname"

// ServiceOptions say how the Services are followed.
type ServiceOptions struct {
	// Debounce gathers a burst of changes into one call of the handler.
	Debounce time.Duration
	// StartJitter delays the first request by a random time below it.
	StartJitter time.Duration
	// Dropped, when set, hears of each value the API sent that no list
	// carries (once per distinct value while the watch runs).
	Dropped func(Drop)
}

// ServiceHandler receives the Services of type LoadBalancer that have an
// address, sorted by namespace and name. The slice is the handler's.
type ServiceHandler func([]cluster.Service)

// ServiceWatcher follows every Service of the cluster and hands on those of
// type LoadBalancer with an address.
type ServiceWatcher struct {
	client Client
	opts   ServiceOptions
	synced atomic.Bool
}

// NewServiceWatcher returns a ServiceWatcher; nothing starts before Run.
func NewServiceWatcher(c Client, o ServiceOptions) *ServiceWatcher {
	if o.Debounce <= 0 {
		o.Debounce = DefaultDebounce
	}
	return &ServiceWatcher{client: c, opts: o}
}

// HasSynced reports whether the first full listing has been handed on.
func (w *ServiceWatcher) HasSynced() bool { return w.synced.Load() }

// Run watches until ctx ends: h is called once after the first listing and
// then once per burst of changes that alter what it is given. The reflector
// keeps the last listing while the API is unreachable, so nothing is taken
// back during an outage. It returns when ctx ends.
func (w *ServiceWatcher) Run(ctx context.Context, h ServiceHandler) {
	if w.opts.StartJitter > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(rand.N(w.opts.StartJitter)):
		}
	}
	k := newKicker()
	drops := &dropper{report: w.opts.Dropped}
	store := newServiceStore(k.kick, drops.add)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	b := reconnectBackoff
	r := cache.NewReflectorWithOptions(w.client.Services(), &corev1.Service{}, store, cache.ReflectorOptions{Name: "loadbalancer services", Backoff: &b})
	wg.Go(func() { r.RunWithContext(runCtx) })

	// Every Service of the cluster is decoded, but only a change of what
	// the names read (type, load-balancer IPs, the hostname annotation)
	// reaches h: the store compares before it asks.
	k.loop(ctx, w.opts.Debounce, w.synced.Load, func() {
		// Synced before the handler hears it: whoever the handler tells
		// must find HasSynced true (a test saw it false in that window).
		w.synced.Store(true)
		h(store.Services())
	})
}

// serviceStore is the reflector's store: each Service of type LoadBalancer
// with an address, as a cluster.Service (the rest of the cluster's Services
// cost a map lookup each). Like nodeStore, it asks for a call of the handler
// only when what a name reads changed: an Endpoints-driven update of a
// Service's status or an annotation of another tool changes nothing.
type serviceStore struct {
	changed func()
	drop    func(Drop)
	synced  atomic.Bool

	mu       sync.Mutex
	services map[string]cluster.Service // namespace/name → Service
}

func newServiceStore(changed func(), drop func(Drop)) *serviceStore {
	return &serviceStore{changed: changed, drop: drop, services: map[string]cluster.Service{}}
}

// Transformer trims the Services of a streamed list (watch-list), the one
// place the reflector keeps objects of its own: a Service's spec (ports,
// selectors) and its other annotations (a last-applied-configuration can
// weigh kilobytes) are never kept. The store itself keeps cluster.Services.
func (s *serviceStore) Transformer() cache.TransformFunc { return transformService }

func (s *serviceStore) Add(obj any) error    { s.put(obj); return nil }
func (s *serviceStore) Update(obj any) error { s.put(obj); return nil }
func (s *serviceStore) Resync() error        { return nil }
func (s *serviceStore) HasSynced() bool      { return s.synced.Load() }

func (s *serviceStore) put(obj any) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	key := svc.Namespace + "/" + svc.Name
	next, valid := ToService(svc, s.drop)
	s.mu.Lock()
	old, had := s.services[key]
	switch {
	case !valid && !had, valid && had && sameService(old, next):
		s.mu.Unlock()
		return
	case valid:
		s.services[key] = next
	default:
		delete(s.services, key)
	}
	s.mu.Unlock()
	s.changed()
}

func (s *serviceStore) Delete(obj any) error {
	key := ""
	switch o := obj.(type) {
	case *corev1.Service:
		key = o.Namespace + "/" + o.Name
	case cache.DeletedFinalStateUnknown:
		key = o.Key
	}
	s.mu.Lock()
	_, had := s.services[key]
	delete(s.services, key)
	s.mu.Unlock()
	if had {
		s.changed()
	}
	return nil
}

// Replace is a full listing: the first is the sync; a later one (after a
// watch broke) asks for a call only when the result differs.
func (s *serviceStore) Replace(list []any, _ string) error {
	next := make(map[string]cluster.Service, len(s.services))
	for _, obj := range list {
		if svc, ok := obj.(*corev1.Service); ok {
			if v, valid := ToService(svc, s.drop); valid {
				next[v.Key()] = v
			}
		}
	}
	s.mu.Lock()
	same := len(next) == len(s.services)
	if same {
		for k, v := range next {
			if old, ok := s.services[k]; !ok || !sameService(old, v) {
				same = false
				break
			}
		}
	}
	if !same {
		s.services = next
	}
	first := !s.synced.Swap(true)
	s.mu.Unlock()
	if first || !same {
		s.changed()
	}
	return nil
}

// Services are the stored Services sorted by namespace and name, in a new
// slice (the Addrs are shared and must not be modified).
func (s *serviceStore) Services() []cluster.Service {
	s.mu.Lock()
	out := make([]cluster.Service, 0, len(s.services))
	for _, v := range s.services {
		out = append(out, v)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b cluster.Service) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

func sameService(a, b cluster.Service) bool {
	return a.Namespace == b.Namespace && a.Name == b.Name && a.Hostname == b.Hostname && slices.Equal(a.Addrs, b.Addrs)
}

// ToService cuts a Service down to what its names read. It reports false
// for a Service that is not of type LoadBalancer or has no usable address:
// it has no name. An address that is not unicast, an ingress entry with a
// hostname instead of an IP (a cloud's load balancer; not followed) and a
// hostname annotation that is not a host name are left out, each reported
// through drop.
func ToService(svc *corev1.Service, drop func(Drop)) (cluster.Service, bool) {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return cluster.Service{}, false
	}
	object := "Service " + svc.Namespace + "/" + svc.Name
	out := cluster.Service{Namespace: svc.Namespace, Name: svc.Name}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP == "" {
			continue
		}
		if ip, ok := unicast(in.IP, object, "loadBalancer.ingress.ip", drop); ok {
			out.Addrs = append(out.Addrs, ip)
		}
	}
	if len(out.Addrs) == 0 {
		return cluster.Service{}, false
	}
	slices.SortFunc(out.Addrs, netip.Addr.Compare)
	out.Addrs = slices.Compact(out.Addrs)
	if h, ok := svc.Annotations[cluster.AnnotationHostname]; ok {
		h = strings.ToLower(h)
		if cluster.CheckHostname(h) != nil {
			drop(Drop{Object: object, Field: "annotation " + cluster.AnnotationHostname, Value: h, Reason: ReasonHostname})
		} else {
			out.Hostname = h
		}
	}
	return out, true
}

// transformService keeps of a Service what ToService reads, and the
// identity the reflector keys on.
func transformService(obj any) (any, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil // a DeletedFinalStateUnknown tombstone
	}
	out := &corev1.Service{
		TypeMeta:   svc.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID, ResourceVersion: svc.ResourceVersion},
		Spec:       corev1.ServiceSpec{Type: svc.Spec.Type},
	}
	if h, ok := svc.Annotations[cluster.AnnotationHostname]; ok {
		out.Annotations = map[string]string{cluster.AnnotationHostname: h}
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: in.IP})
			}
		}
	}
	return out, nil
}
