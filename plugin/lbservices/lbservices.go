// Package lbservices implements the lbservices plugin: SERVICE.NAMESPACE.lb.<cluster
// domain> answers the load-balancer addresses of the Service of type
// LoadBalancer of that name, followed live through the Kubernetes API.
package lbservices

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/fall"

	"github.com/infradns/infradns/internal/authority"
	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/records"

	"github.com/miekg/dns"
)

// LBServices is the lbservices handler.
type LBServices struct {
	Next  plugin.Handler
	Zones []string
	Fall  fall.F

	label      string   // the label below each zone, "lb"
	domains    []string // label + "." + zone, per zone (the same order)
	ttl        uint32
	kubeconfig string
	// newClient replaces the kubeconfig lookup in tests (a fake clientset).
	newClient func() (kube.Client, error)

	index  atomic.Pointer[index]
	synced atomic.Bool // a full Service list is served
	cancel context.CancelFunc
	done   chan struct{}
	authority.Authority
}

// ServeDNS implements the plugin.Handler interface.
func (l *LBServices) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	q, ok := authority.NewQuery(r)
	if !ok {
		return plugin.NextOrFailure(l.Name(), l.Next, ctx, w, r)
	}
	zone := l.Match(q.Name)
	if zone == "" {
		if records.IsReverse(q.Name) {
			if ok, rc, res := l.ServeReverse(w, r, q, l.index.Load().reverseMap(), l.ttl); ok {
				requestCount.Inc(ctx, res)
				return rc, nil
			}
			if ok, rc := l.HandReverse(ctx, w, r, q); ok {
				return rc, nil
			}
		}
		return plugin.NextOrFailure(l.Name(), l.Next, ctx, w, r)
	}
	if rc, res := authority.Screen(r, q); res != "" {
		// Malformed (FORMERR), not QUERY (NOTIMP), not class IN or a
		// zone transfer (REFUSED): the server writes the reply.
		requestCount.Inc(ctx, res)
		return rc, nil
	}
	domain := l.domainOf(zone)
	below := authority.IsBelow(q.Name, domain)
	if !below && q.Name != domain {
		if l.Passes(q, zone) {
			requestCount.Inc(ctx, authority.Passed)
			return plugin.NextOrFailure(l.Name(), l.Next, ctx, w, r)
		}
		rc, res, err := l.serveOther(ctx, w, r, q, zone, domain)
		requestCount.Inc(ctx, res)
		return rc, err
	}
	ix := l.index.Load()
	rel := ""
	if below {
		rel = q.Name[:len(q.Name)-len(domain)-1]
	}
	if set, ok := ix.lookup(rel); ok {
		rc, res := l.Write(w, r, zone, set.RRs(q.QName, q.Type, l.ttl))
		requestCount.Inc(ctx, res)
		return rc, nil
	}
	if !below || ix.ent(rel) {
		rc, res := l.Write(w, r, zone, nil) // the domain itself, a namespace: NODATA
		requestCount.Inc(ctx, res)
		return rc, nil
	}
	if !l.synced.Load() {
		// No Service list yet: an NXDOMAIN now would be cached for a name
		// that may well exist.
		requestCount.Inc(ctx, "notready")
		return dns.RcodeServerFailure, nil
	}
	// Everything below the domain is this plugin's: no later member is asked.
	rc, res, err := l.Absent(ctx, w, r, q, zone, l.Name(), l.Next)
	requestCount.Inc(ctx, res)
	return rc, err
}

// serveOther answers a name of the zone outside the domain: the empty
// non-terminals between the zone and the domain (the domain may have more
// than one label), the authority's own names, else a miss.
//
//go:noinline
func (l *LBServices) serveOther(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, q authority.Query, zone, domain string) (int, authority.Result, error) {
	if ok, res := l.Own(w, r, q, zone); ok {
		return dns.RcodeSuccess, res, nil
	}
	if authority.IsBelow(domain, q.Name) && authority.IsBelow(q.Name, zone) {
		rc, res := l.Write(w, r, zone, nil)
		return rc, res, nil
	}
	return l.Miss(ctx, w, r, q, zone, l.Name(), l.Next)
}

func (l *LBServices) domainOf(zone string) string {
	for i, z := range l.Zones {
		if z == zone {
			return l.domains[i]
		}
	}
	return ""
}

// Name implements the plugin.Handler interface.
func (l *LBServices) Name() string { return pluginName }

// Origins implements authority.Member.
func (l *LBServices) Origins() []string { return l.Zones }

// Fallthrough implements authority.Member.
func (l *LBServices) Fallthrough() fall.F { return l.Fall }

// RecordTTL implements authority.Member.
func (l *LBServices) RecordTTL() uint32 { return l.ttl }

// ReservedLabels are the labels directly below the zone this plugin owns:
// mdnsnodes serves no node of that name.
func (l *LBServices) ReservedLabels() []string { return []string{firstLabel(l.label)} }

// HoldsReverseBelow implements authority.ReverseHolder.
func (l *LBServices) HoldsReverseBelow(name string) bool {
	return l.index.Load().reverseMap().HasBelow(name)
}

// ServeOwnReverse implements authority.ReverseServer.
func (l *LBServices) ServeOwnReverse(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, q authority.Query) (bool, int) {
	ok, rc, res := l.ServeReverse(w, r, q, l.index.Load().reverseMap(), l.ttl)
	if ok {
		requestCount.Inc(ctx, res)
	}
	return ok, rc
}

// publish builds the index of svcs and serves it.
func (l *LBServices) publish(svcs []cluster.Service) {
	ix := buildIndex(svcs, l.domains)
	l.index.Store(ix)
	l.synced.Store(true)
	zones := l.zonesLabel()
	services.WithLabelValues(zones).Set(float64(len(svcs)))
	refusedHostnames.WithLabelValues(zones).Set(float64(len(ix.refused)))
	for _, f := range ix.refused {
		if reported.First(f) {
			log.Warningf("Service %s: hostname %q not served: %s", f.Service, f.Hostname, f.Reason)
		}
	}
}

// reported logs each refusal once per process, not at every change.
var reported kube.Once[cluster.HostnameRefusal]

// lastList hands the last Service list (per kubeconfig) from an instance
// to the one that replaces it at a reload: during an API outage the new one
// would otherwise answer nothing but SERVFAIL for as long as it lasts.
var lastList sync.Map // kubeconfig → []cluster.Service

// Start follows the Services until Stop.
func (l *LBServices) Start() {
	if v, ok := lastList.Load(l.kubeconfig); ok {
		l.publish(v.([]cluster.Service))
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go func() {
		defer close(l.done)
		l.watch(ctx)
	}()
}

// Stop ends the watch and waits for it.
func (l *LBServices) Stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
}

// startJitter spreads the first list of nodes that start together.
var startJitter = time.Second

func (l *LBServices) watch(ctx context.Context) {
	client := kube.WaitClient(ctx, l.client, log.Warningf)
	if client == nil {
		return // cancelled
	}
	defer kube.Follow(ctx, client)()
	slow := time.AfterFunc(firstListWarning, func() {
		if !l.synced.Load() {
			log.Warningf("no Service list from the API after %s: is it reachable, and may this identity list and watch services?", firstListWarning)
		}
	})
	defer slow.Stop()
	first := true
	kube.NewServiceWatcher(client, kube.ServiceOptions{
		StartJitter: startJitter,
		Dropped: func(d kube.Drop) {
			log.Warningf("not served: %s %s %q (%s)", d.Object, d.Field, d.Value, d.Reason)
		},
	}).Run(ctx, func(svcs []cluster.Service) {
		l.publish(svcs)
		lastList.Store(l.kubeconfig, svcs)
		if first {
			first = false
			log.Infof("%d Services of type LoadBalancer with an address", len(svcs))
		}
	})
}

// firstListWarning is how long after the client is built a missing first
// Service list is logged.
const firstListWarning = 10 * time.Second

func (l *LBServices) client() (kube.Client, error) {
	if l.newClient != nil {
		return l.newClient()
	}
	return kube.NewReloading(l.kubeconfig, "infradns-lbservices", log.Infof, log.Warningf)
}
