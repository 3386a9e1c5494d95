// Package mdnsnodes implements the mdnsnodes plugin: <node>.<cluster domain>
// answers with the addresses that node announces over multicast DNS.
package mdnsnodes

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/fall"

	"github.com/infradns/infradns/internal/authority"
	"github.com/infradns/infradns/internal/directive"
	"github.com/infradns/infradns/internal/mdns"

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

	// index is what ServeDNS reads: an immutable snapshot swapped by the
	// browser, so a query never waits for the network or a lock.
	index   atomic.Pointer[mdns.Index]
	browser atomic.Pointer[mdns.Browser]

	forceReady bool // tests without a listener

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
	return mdns.Filter{Cluster: m.cluster, Service: m.service + "." + mdns.DefaultDomain, Reserved: m.reserved}
}

// Start starts listening; called from OnStartup. During a reload the new
// instance starts before the old one stops: the sockets share the port.
func (m *MDNSNodes) Start() error {
	var key []byte
	if m.keyFile != "" {
		k, err := mdns.LoadKey(m.keyFile)
		if err != nil {
			return err
		}
		key = k
	}
	server := strings.Join(m.Zones, ",")
	// Every reason at 0 from the start, so an alert on a rate sees the first rejection.
	for _, reason := range mdns.Reasons {
		rejected.WithLabelValues(server, reason)
	}
	b, err := mdns.NewBrowser(mdns.BrowserConfig{
		Interface: m.iface,
		Bind:      m.bind,
		Filter:    m.filter(),
		Key:       key,
		Logger:    slog.New(clogHandler{}),
		OnIndex: func(ix *mdns.Index) {
			m.index.Store(ix)
			nodes.WithLabelValues(server).Set(float64(ix.Len()))
		},
		OnResult: func(r mdns.Result) {
			if r.Accepted > 0 {
				accepted.WithLabelValues(server).Add(float64(r.Accepted))
			}
			for reason, n := range r.Rejected {
				rejected.WithLabelValues(server, reason).Add(float64(n))
			}
		},
		OnQuery: func() { queries.WithLabelValues(server).Inc() },
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	m.browser.Store(b)
	m.mu.Lock()
	m.cancel, m.done = cancel, done
	m.mu.Unlock()
	go func() {
		defer close(done)
		if err := b.Run(ctx); err != nil {
			log.Errorf("listener stopped: %v", err)
		}
	}()
	return nil
}

// Stop stops listening and waits until the sockets are closed; it is safe to
// call more than once, and before Start.
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
		return plugin.NextOrFailure(m.Name(), m.Next, ctx, w, r)
	}
	if label, ok := m.nodeLabel(q.Name, zone); ok {
		if set, ok := m.index.Load().Lookup(label); ok {
			rc, res := m.Write(w, r, zone, set.RRs(q.QName, q.Type, m.ttl))
			requestCount.Inc(ctx, res)
			return rc, nil
		}
		if !m.Ready() {
			// Not heard the link yet: an NXDOMAIN now would be cached
			// for a name that is about to exist.
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

// Name implements the plugin.Handler interface.
func (m *MDNSNodes) Name() string { return pluginName }

// Origins implements authority.Member.
func (m *MDNSNodes) Origins() []string { return m.Zones }

// Fallthrough implements authority.Member.
func (m *MDNSNodes) Fallthrough() fall.F { return m.Fall }

// RecordTTL implements authority.Member.
func (m *MDNSNodes) RecordTTL() uint32 { return m.ttl }
