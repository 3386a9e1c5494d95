// Package apiint implements the apiint plugin: api-int.<cluster domain> and
// api.<cluster domain> answer with the API VIPs.
package apiint

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

// APIInt is the apiint handler.
type APIInt struct {
	Next  plugin.Handler
	Zones []string
	Fall  fall.F

	apiInt records.Set // api-int.<zone>: the internal API VIPs
	api    records.Set // api.<zone>: the same unless an external LB is named
	ttl    uint32

	names   map[string]*records.Set // lower-case FQDN → addresses, built once by build
	reverse records.Reverse         // reverse name → api-int (or api) names, built once by build
	// reverseZones are the reverse zones of the reverse option: the
	// cluster's, answered NXDOMAIN/NODATA like the forward zone.
	reverseZones []string
	authority.Authority
}

// New returns an APIInt with the defaults.
func New() *APIInt { return &APIInt{ttl: directive.DefaultTTL} }

// build prepares the name index and the authority once the options are known.
func (a *APIInt) build() {
	a.names = make(map[string]*records.Set, 2*len(a.Zones))
	for _, z := range a.Zones {
		a.names["api-int."+z] = &a.apiInt
		a.names["api."+z] = &a.api
	}
	// PTR: an API VIP answers api-int; an address only api has (an
	// external load balancer's) answers api.
	a.reverse = records.Reverse{}
	for _, z := range a.Zones {
		a.reverse.Add(a.apiInt, "api-int."+z)
	}
	for _, z := range a.Zones {
		for _, ip := range append(slices.Clip(a.api.V4), a.api.V6...) {
			if !slices.ContainsFunc(append(slices.Clip(a.apiInt.V4), a.apiInt.V6...), ip.Equal) {
				a.reverse.AddIP(ip, "api."+z)
			}
		}
	}
	a.reverse.Sort()
	a.Authority = authority.New(a.Zones, a.ttl, a.Fall)
	if len(a.reverseZones) > 0 {
		a.SetReverseZones(a.reverseZones, a.Zones[0], a.ttl)
	}
}

// ServeDNS implements the plugin.Handler interface. It is kept small: the
// answer path runs in the query's goroutine, whose stack grows (and is copied)
// for every frame byte it needs.
func (a *APIInt) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
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
	if set, ok := a.names[q.Name]; ok {
		rc, res := a.Write(w, r, zone, set.RRs(q.QName, q.Type, a.ttl))
		requestCount.Inc(ctx, res)
		return rc, nil
	}
	if a.Passes(q, zone) {
		requestCount.Inc(ctx, authority.Passed)
		return plugin.NextOrFailure(a.Name(), a.Next, ctx, w, r)
	}
	rc, res, err := a.Other(ctx, w, r, q, zone, a.Name(), a.Next)
	requestCount.Inc(ctx, res)
	return rc, err
}

// Name implements the plugin.Handler interface.
func (a *APIInt) Name() string { return pluginName }

// Origins implements authority.Member.
func (a *APIInt) Origins() []string { return a.Zones }

// Fallthrough implements authority.Member.
func (a *APIInt) Fallthrough() fall.F { return a.Fall }

// VIPs returns the addresses apiint answers with (api-int and api): the
// API VIPs, which mdnsnodes never serves as a node's address.
func (a *APIInt) VIPs() []netip.Addr {
	vs := append(a.apiInt.Addrs(), a.api.Addrs()...)
	slices.SortFunc(vs, netip.Addr.Compare)
	return slices.Compact(vs)
}

// RecordTTL implements authority.Member.
func (a *APIInt) RecordTTL() uint32 { return a.ttl }

// HoldsReverseBelow implements authority.ReverseHolder.
func (a *APIInt) HoldsReverseBelow(name string) bool { return a.reverse.HasBelow(name) }

// ServeOwnReverse implements authority.ReverseServer.
func (a *APIInt) ServeOwnReverse(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, q authority.Query) (bool, int) {
	ok, rc, res := a.ServeReverse(w, r, q, a.reverse, a.ttl)
	if ok {
		requestCount.Inc(ctx, res)
	}
	return ok, rc
}
