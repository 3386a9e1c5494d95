package authority

import (
	"github.com/infradns/infradns/internal/records"

	"github.com/miekg/dns"
)

// ServeReverse answers a reverse name (in-addr.arpa., ip6.arpa.) of an
// address the member serves: PTR and ANY with the names that hold it, any
// other type NODATA. The member is not the reverse zone's authority, so no
// SOA goes with it (as the hosts plugin answers). ok is false when rev does
// not hold the name: the member passes it on unchanged, and never answers
// NXDOMAIN for an address it does not know. Call it only when the name is
// outside the member's zones.
//
//go:noinline
func ServeReverse(w dns.ResponseWriter, r *dns.Msg, q Query, rev records.Reverse, ttl uint32) (ok bool, rc int, res Result) {
	names, found := rev[q.Name]
	if !found {
		return false, 0, ""
	}
	if rc, res := Screen(r, q); res != "" {
		return true, rc, res
	}
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if q.Type == dns.TypePTR || q.Type == dns.TypeANY {
		m.Answer = records.PTRs(q.QName, names, ttl)
	}
	w.WriteMsg(m)
	return true, dns.RcodeSuccess, resultOf(m)
}
