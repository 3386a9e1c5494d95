// Package appswildcard implements the appswildcard plugin: every name below
// apps.<cluster domain> (or another ingress domain) answers with the ingress VIPs.
package appswildcard

import (
	"context"
	"slices"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metrics"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/request"

	"github.com/infradns/infradns/internal/authority"
	"github.com/infradns/infradns/internal/directive"
	"github.com/infradns/infradns/internal/records"

	"github.com/miekg/dns"
)

// Wildcard is one ingress domain: every name strictly below Domain answers with Addrs.
type Wildcard struct {
	Zone   string // the authority zone it belongs to
	Domain string // e.g. apps.ocp4.example.com., lower case
	Addrs  records.Set
	TTL    uint32
}

// AppsWildcard is the appswildcard handler.
type AppsWildcard struct {
	Next  plugin.Handler
	Zones []string
	Fall  fall.F

	wildcards []Wildcard // longest domain first, so a nested shard wins over apps
	ttl       uint32     // smallest TTL of the wildcards, for the zone's SOA
	authority.Authority
}

// New returns an AppsWildcard with the defaults.
func New() *AppsWildcard { return &AppsWildcard{} }

func (a *AppsWildcard) build() {
	slices.SortStableFunc(a.wildcards, func(x, y Wildcard) int { return len(y.Domain) - len(x.Domain) })
	a.Zones = a.Zones[:0]
	a.ttl = directive.MaxTTL
	for _, w := range a.wildcards {
		if !slices.Contains(a.Zones, w.Zone) {
			a.Zones = append(a.Zones, w.Zone)
		}
		a.ttl = min(a.ttl, w.TTL)
	}
	a.Authority = authority.New(a.Zones, a.ttl, a.Fall)
}

// ServeDNS implements the plugin.Handler interface.
func (a *AppsWildcard) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	state := request.Request{W: w, Req: r}
	qname := state.Name()
	zone := plugin.Zones(a.Zones).Matches(qname)
	if zone == "" {
		return plugin.NextOrFailure(a.Name(), a.Next, ctx, w, r)
	}
	for i := range a.wildcards {
		wc := &a.wildcards[i]
		if authority.IsBelow(qname, wc.Domain) {
			rc, res := a.Write(w, r, wc.Zone, wc.Addrs.RRs(state.QName(), state.QType(), wc.TTL))
			count(ctx, res)
			return rc, nil
		}
		if qname == wc.Domain {
			// An existing name stops the wildcard above it (RFC 4592): NODATA.
			rc, res := a.Write(w, r, wc.Zone, nil)
			count(ctx, res)
			return rc, nil
		}
	}
	if ok, res := a.Own(w, r, state, zone); ok {
		count(ctx, res)
		return dns.RcodeSuccess, nil
	}
	for i := range a.wildcards {
		// Names between the zone and a wildcard domain are empty non-terminals.
		if wc := &a.wildcards[i]; authority.IsBelow(wc.Domain, qname) && (qname == wc.Zone || authority.IsBelow(qname, wc.Zone)) {
			rc, res := a.Write(w, r, wc.Zone, nil)
			count(ctx, res)
			return rc, nil
		}
	}
	rc, res, err := a.Miss(ctx, w, r, state, zone, a.Name(), a.Next)
	count(ctx, res)
	return rc, err
}

func count(ctx context.Context, res authority.Result) {
	requestCount.WithLabelValues(metrics.WithServer(ctx), string(res)).Inc()
}

// Name implements the plugin.Handler interface.
func (a *AppsWildcard) Name() string { return pluginName }

// Origins implements authority.Member.
func (a *AppsWildcard) Origins() []string { return a.Zones }

// Fallthrough implements authority.Member.
func (a *AppsWildcard) Fallthrough() fall.F { return a.Fall }

// RecordTTL implements authority.Member.
func (a *AppsWildcard) RecordTTL() uint32 { return a.ttl }
