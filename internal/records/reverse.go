package records

import (
	"net"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// Reverse maps the reverse names of addresses (in-addr.arpa. for IPv4,
// ip6.arpa. nibbles for IPv6; lower case) to the names that hold them: what
// PTR queries are answered from. Build it once with Add and Sort, then only
// read it: the plugins swap whole maps.
type Reverse map[string][]string

// Add records that every address of s belongs to name (lower case, fully
// qualified).
func (r Reverse) Add(s Set, name string) {
	for _, ip := range append(slices.Clip(s.V4), s.V6...) {
		r.AddIP(ip, name)
	}
}

// AddIP records that ip belongs to name, once.
func (r Reverse) AddIP(ip net.IP, name string) {
	rev, err := dns.ReverseAddr(ip.String())
	if err != nil {
		return
	}
	if !slices.Contains(r[rev], name) {
		r[rev] = append(r[rev], name)
	}
}

// Sort orders the names of every address, so answers do not depend on the
// order the addresses were added in.
func (r Reverse) Sort() {
	for _, names := range r {
		slices.Sort(names)
	}
}

// IsReverse reports whether name (lower case, fully qualified) is in
// in-addr.arpa. or ip6.arpa.: the only names a Reverse can hold.
func IsReverse(name string) bool {
	return strings.HasSuffix(name, ".in-addr.arpa.") || strings.HasSuffix(name, ".ip6.arpa.")
}

// PTRs returns the PTR records of owner pointing at names.
func PTRs(owner string, names []string, ttl uint32) []dns.RR {
	if len(names) == 1 {
		one := &onePTR{rr: dns.PTR{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ttl}, Ptr: names[0]}}
		one.s[0] = &one.rr
		return one.s[:]
	}
	recs := make([]dns.PTR, len(names))
	rrs := make([]dns.RR, len(names))
	for i, n := range names {
		recs[i] = dns.PTR{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ttl}, Ptr: n}
		rrs[i] = &recs[i]
	}
	return rrs
}

type onePTR struct {
	rr dns.PTR
	s  [1]dns.RR
}

// HasBelow reports whether r holds a reverse name strictly below name (lower
// case, fully qualified): name is then an empty non-terminal of a reverse
// zone. It walks the whole map, unless name is a whole address (4 labels
// under in-addr.arpa., 32 under ip6.arpa.): r's names are all whole
// addresses, so none lies below one. That is the common miss, an address
// nobody serves, which paid a walk of every node's address (1,000 for 500
// dual-stack nodes) per query.
func (r Reverse) HasBelow(name string) bool {
	if wholeAddress(name) {
		return false
	}
	for rev := range r {
		if len(rev) > len(name) && strings.HasSuffix(rev, name) && rev[len(rev)-len(name)-1] == '.' {
			return true
		}
	}
	return false
}

// wholeAddress reports whether name has at least the labels of an address's
// reverse name.
func wholeAddress(name string) bool {
	switch {
	case strings.HasSuffix(name, ".in-addr.arpa."):
		return dns.CountLabel(name) >= 4+2
	case strings.HasSuffix(name, ".ip6.arpa."):
		return dns.CountLabel(name) >= 32+2
	}
	return false
}
