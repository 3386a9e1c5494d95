// Package appswildcard implements the appswildcard plugin: every name below
// apps.<cluster domain> (or another ingress domain) answers with the ingress VIPs.
package appswildcard

import (
	"context"
	"net/netip"
	"slices"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/fall"

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

	wildcards []Wildcard      // longest domain first, so a nested shard wins over apps
	reverse   records.Reverse // ingress VIP's reverse name → ingress.<domain>
	ttl       uint32          // smallest TTL of the wildcards, for the zone's SOA
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
	// PTR: an ingress VIP answers ingress.<domain>, a name below the
	// wildcard domain, so it resolves back to the VIP.
	a.reverse = records.Reverse{}
	for _, w := range a.wildcards {
		a.reverse.Add(w.Addrs, ingressLabel+"."+w.Domain)
	}
	a.reverse.Sort()
}

// ingressLabel names an ingress VIP in PTR answers: ingress.<domain>.
const ingressLabel = "ingress"

// ServeDNS implements the plugin.Handler interface. The wildcard answer is the
// hot path; everything else is in serveOther, so its frame does not grow the
// stack of every query.
func (a *AppsWildcard) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	q, ok := authority.NewQuery(r)
	if !ok {
		return plugin.NextOrFailure(a.Name(), a.Next, ctx, w, r)
	}
	zone := a.Match(q.Name)
	if zone == "" {
		if records.IsReverse(q.Name) {
			if ok, rc, res := a.ServeReverse(w, r, q, a.reverse, a.ttl); ok {
				requestCount.Inc(ctx, res)
				return rc, nil
			}
			if ok, rc := a.HandReverse(ctx, w, r, q); ok {
				return rc, nil
			}
		}
		return plugin.NextOrFailure(a.Name(), a.Next, ctx, w, r)
	}
	if rc, res := authority.Screen(r, q); res != "" {
		// Malformed (FORMERR), not QUERY (NOTIMP), not class IN or a
		// zone transfer (REFUSED): the server writes the reply.
		requestCount.Inc(ctx, res)
		return rc, nil
	}
	for i := range a.wildcards {
		wc := &a.wildcards[i]
		if q.Name == wc.Domain {
			break // a shard's own domain stops the wildcard above it
		}
		if authority.IsBelow(q.Name, wc.Domain) {
			rc, res := a.Write(w, r, wc.Zone, wc.Addrs.RRs(q.QName, q.Type, wc.TTL))
			requestCount.Inc(ctx, res)
			return rc, nil
		}
	}
	if a.Passes(q, zone) && !a.atOrAboveWildcard(q.Name) {
		requestCount.Inc(ctx, authority.Passed)
		return plugin.NextOrFailure(a.Name(), a.Next, ctx, w, r)
	}
	rc, res, err := a.serveOther(ctx, w, r, q, zone)
	requestCount.Inc(ctx, res)
	return rc, err
}

// atOrAboveWildcard reports whether name is a wildcard domain or one of its
// ancestors: names this plugin answers with NODATA, never passed on.
func (a *AppsWildcard) atOrAboveWildcard(name string) bool {
	for i := range a.wildcards {
		if d := a.wildcards[i].Domain; name == d || authority.IsBelow(d, name) {
			return true
		}
	}
	return false
}

//go:noinline
func (a *AppsWildcard) serveOther(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, q authority.Query, zone string) (int, authority.Result, error) {
	for i := range a.wildcards {
		if wc := &a.wildcards[i]; q.Name == wc.Domain {
			// An existing name stops the wildcard above it (RFC 4592): NODATA.
			rc, res := a.Write(w, r, wc.Zone, nil)
			return rc, res, nil
		}
	}
	if ok, res := a.Own(w, r, q, zone); ok {
		return dns.RcodeSuccess, res, nil
	}
	for i := range a.wildcards {
		// Names between the zone and a wildcard domain are empty non-terminals.
		if wc := &a.wildcards[i]; authority.IsBelow(wc.Domain, q.Name) && (q.Name == wc.Zone || authority.IsBelow(q.Name, wc.Zone)) {
			rc, res := a.Write(w, r, wc.Zone, nil)
			return rc, res, nil
		}
	}
	return a.Miss(ctx, w, r, q, zone, a.Name(), a.Next)
}

// Name implements the plugin.Handler interface.
func (a *AppsWildcard) Name() string { return pluginName }

// Origins implements authority.Member.
func (a *AppsWildcard) Origins() []string { return a.Zones }

// Fallthrough implements authority.Member.
func (a *AppsWildcard) Fallthrough() fall.F { return a.Fall }

// RecordTTL implements authority.Member.
func (a *AppsWildcard) RecordTTL() uint32 { return a.ttl }

// VIPs returns the addresses of every wildcard: the ingress VIPs, which
// mdnsnodes never serves as a node's address.
func (a *AppsWildcard) VIPs() []netip.Addr {
	var out []netip.Addr
	for _, w := range a.wildcards {
		out = append(out, w.Addrs.Addrs()...)
	}
	return out
}

// HoldsReverseBelow implements authority.ReverseHolder.
func (a *AppsWildcard) HoldsReverseBelow(name string) bool { return a.reverse.HasBelow(name) }

// ServeOwnReverse implements authority.ReverseServer.
func (a *AppsWildcard) ServeOwnReverse(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, q authority.Query) (bool, int) {
	ok, rc, res := a.ServeReverse(w, r, q, a.reverse, a.ttl)
	if ok {
		requestCount.Inc(ctx, res)
	}
	return ok, rc
}
