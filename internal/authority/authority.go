// Package authority makes the infradns plugins of one server block answer as a
// single authoritative source for the cluster zone.
//
// Each plugin (apiint, appswildcard, mdnsnodes) owns some names of the zone. A
// plugin that does not own a name must not NXDOMAIN it, because a sibling further
// down the chain may own it; only the last member serving the zone decides
// between NXDOMAIN and fallthrough, and the SOA/NS of the apex are answered by
// whichever member sees the apex first. The decision data is computed once, at
// OnStartup, so the query path only compares strings.
package authority

import (
	"context"
	"net"
	"strings"
	"time"

	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/request"

	"github.com/miekg/dns"
)

// Member is implemented by every plugin that takes part in the shared authority.
type Member interface {
	plugin.Handler
	// Origins returns the zones the member serves: lower case, fully qualified.
	Origins() []string
	// Fallthrough returns the member's own fallthrough setting.
	Fallthrough() fall.F
	// RecordTTL returns the TTL of the member's answers; the zone's negative TTL
	// is the smallest of its members'.
	RecordTTL() uint32
}

// Result says what a member did with a query, for its metrics.
type Result string

// The results a member reports.
const (
	Answer      Result = "answer"      // owned name, records of the asked type
	NoData      Result = "nodata"      // owned name (or apex), no records of the asked type
	NXDomain    Result = "nxdomain"    // nobody in the authority owns the name
	Fallthrough Result = "fallthrough" // nobody owns the name and fallthrough is set
	Passed      Result = "passed"      // not ours; a later member may own it
	// NotImplemented: an opcode other than QUERY (NOTIFY, UPDATE, ...) for
	// an owned zone. An authoritative server that does not implement it
	// says so (NOTIMP, RFC 1035 4.1.1), never answers it as a query.
	NotImplemented Result = "notimp"
)

// nsLabel is the name of the zone's nameserver below the apex. It resolves to the
// address the query arrived on, as the kubernetes plugin does for ns.dns.
const nsLabel = "ns.dns."

// Authority is embedded (by value) in each member. Until Link runs it behaves as if
// the member were alone in the server block.
type Authority struct {
	zones   map[string]*zone
	origins []string // the member's zones, longest first, for Match
	later   []string // zones served by members after this one in the chain
	falls   []fall.F // fallthrough settings of every member, this one included
	serial  uint32
	ttl     uint32 // the member's record TTL

	// Reverse zones the operator declared (SetReverseZones) on this member,
	// and, after Link, those of every member of the server block.
	declared       []string
	declaredDomain string
	revZones       map[string]*zone
	revOrigins     []string        // longest first
	members        []Member        // the server block's members, for heldBelow
	last           bool            // no member after this one: it answers reverse misses
	handTo         []ReverseServer // the later members, when this one is the first
}

type zone struct {
	origin string
	ns     string // ns.dns.<origin>
	dnsENT string // dns.<origin>, an empty non-terminal above ns
	mbox   string // hostmaster.<origin>
	ttl    uint32
}

// New returns an Authority for a member serving origins with ttl and fall.
func New(origins []string, ttl uint32, f fall.F) Authority {
	a := Authority{zones: make(map[string]*zone, len(origins)), falls: []fall.F{f}, serial: uint32(time.Now().Unix()), ttl: ttl, last: true}
	for _, o := range origins {
		a.zones[o] = &zone{origin: o, ns: nsLabel + o, dnsENT: "dns." + o, mbox: "hostmaster." + o, ttl: ttl}
	}
	a.origins = longestFirst(origins)
	return a
}

// Link connects self with the other members of its server block. Call it from
// OnStartup, when every handler of the block has been built.
func (a *Authority) Link(cfg *dnsserver.Config, self Member) {
	a.LinkMembers(Members(cfg), self)
}

// Members returns the members of a server block in chain order.
func Members(cfg *dnsserver.Config) []Member {
	var ms []Member
	for _, h := range cfg.Handlers() {
		if m, ok := h.(Member); ok {
			ms = append(ms, m)
		}
	}
	return ms
}

// LinkMembers is Link with the member list given, in chain order.
func (a *Authority) LinkMembers(members []Member, self Member) {
	a.later, a.falls = nil, nil
	seen := false
	for _, m := range members {
		a.falls = append(a.falls, m.Fallthrough())
		if m == self {
			seen = true
			continue
		}
		if seen {
			a.later = append(a.later, m.Origins()...)
		}
		for _, o := range m.Origins() {
			if z, ok := a.zones[o]; ok && m.RecordTTL() < z.ttl {
				z.ttl = m.RecordTTL()
			}
		}
	}
	if !seen {
		a.falls = append(a.falls, self.Fallthrough())
	}
	a.linkReverse(members, self)
}

// Own answers the names the authority itself owns: the apex (SOA, NS, else
// NODATA) and the nameserver name. It reports whether it wrote a reply.
func (a *Authority) Own(w dns.ResponseWriter, r *dns.Msg, q Query, origin string) (bool, Result) {
	z := a.zones[origin]
	if z == nil {
		return false, ""
	}
	switch q.Name {
	case z.origin:
		m := a.reply(r)
		a.apex(m, z, q.Type)
		w.WriteMsg(m)
		return true, resultOf(m)
	case z.ns:
		m := a.reply(r)
		if rr := a.localAddr(request.Request{W: w, Req: r}, z); rr != nil {
			m.Answer = []dns.RR{rr}
		} else {
			m.Ns = []dns.RR{a.soa(z)}
		}
		w.WriteMsg(m)
		return true, resultOf(m)
	case z.dnsENT:
		m := a.reply(r)
		m.Ns = []dns.RR{a.soa(z)}
		w.WriteMsg(m)
		return true, NoData
	}
	return false, ""
}

// Write sends the records of an owned name; no records means NODATA with the SOA.
func (a *Authority) Write(w dns.ResponseWriter, r *dns.Msg, origin string, answer []dns.RR) (int, Result) {
	m := a.reply(r)
	m.Answer = answer
	if len(answer) == 0 {
		if z := a.zones[origin]; z != nil {
			m.Ns = []dns.RR{a.soa(z)}
		}
	}
	w.WriteMsg(m)
	return dns.RcodeSuccess, resultOf(m)
}

// Miss handles a name in origin that the calling member does not own: a later
// member may own it, else NXDOMAIN with the SOA, or fallthrough when any member
// asked for it.
func (a *Authority) Miss(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, q Query, origin string, name string, next plugin.Handler) (int, Result, error) {
	if matchZone(a.later, q.Name) != "" {
		rc, err := plugin.NextOrFailure(name, next, ctx, w, r)
		return rc, Passed, err
	}
	return a.Absent(ctx, w, r, q, origin, name, next)
}

// Absent handles a name in origin that no member may own (it lies in a
// subtree the calling member owns whole): NXDOMAIN with the SOA, or
// fallthrough when any member asked for it.
func (a *Authority) Absent(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, q Query, origin string, name string, next plugin.Handler) (int, Result, error) {
	qname := q.Name
	for _, f := range a.falls {
		if f.Through(qname) {
			rc, err := plugin.NextOrFailure(name, next, ctx, w, r)
			return rc, Fallthrough, err
		}
	}
	m := a.reply(r)
	m.Rcode = dns.RcodeNameError
	if z := a.zones[origin]; z != nil {
		m.Ns = []dns.RR{a.soa(z)}
	}
	w.WriteMsg(m)
	return dns.RcodeNameError, NXDomain, nil
}

// Passes reports whether a name in origin that the calling member does not own
// belongs to a later member of the chain. It is Miss's first decision, made
// without Miss's frame: in apiint, before appswildcard, it is the path of every
// *.apps query. The names the authority answers itself (apex, ns.dns, dns) stay
// with the first member that sees them.
func (a *Authority) Passes(q Query, origin string) bool {
	if len(a.later) == 0 || matchZone(a.later, q.Name) == "" {
		return false
	}
	z := a.zones[origin]
	return z == nil || (q.Name != z.origin && q.Name != z.ns && q.Name != z.dnsENT)
}

// Other answers a name in origin that the calling member does not own itself:
// the authority's own names (Own), else Miss. Members call it after their own
// lookup failed, keeping their ServeDNS small: the rarely taken paths do not
// grow the stack of every query.
//
//go:noinline
func (a *Authority) Other(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, q Query, origin string, name string, next plugin.Handler) (int, Result, error) {
	if ok, res := a.Own(w, r, q, origin); ok {
		return dns.RcodeSuccess, res, nil
	}
	return a.Miss(ctx, w, r, q, origin, name, next)
}

func (a *Authority) reply(r *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	return m
}

// soa follows k8s_external: the negative TTL (minttl) equals the record TTL, so a
// name that appears later is not hidden longer than a positive answer is cached.
// apex answers qtype at z's origin into m: SOA, NS, both for ANY (RFC
// 8482: a name with data answers ANY with at least one of its RRsets,
// never NODATA), else NODATA with the SOA.
func (a *Authority) apex(m *dns.Msg, z *zone, qtype uint16) {
	switch qtype {
	case dns.TypeSOA:
		m.Answer = []dns.RR{a.soa(z)}
	case dns.TypeNS:
		m.Answer = []dns.RR{a.nsRecord(z)}
	case dns.TypeANY:
		m.Answer = []dns.RR{a.soa(z), a.nsRecord(z)}
	default:
		m.Ns = []dns.RR{a.soa(z)}
	}
}

func (a *Authority) soa(z *zone) *dns.SOA {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: z.origin, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: z.ttl},
		Ns:      z.ns,
		Mbox:    z.mbox,
		Serial:  a.serial,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  z.ttl,
	}
}

func (a *Authority) nsRecord(z *zone) *dns.NS {
	return &dns.NS{Hdr: dns.RR_Header{Name: z.origin, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: z.ttl}, Ns: z.ns}
}

// localAddr answers the nameserver name with the address the query arrived on,
// when its family is the one asked for (ANY asks for both).
func (a *Authority) localAddr(state request.Request, z *zone) dns.RR {
	ip := net.ParseIP(state.LocalIP())
	if ip == nil {
		return nil
	}
	hdr := dns.RR_Header{Name: state.QName(), Class: dns.ClassINET, Ttl: z.ttl}
	qt := state.QType()
	if v4 := ip.To4(); v4 != nil && (qt == dns.TypeA || qt == dns.TypeANY) {
		hdr.Rrtype = dns.TypeA
		return &dns.A{Hdr: hdr, A: v4}
	}
	if ip.To4() == nil && (qt == dns.TypeAAAA || qt == dns.TypeANY) {
		hdr.Rrtype = dns.TypeAAAA
		return &dns.AAAA{Hdr: hdr, AAAA: ip}
	}
	return nil
}

func resultOf(m *dns.Msg) Result {
	if len(m.Answer) > 0 {
		return Answer
	}
	return NoData
}

// IsBelow reports whether name is strictly below parent, on a label boundary.
// Both must be lower case, fully qualified and in the canonical presentation
// form miekg/dns unpacks from the wire (a dot inside a label is "\.", a
// backslash "\\"), which is what dns.IsSubDomain compares label by label.
// It is that comparison without Split's allocations: the dot before parent
// ends a label only when an even number of backslashes precede it, so
// x\.apps.example.com. is one label below example.com., not below apps.
func IsBelow(name, parent string) bool {
	if parent == "." {
		return name != "."
	}
	i := len(name) - len(parent) - 1
	if i < 1 || !strings.HasSuffix(name, parent) || name[i] != '.' {
		return false
	}
	n := 0
	for j := i - 1; j >= 0 && name[j] == '\\'; j-- {
		n++
	}
	return n%2 == 0
}
