// Package mdnsnodes implements the mdnsnodes plugin: <node>.<cluster domain>
// answers with the addresses that node announces over multicast DNS and, with
// a kubeconfig, the InternalIPs of the Nodes the Kubernetes API lists.
package mdnsnodes

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/fall"

	"github.com/infradns/infradns/internal/authority"
	"github.com/infradns/infradns/internal/directive"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/mdns"
	"github.com/infradns/infradns/internal/records"

	"github.com/miekg/dns"
)

// MDNSNodes is the mdnsnodes handler.
type MDNSNodes struct {
	Next  plugin.Handler
	Zones []string
	Fall  fall.F

	ttl      uint32
	cluster  string
	iface    string
	bind     netip.Addr
	service  string
	keyFile  string
	reserved []string
	// vips are the addresses of the sibling plugins' VIPs (apiint,
	// appswildcard), learnt at OnStartup: never a node's address.
	vips []netip.Addr
	// kubeconfig, when set, adds the Nodes of the API to what mDNS hears.
	kubeconfig string
	// namesService, with kubeconfig, is the Service ("namespace/name") whose
	// EndpointSlices give every node's name and addresses instead of the
	// Nodes (kube.Options.NamesService).
	namesService string
	// newClient replaces the kubeconfig lookup in tests (a fake clientset).
	newClient func() (kube.Client, error)

	// index is what ServeDNS reads: an immutable snapshot of both sources,
	// merged and swapped by publish, so a query never waits for the network
	// or a lock.
	index   atomic.Pointer[nodeIndex]
	browser atomic.Pointer[mdns.Browser]
	// heard is the index of the browser's latest snapshot, api the labels of
	// the API's latest Node list (nil before the first one); publish merges
	// them into index.
	heard     atomic.Pointer[nodeIndex]
	api       atomic.Pointer[map[string]records.Set]
	apiSynced atomic.Bool
	// publishMu orders the merges: without it a merge of older inputs could
	// be stored after a newer one.
	publishMu sync.Mutex

	forceReady bool // tests without a listener
	// started is when Start began listening and watching (knowsAll).
	started time.Time

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}

	authority.Authority
}

// New returns an MDNSNodes with the defaults.
func New() *MDNSNodes {
	return &MDNSNodes{ttl: directive.DefaultTTL, service: mdns.DefaultServiceType, reserved: mdns.DefaultReserved}
}

func (m *MDNSNodes) build() {
	m.Authority = authority.New(m.Zones, m.ttl, m.Fall)
}

// filter is what the browser keeps.
func (m *MDNSNodes) filter() mdns.Filter {
	return mdns.Filter{Cluster: m.cluster, Service: m.service + "." + mdns.DefaultDomain, Reserved: m.reserved, Exclude: m.vips}
}

// Start starts listening and, with a kubeconfig, watching the Nodes of the
// API; called from OnStartup. During a reload the new instance starts before
// the old one stops: the sockets share the port.
func (m *MDNSNodes) Start() error {
	m.started = time.Now()
	server := m.zonesLabel()
	var b *mdns.Browser
	if m.listens() {
		var keys [][]byte
		if m.keyFile != "" {
			k, err := mdns.LoadKeys(m.keyFile, func(s string) { log.Warning(s) })
			if err != nil {
				return err
			}
			keys = k
		}
		// Every reason at 0 from the start, so an alert on a rate sees the first rejection.
		for _, reason := range mdns.Reasons {
			rejected.WithLabelValues(server, reason)
		}
		for _, reason := range mdns.DropReasons {
			dropped.WithLabelValues(server, reason)
		}
		ttlCapped.WithLabelValues(server)
		accepted.WithLabelValues(server)
		sourceNodes.WithLabelValues(server, sourceMDNS).Set(0)
		var err error
		b, err = mdns.NewBrowser(mdns.BrowserConfig{
			Interface: m.iface,
			Bind:      m.bind,
			Filter:    m.filter(),
			Keys:      keys,
			Logger:    slog.New(clogHandler{}),
			OnHeard: func(h mdns.Heard) {
				m.heard.Store(heardIndex(h))
				m.publish()
			},
			OnResult: func(r mdns.Result) {
				if r.Accepted > 0 {
					accepted.WithLabelValues(server).Add(float64(r.Accepted))
				}
				for reason, n := range r.Rejected {
					rejected.WithLabelValues(server, reason).Add(float64(n))
				}
				for reason, n := range r.Dropped {
					dropped.WithLabelValues(server, reason).Add(float64(n))
				}
				if r.TTLCapped > 0 {
					ttlCapped.WithLabelValues(server).Add(float64(r.TTLCapped))
				}
			},
			OnQuery: func() { queries.WithLabelValues(server).Inc() },
		})
		if err != nil {
			return err
		}
		m.browser.Store(b)
	}
	if m.watches() {
		sourceNodes.WithLabelValues(server, sourceAPI).Set(0)
		m.takeOver()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	m.mu.Lock()
	m.cancel, m.done = cancel, done
	m.mu.Unlock()
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		if b != nil {
			wg.Go(func() {
				if err := b.Run(ctx); err != nil {
					log.Errorf("listener stopped: %v", err)
				}
			})
		}
		if m.watches() {
			wg.Go(func() { m.watchAPI(ctx) })
		}
		wg.Wait()
	}()
	return nil
}

// listens reports whether mDNS is a source; without interface or bind
// (kubeconfig alone) the API is the only one.
func (m *MDNSNodes) listens() bool { return m.iface != "" || m.bind.IsValid() }

// signed reports whether what mDNS serves is signed: with a key, every
// unsigned announcement is refused.
func (m *MDNSNodes) signed() bool { return m.keyFile != "" }

// watches reports whether the API is a source.
func (m *MDNSNodes) watches() bool { return m.kubeconfig != "" }

// zonesLabel is the value of the metrics' zones label.
func (m *MDNSNodes) zonesLabel() string { return strings.Join(m.Zones, ",") }

// Stop stops listening and watching and waits until the sockets are closed
// and the watch has ended; it is safe to call more than once, and before Start.
func (m *MDNSNodes) Stop() {
	m.mu.Lock()
	cancel, done := m.cancel, m.done
	m.cancel = nil
	m.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// ServeDNS implements the plugin.Handler interface.
func (m *MDNSNodes) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	q, ok := authority.NewQuery(r)
	if !ok {
		return plugin.NextOrFailure(m.Name(), m.Next, ctx, w, r)
	}
	zone := m.Match(q.Name)
	if zone == "" {
		if records.IsReverse(q.Name) {
			if ok, rc, res := m.ServeReverse(w, r, q, m.index.Load().reverseMap(), m.ttl); ok {
				requestCount.Inc(ctx, res)
				return rc, nil
			}
			if ok, rc := m.HandReverse(ctx, w, r, q); ok {
				return rc, nil
			}
		}
		return plugin.NextOrFailure(m.Name(), m.Next, ctx, w, r)
	}
	if rc, res := authority.Screen(r, q); res != "" {
		// Malformed (FORMERR), not QUERY (NOTIMP), not class IN or a
		// zone transfer (REFUSED): the server writes the reply.
		requestCount.Inc(ctx, res)
		return rc, nil
	}
	if label, ok := m.nodeLabel(q.Name, zone); ok {
		if set, ok := m.index.Load().Lookup(label); ok {
			rc, res := m.Write(w, r, zone, set.RRs(q.QName, q.Type, m.ttl))
			requestCount.Inc(ctx, res)
			return rc, nil
		}
		if !m.knowsAll() {
			// Neither the link heard nor the Nodes listed yet: an
			// NXDOMAIN now would be cached for a name that is about to exist.
			requestCount.Inc(ctx, "notready")
			return dns.RcodeServerFailure, nil
		}
	}
	rc, res, err := m.Other(ctx, w, r, q, zone, m.Name(), m.Next)
	requestCount.Inc(ctx, res)
	return rc, err
}

// nodeLabel returns the node label of qname: exactly one host-name label
// directly below zone, not reserved by another plugin.
func (m *MDNSNodes) nodeLabel(qname, zone string) (string, bool) {
	if !authority.IsBelow(qname, zone) {
		return "", false
	}
	l := qname[:len(qname)-len(zone)-1]
	if zone == "." {
		l = strings.TrimSuffix(qname, ".")
	}
	if !mdns.ValidHostLabel(l) {
		return "", false
	}
	for _, r := range m.reserved {
		if l == r {
			return "", false
		}
	}
	return l, true
}

// vipHolder is implemented by the sibling plugins that answer with the
// cluster's VIPs: apiint (API) and appswildcard (ingress).
type vipHolder interface {
	VIPs() []netip.Addr
}

// siblingVIPs collects the VIPs of the plugins of a server block, looked up
// at OnStartup as k8s_external looks up kubernetes. keepalived adds the VIPs
// to a node's interface, so an unsigned announcement can name them as any
// node's address (a rogue "master-2 → API VIP" would steal the node's
// traffic); the publisher leaves them out (--exclude-address), and the cache
// drops them from whatever it hears. A Corefile block without these plugins
// has no VIPs to protect in its zone.
func siblingVIPs(hs []plugin.Handler) []netip.Addr {
	var vips []netip.Addr
	for _, h := range hs {
		if v, ok := h.(vipHolder); ok {
			for _, a := range v.VIPs() {
				if !slices.Contains(vips, a) {
					vips = append(vips, a)
				}
			}
		}
	}
	return vips
}

// labelHolder is implemented by the sibling plugins that own a label
// directly below the zone and everything under it (lbservices: lb).
type labelHolder interface {
	ReservedLabels() []string
}

// withSiblingLabels adds the labels the plugins of a server block own to
// reserved (in a new slice): a node named like one is not served, rather
// than answered or not depending on the plugin order.
func withSiblingLabels(reserved []string, hs []plugin.Handler) []string {
	out := slices.Clone(reserved)
	for _, h := range hs {
		if lh, ok := h.(labelHolder); ok {
			for _, l := range lh.ReservedLabels() {
				if !slices.Contains(out, l) {
					out = append(out, l)
				}
			}
		}
	}
	return out
}

// Name implements the plugin.Handler interface.
func (m *MDNSNodes) Name() string { return pluginName }

// Origins implements authority.Member.
func (m *MDNSNodes) Origins() []string { return m.Zones }

// Fallthrough implements authority.Member.
func (m *MDNSNodes) Fallthrough() fall.F { return m.Fall }

// RecordTTL implements authority.Member.
func (m *MDNSNodes) RecordTTL() uint32 { return m.ttl }

// HoldsReverseBelow implements authority.ReverseHolder, from the snapshot
// being served.
func (m *MDNSNodes) HoldsReverseBelow(name string) bool {
	return m.index.Load().reverseMap().HasBelow(name)
}

// ServeOwnReverse implements authority.ReverseServer.
func (m *MDNSNodes) ServeOwnReverse(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, q authority.Query) (bool, int) {
	ok, rc, res := m.ServeReverse(w, r, q, m.index.Load().reverseMap(), m.ttl)
	if ok {
		requestCount.Inc(ctx, res)
	}
	return ok, rc
}
