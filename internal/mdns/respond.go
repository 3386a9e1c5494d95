package mdns

import (
	"net/netip"
	"slices"

	"github.com/miekg/dns"
)

// Reply is the response to one received query.
type Reply struct {
	Msg *dns.Msg
	// Unicast: send to the querier's address and port; else to the group.
	Unicast bool
	// Shared: the answer holds shared records (PTR), which RFC 6762 6 asks to
	// delay by 20–120 ms so responses from many hosts do not collide.
	Shared bool
}

// legacyTTL caps TTLs in replies to legacy unicast queriers (RFC 6762 6.7).
const legacyTTL = 10

// Respond returns the reply to a received message, or nil when there is
// nothing to say. A response is never answered: Conflicts looks at those.
// Names compare case-insensitively; the querier's known answers suppress ours
// (RFC 6762 7.1).
func (z *Zone) Respond(q *dns.Msg, src netip.AddrPort, stamp Stamp) *Reply {
	if q == nil || q.Response || q.Opcode != dns.OpcodeQuery || q.Rcode != dns.RcodeSuccess || len(q.Question) == 0 {
		return nil
	}
	legacy := src.Port() != Port
	o := rrOpts{flush: !legacy, stamp: stamp}
	if legacy {
		o.maxTTL = legacyTTL
	}
	var answer, extra []dns.RR
	unicast, shared := legacy, false
	addExtra := func(rrs ...dns.RR) {
		for _, rr := range rrs {
			if !containsRR(answer, rr) && !containsRR(extra, rr) {
				extra = append(extra, rr)
			}
		}
	}
	for _, qs := range q.Question {
		if qs.Qclass&classUnicast != 0 {
			unicast = true
		}
		if c := qs.Qclass &^ classUnicast; c != dns.ClassINET && c != dns.ClassANY {
			continue
		}
		name, t := lower(qs.Name), qs.Qtype
		for _, s := range z.Services {
			switch name {
			case s.TypeName():
				if t == dns.TypePTR || t == dns.TypeANY {
					answer = appendNew(answer, z.ptr(s, o))
					shared = true
				}
			case "_services._dns-sd._udp." + lower(dns.Fqdn(s.Domain)):
				if t == dns.TypePTR || t == dns.TypeANY {
					answer = appendNew(answer, z.enumPTR(s, o))
					shared = true
				}
			case lower(s.InstanceName()):
				if t == dns.TypeSRV || t == dns.TypeANY {
					answer = appendNew(answer, z.srv(s, o))
				}
				if t == dns.TypeTXT || t == dns.TypeANY {
					answer = appendNew(answer, z.txt(s, o))
				}
			}
		}
		if name == z.Host && (t == dns.TypeA || t == dns.TypeAAAA || t == dns.TypeANY) {
			answer = appendNew(answer, z.addrRRs(t, o)...)
		}
	}
	answer = suppressKnown(answer, q.Answer)
	if len(answer) == 0 {
		return nil
	}
	// Additional records (RFC 6763 12): what the querier asks for next.
	for _, rr := range answer {
		switch rr := rr.(type) {
		case *dns.PTR:
			for _, s := range z.Services {
				if rr.Ptr == s.InstanceName() {
					addExtra(z.srv(s, o), z.txt(s, o))
					addExtra(z.addrRRs(dns.TypeANY, o)...)
				}
			}
		case *dns.SRV, *dns.TXT:
			addExtra(z.addrRRs(dns.TypeANY, o)...)
		case *dns.A, *dns.AAAA:
			// The other family (RFC 6762 6.2), and with a key the signed TXT
			// that vouches for all of them.
			addExtra(z.addrRRs(dns.TypeANY, o)...)
			if z.Key != nil {
				for _, s := range z.Services {
					if lower(dns.Fqdn(s.Host)) == z.Host {
						addExtra(z.srv(s, o), z.txt(s, o))
					}
				}
			}
		}
	}
	m := response()
	if legacy {
		// A legacy resolver matches the reply on ID and question (RFC 6762 6.7).
		m.Id = q.Id
		m.Question = slices.Clone(q.Question)
		for i := range m.Question {
			m.Question[i].Qclass &^= classUnicast
		}
	}
	m.Answer, m.Extra = answer, extra
	return &Reply{Msg: m, Unicast: unicast, Shared: shared}
}

// Conflicts reports whether a received response claims one of our unique
// names (host address records, instance SRV) with data that is not ours
// (RFC 6762 9). Our own announcements looped back never conflict.
func (z *Zone) Conflicts(m *dns.Msg) bool {
	if m == nil || !m.Response {
		return false
	}
	for _, rr := range append(slices.Clone(m.Answer), m.Extra...) {
		if rr.Header().Ttl == 0 {
			continue // a goodbye claims nothing
		}
		name := lower(rr.Header().Name)
		switch rr := rr.(type) {
		case *dns.A:
			if name == z.Host && !z.has(rr.A) {
				return true
			}
		case *dns.AAAA:
			if name == z.Host && !z.has(rr.AAAA) {
				return true
			}
		case *dns.SRV:
			for _, s := range z.Services {
				if name == lower(s.InstanceName()) && (lower(rr.Target) != lower(dns.Fqdn(s.Host)) || rr.Port != s.Port) {
					return true
				}
			}
		}
	}
	return false
}

// ByeForUs reports whether a response says goodbye (TTL 0) to one of our
// live address records. We sent no such packet while running, so another
// host did: a forged goodbye, or an echo of our data followed by one, which
// an unsigned cache cannot tell from ours. Re-announcing within the cache's
// one-second goodbye grace (RFC 6762 10.1) keeps the node resolvable.
func (z *Zone) ByeForUs(m *dns.Msg) bool {
	if m == nil || !m.Response {
		return false
	}
	for _, rr := range append(slices.Clone(m.Answer), m.Extra...) {
		if rr.Header().Ttl != 0 || lower(rr.Header().Name) != z.Host {
			continue
		}
		switch rr := rr.(type) {
		case *dns.A:
			if z.has(rr.A) {
				return true
			}
		case *dns.AAAA:
			if z.has(rr.AAAA) {
				return true
			}
		}
	}
	return false
}

// ProbeConflict reports whether a received probe (a query with our names in
// its questions and proposed records in its authority section) wins the
// simultaneous-probe tie-break against ours (RFC 6762 8.2): we must then wait
// a second and probe again.
func (z *Zone) ProbeConflict(m *dns.Msg) bool {
	if m == nil || m.Response || len(m.Ns) == 0 {
		return false
	}
	ours := z.Probe().Ns
	names := map[string]bool{}
	for _, rr := range ours {
		names[lower(rr.Header().Name)] = true
	}
	for name := range names {
		var theirs, mine []dns.RR
		for _, rr := range m.Ns {
			if lower(rr.Header().Name) == name {
				theirs = append(theirs, rr)
			}
		}
		for _, rr := range ours {
			if lower(rr.Header().Name) == name {
				mine = append(mine, rr)
			}
		}
		if len(theirs) > 0 && compareRRSets(mine, theirs) < 0 {
			return true
		}
	}
	return false
}

// compareRRSets orders two sets of proposed records per RFC 6762 8.2.1:
// sorted, then compared record by record on class, type and rdata bytes.
func compareRRSets(a, b []dns.RR) int {
	sa, sb := sortedWire(a), sortedWire(b)
	for i := 0; i < len(sa) && i < len(sb); i++ {
		if c := slices.Compare(sa[i], sb[i]); c != 0 {
			return c
		}
	}
	return len(sa) - len(sb)
}

func sortedWire(rrs []dns.RR) [][]byte {
	var out [][]byte
	for _, rr := range rrs {
		h := rr.Header()
		buf := make([]byte, dns.Len(rr)+64)
		n, err := dns.PackRR(rr, buf, 0, nil, false)
		if err != nil {
			continue
		}
		hl, err := dns.PackDomainName(dns.Fqdn(h.Name), make([]byte, 256), 0, nil, false)
		if err != nil || hl+10 > n {
			continue
		}
		// class, type, rdata: skip the owner name and the TTL/length fields.
		rec := append([]byte{byte(h.Class >> 8 &^ 0x80), byte(h.Class), byte(h.Rrtype >> 8), byte(h.Rrtype)}, buf[hl+10:n]...)
		out = append(out, rec)
	}
	slices.SortFunc(out, slices.Compare)
	return out
}

func (z *Zone) has(ip []byte) bool {
	a, ok := netip.AddrFromSlice(ip)
	return ok && slices.Contains(z.Addrs, a.Unmap())
}

func appendNew(rrs []dns.RR, add ...dns.RR) []dns.RR {
	for _, rr := range add {
		if !containsRR(rrs, rr) {
			rrs = append(rrs, rr)
		}
	}
	return rrs
}

func containsRR(rrs []dns.RR, rr dns.RR) bool {
	for _, x := range rrs {
		if dns.IsDuplicate(x, rr) {
			return true
		}
	}
	return false
}

// suppressKnown drops the answers the querier already holds with at least
// half their TTL left (RFC 6762 7.1).
func suppressKnown(answer, known []dns.RR) []dns.RR {
	if len(known) == 0 {
		return answer
	}
	out := answer[:0:0]
	for _, rr := range answer {
		drop := false
		for _, k := range known {
			if k.Header().Ttl >= rr.Header().Ttl/2 && sameData(k, rr) {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, rr)
		}
	}
	return out
}

// sameData compares two records ignoring TTL and the cache-flush bit.
func sameData(a, b dns.RR) bool {
	ha, hb := *a.Header(), *b.Header()
	if ha.Rrtype != hb.Rrtype || ha.Class&^classFlush != hb.Class&^classFlush || lower(ha.Name) != lower(hb.Name) {
		return false
	}
	ca, cb := dns.Copy(a), dns.Copy(b)
	ca.Header().Ttl, cb.Header().Ttl = 0, 0
	ca.Header().Class, cb.Header().Class = dns.ClassINET, dns.ClassINET
	ca.Header().Name, cb.Header().Name = lower(ha.Name), lower(hb.Name)
	return dns.IsDuplicate(ca, cb)
}
