package authority

import "github.com/miekg/dns"

// The results of Screen, beside NotImplemented.
const (
	// Refused: a class other than IN, or a zone transfer (AXFR, IXFR),
	// for an owned zone. Our zones exist in class IN only, and we do not
	// transfer them: REFUSED, as BIND and Knot answer.
	Refused Result = "refused"
	// FormErr: a query that is not well formed (RFC 1035 4.1.1; RFC 6891
	// 6.1.1 for the OPT record): it is never answered with records.
	FormErr Result = "formerr"
)

// Screen decides, before any lookup, the queries for an owned zone that the
// zone's data must not answer. It returns the rcode to leave to the server
// (which writes the reply and echoes the query's OPT record) and the result
// for the metrics, or (RcodeSuccess, "") when the query is an ordinary
// question the member goes on to answer. It is pure and allocation-free.
//
// In order: a malformed query is FORMERR: a question cut before its class
// (miekg/dns unpacks it as CLASS0), more than one OPT record, or an OPT
// whose owner is not the root. An opcode other than QUERY is NOTIMP. A class
// other than IN is REFUSED: with forward in the chain CoreDNS lets every
// class through to the plugins, which would otherwise answer with IN data.
// AXFR and IXFR are REFUSED: the zone is not transferred.
func Screen(r *dns.Msg, q Query) (int, Result) {
	if r.Opcode == dns.OpcodeQuery && q.Class == dns.ClassINET && q.Type != dns.TypeAXFR && q.Type != dns.TypeIXFR && plainExtra(r.Extra) {
		return dns.RcodeSuccess, ""
	}
	return screen(r, q)
}

// plainExtra reports whether extra is empty or is one OPT record of the root:
// the additional section of nearly every query.
func plainExtra(extra []dns.RR) bool {
	if len(extra) == 0 {
		return true
	}
	if len(extra) > 1 {
		return false
	}
	opt, ok := extra[0].(*dns.OPT)
	return ok && opt.Hdr.Name == "."
}

func screen(r *dns.Msg, q Query) (int, Result) {
	if q.Class == 0 || !wellFormedOPT(r.Extra) {
		return dns.RcodeFormatError, FormErr
	}
	if r.Opcode != dns.OpcodeQuery {
		return dns.RcodeNotImplemented, NotImplemented
	}
	if q.Class != dns.ClassINET || q.Type == dns.TypeAXFR || q.Type == dns.TypeIXFR {
		return dns.RcodeRefused, Refused
	}
	return dns.RcodeSuccess, ""
}

// wellFormedOPT reports whether extra has at most one OPT record, owned by
// the root (RFC 6891 6.1.1).
func wellFormedOPT(extra []dns.RR) bool {
	n := 0
	for _, rr := range extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			continue
		}
		n++
		if n > 1 || rr.Header().Name != "." {
			return false
		}
	}
	return true
}
