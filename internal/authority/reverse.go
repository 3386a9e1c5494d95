package authority

import (
	"context"

	"github.com/infradns/infradns/internal/records"

	"github.com/miekg/dns"
)

// ReverseHolder is implemented by the members that answer PTR queries: it
// reports whether the member serves an address whose reverse name is
// strictly below name, which makes name an empty non-terminal of a declared
// reverse zone (NODATA, not NXDOMAIN).
type ReverseHolder interface {
	HoldsReverseBelow(name string) bool
}

// SetReverseZones declares the reverse zones (lower case, fully qualified,
// from the operator's CIDRs) that the cluster owns: a reverse name in them
// that no member serves gets NXDOMAIN or NODATA with the zone's SOA, as in
// the forward zone, instead of going on to the next plugin. Their SOA and NS
// name ns.dns. and hostmaster. of domain, the cluster domain. Call it after
// New; Link shares the zones with every member of the server block.
func (a *Authority) SetReverseZones(zones []string, domain string, ttl uint32) {
	a.declared = zones
	a.declaredDomain = domain
	a.addReverseZones(zones, domain, ttl)
}

// DeclaredReverseZones returns the reverse zones SetReverseZones declared on
// this member, and their cluster domain.
func (a *Authority) DeclaredReverseZones() ([]string, string) { return a.declared, a.declaredDomain }

// reverseDeclarer is what every member has through the embedded Authority.
type reverseDeclarer interface {
	DeclaredReverseZones() ([]string, string)
}

func (a *Authority) addReverseZones(zones []string, domain string, ttl uint32) {
	if len(zones) == 0 {
		return
	}
	if a.revZones == nil {
		a.revZones = map[string]*zone{}
	}
	for _, o := range zones {
		if z, ok := a.revZones[o]; ok {
			z.ttl = min(z.ttl, ttl)
			continue
		}
		a.revZones[o] = &zone{origin: o, ns: nsLabel + domain, mbox: "hostmaster." + domain, ttl: ttl}
		a.revOrigins = append(a.revOrigins, o)
	}
	a.revOrigins = longestFirst(a.revOrigins)
}

// linkReverse gathers the reverse zones every member declared, and notes
// whether self is the last member of the chain: the one that answers a
// reverse name of a declared zone that nobody serves.
func (a *Authority) linkReverse(members []Member, self Member) {
	a.revZones, a.revOrigins = nil, nil
	a.members = members
	a.last = len(members) == 0 || members[len(members)-1] == self || !containsMember(members, self)
	// The first member hands a reverse name to the later member that holds
	// it (HandReverse). The members are adjacent in the chain (one block of
	// directives), so the ones in between would only have passed it on.
	a.handTo = nil
	if len(members) > 1 && members[0] == self {
		for _, m := range members[1:] {
			rs, ok := m.(ReverseServer)
			if !ok {
				break
			}
			a.handTo = append(a.handTo, rs)
		}
	}
	// Every member answers PTR: the negative TTL is the smallest of theirs,
	// as in the forward zone.
	ttl := a.ttl
	for _, m := range members {
		ttl = min(ttl, m.RecordTTL())
	}
	a.addReverseZones(a.declared, a.declaredDomain, ttl)
	for _, m := range members {
		if d, ok := m.(reverseDeclarer); ok && m != self {
			zones, domain := d.DeclaredReverseZones()
			a.addReverseZones(zones, domain, ttl)
		}
	}
}

func containsMember(members []Member, self Member) bool {
	for _, m := range members {
		if m == self {
			return true
		}
	}
	return false
}

// ServeReverse answers a reverse name (in-addr.arpa., ip6.arpa.) of an
// address the member serves: PTR and ANY with the names that hold it, any
// other type NODATA; with the SOA when the name is in a declared reverse
// zone, else without one (we are not the reverse zone's authority, as hosts
// answers). ok is false when rev does not hold the name: the member passes
// it on unchanged, and never answers NXDOMAIN for an address it does not
// know, unless the name is in a declared reverse zone and the member is the
// last of the chain (ReverseMiss). Call it only when the name is outside
// the member's zones.
//
//go:noinline
func (a *Authority) ServeReverse(w dns.ResponseWriter, r *dns.Msg, q Query, rev records.Reverse, ttl uint32) (ok bool, rc int, res Result) {
	names, found := rev[q.Name]
	if !found {
		if !a.last || len(a.revOrigins) == 0 {
			return false, 0, ""
		}
		return a.reverseMiss(w, r, q, rev)
	}
	if rc, res := Screen(r, q); res != "" {
		return true, rc, res
	}
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if q.Type == dns.TypePTR || q.Type == dns.TypeANY {
		m.Answer = records.PTRs(q.QName, names, ttl)
	} else if z := a.revZones[matchZone(a.revOrigins, q.Name)]; z != nil {
		m.Ns = []dns.RR{a.soa(z)}
	}
	w.WriteMsg(m)
	return true, dns.RcodeSuccess, resultOf(m)
}

// reverseMiss answers a reverse name no member serves, when it lies in a
// declared reverse zone: the apex's SOA and NS, NODATA for an empty
// non-terminal above a served address, else NXDOMAIN, each with the zone's
// SOA; or passes it on (ok false) outside the declared zones or when a
// fallthrough covers it.
func (a *Authority) reverseMiss(w dns.ResponseWriter, r *dns.Msg, q Query, own records.Reverse) (ok bool, rc int, res Result) {
	z := a.revZones[matchZone(a.revOrigins, q.Name)]
	if z == nil {
		return false, 0, ""
	}
	for _, f := range a.falls {
		if f.Through(q.Name) {
			return false, 0, ""
		}
	}
	if rc, res := Screen(r, q); res != "" {
		return true, rc, res
	}
	m := a.reply(r)
	switch {
	case q.Name == z.origin:
		a.apex(m, z, q.Type)
	case own.HasBelow(q.Name) || a.heldBelow(q.Name):
		m.Ns = []dns.RR{a.soa(z)}
	default:
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{a.soa(z)}
		w.WriteMsg(m)
		return true, dns.RcodeNameError, NXDomain
	}
	w.WriteMsg(m)
	return true, dns.RcodeSuccess, resultOf(m)
}

// heldBelow reports whether any other member serves an address whose reverse
// name is below name.
func (a *Authority) heldBelow(name string) bool {
	for _, m := range a.members {
		if h, ok := m.(ReverseHolder); ok && h.HoldsReverseBelow(name) {
			return true
		}
	}
	return false
}

// ReverseServer is implemented by the members that answer PTR queries: it
// answers a reverse name the member holds (or, as the last member, a miss in
// a declared reverse zone) exactly as its ServeDNS would, counting it in
// its own metrics, and reports false, having written nothing, for any other.
// HandReverse calls it only for a name outside the member's zones.
type ReverseServer interface {
	// Match is the member's zone that holds a name (the embedded Authority's).
	Match(name string) string
	ServeOwnReverse(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, q Query) (ok bool, rc int)
}

// HandReverse is called by the first member of the chain for a reverse name
// outside its zones that it does not hold: the later member that holds it
// answers at once. Passed along the chain instead, the PTR of a node went
// through apiint's and appswildcard's ServeDNS frames to mdnsnodes, and
// every such query's goroutine grew (and copied) its stack: 27 % of the CPU,
// PTR at 0.62x a one-map lookup. ok false: nobody answered, pass it on.
func (a *Authority) HandReverse(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, q Query) (ok bool, rc int) {
	for _, m := range a.handTo {
		if m.Match(q.Name) != "" {
			// A member whose zone holds the name answers it as a forward
			// name: the chain decides.
			return false, 0
		}
		if ok, rc := m.ServeOwnReverse(ctx, w, r, q); ok {
			return true, rc
		}
	}
	return false, 0
}
