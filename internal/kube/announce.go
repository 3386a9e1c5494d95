package kube

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infradns/infradns/internal/cluster"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnounceOptions say which Services of type LoadBalancer a node announces.
type AnnounceOptions struct {
	// Class is the spec.loadBalancerClass of ours; Default adds the
	// Services with no class (see Ours).
	Class   string
	Default bool
	// Debounce gathers a burst of changes into one call of the handler.
	Debounce time.Duration
	// Dropped, when set, hears of each value the API sent that no list
	// carries.
	Dropped func(Drop)
}

// AnnounceHandler receives the Services of ours that have an address,
// sorted by namespace and name. The slice is the handler's.
type AnnounceHandler func([]cluster.LBService)

// AnnounceWatcher follows the Services and the EndpointSlices of the
// cluster: what a node needs to know which Service addresses it may
// announce (cluster.ServiceVIPs). Both are kept trimmed: a Service to what
// Ours and the addresses read, an EndpointSlice to its Service's name and
// its endpoints' node names and readiness (no addresses, ports or hints).
type AnnounceWatcher struct {
	client Client
	opts   AnnounceOptions
	synced atomic.Bool
}

// NewAnnounceWatcher returns an AnnounceWatcher; nothing starts before Run.
func NewAnnounceWatcher(c Client, o AnnounceOptions) *AnnounceWatcher {
	if o.Debounce <= 0 {
		o.Debounce = DefaultDebounce
	}
	return &AnnounceWatcher{client: c, opts: o}
}

// HasSynced reports whether the first listings have been handed on.
func (w *AnnounceWatcher) HasSynced() bool { return w.synced.Load() }

// Run watches until ctx ends: h is called once both first listings are in,
// then once per burst of changes that alter what it is given. During an
// API outage the last listings stay: nothing is withdrawn for it.
func (w *AnnounceWatcher) Run(ctx context.Context, h AnnounceHandler) {
	k := newKicker()
	svcs := NewMirror(k.kick, TrimClaimService)
	eps := NewMirror(k.kick, trimSliceNodes)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Go(func() { svcs.Run(runCtx, "loadbalancer services", w.client.Services(), &corev1.Service{}) })
	wg.Go(func() {
		eps.Run(runCtx, "endpointslices", w.client.EndpointSlices(metav1.NamespaceAll, ""), &discoveryv1.EndpointSlice{})
	})
	drops := &dropper{report: w.opts.Dropped}
	var last []cluster.LBService
	k.loop(ctx, w.opts.Debounce, w.synced.Load, func() {
		if !svcs.HasSynced() || !eps.HasSynced() {
			// A Local Service read before the slices would look as if it
			// had no endpoint anywhere: nothing until both are in.
			return
		}
		out := LBServices(svcs.List(), eps.List(), w.opts.Class, w.opts.Default, drops.add)
		if w.synced.Load() && slices.EqualFunc(out, last, sameLBService) {
			return // an update nothing here reads
		}
		last = out
		w.synced.Store(true)
		h(slices.Clone(out))
	})
}

func sameLBService(a, b cluster.LBService) bool {
	return a.Namespace == b.Namespace && a.Name == b.Name && a.Local == b.Local &&
		slices.Equal(a.Addrs, b.Addrs) && slices.Equal(a.Nodes, b.Nodes)
}

// LBServices are the Services among svcs (corev1.Service) that are ours
// (Ours with class and isDefault) and have an address, with the nodes of
// their ready endpoints from slices (discoveryv1.EndpointSlice), sorted
// by namespace and name.
func LBServices(svcs, slicesIn []any, class string, isDefault bool, drop func(Drop)) []cluster.LBService {
	type key struct{ namespace, name string }
	var out []cluster.LBService
	local := map[key]int{} // the Local ones: their index in out
	for _, o := range svcs {
		svc, ok := o.(*corev1.Service)
		if !ok || !Ours(svc, class, isDefault) {
			continue
		}
		s, ok := ToService(svc, drop)
		if !ok {
			continue // no address yet
		}
		lb := cluster.LBService{Namespace: s.Namespace, Name: s.Name, Addrs: s.Addrs,
			Local: svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal}
		if lb.Local {
			local[key{lb.Namespace, lb.Name}] = len(out)
		}
		out = append(out, lb)
	}
	// Only the Local Services' slices are read: the others' (most of a
	// cluster's) cost a map lookup each.
	bySvc := map[int][]*discoveryv1.EndpointSlice{}
	for _, o := range slicesIn {
		sl, ok := o.(*discoveryv1.EndpointSlice)
		if !ok {
			continue
		}
		if i, ok := local[key{sl.Namespace, sl.Labels[discoveryv1.LabelServiceName]}]; ok {
			bySvc[i] = append(bySvc[i], sl)
		}
	}
	for i, sls := range bySvc {
		out[i].Nodes = readyNodes(sls, drop)
	}
	slices.SortFunc(out, func(a, b cluster.LBService) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}

// trimSliceNodes keeps of an EndpointSlice its Service's name and, per
// endpoint, the node and the Ready condition: what readyNodes reads.
func trimSliceNodes(obj any) (any, error) {
	sl, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	out := &discoveryv1.EndpointSlice{
		TypeMeta: sl.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Namespace: sl.Namespace, Name: sl.Name, UID: sl.UID, ResourceVersion: sl.ResourceVersion,
			Labels: map[string]string{discoveryv1.LabelServiceName: sl.Labels[discoveryv1.LabelServiceName]}},
		AddressType: sl.AddressType,
		Endpoints:   make([]discoveryv1.Endpoint, 0, len(sl.Endpoints)),
	}
	for _, ep := range sl.Endpoints {
		out.Endpoints = append(out.Endpoints, discoveryv1.Endpoint{NodeName: ep.NodeName, Conditions: discoveryv1.EndpointConditions{Ready: ep.Conditions.Ready}})
	}
	return out, nil
}
