// Package records builds the A/AAAA answers of the infradns plugins from a fixed
// address set. It does no I/O.
package records

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/miekg/dns"
)

// Set is the addresses one name answers with, split by family.
type Set struct {
	V4 []net.IP
	V6 []net.IP
}

// ParseSet parses addresses, IPv4 and IPv6 mixed, in the order given. It rejects
// anything that is not a plain unicast address and any duplicate.
func ParseSet(args []string) (Set, error) {
	var s Set
	seen := make(map[netip.Addr]bool, len(args))
	for _, a := range args {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return Set{}, fmt.Errorf("invalid address %q", a)
		}
		if ip.Zone() != "" {
			return Set{}, fmt.Errorf("invalid address %q: zoned addresses are not allowed", a)
		}
		ip = ip.Unmap()
		if ip.IsUnspecified() || ip.IsMulticast() {
			return Set{}, fmt.Errorf("invalid address %q: not a unicast address", a)
		}
		if seen[ip] {
			return Set{}, fmt.Errorf("duplicate address %q", a)
		}
		seen[ip] = true
		if ip.Is4() {
			s.V4 = append(s.V4, net.IP(ip.AsSlice()))
		} else {
			s.V6 = append(s.V6, net.IP(ip.AsSlice()))
		}
	}
	return s, nil
}

// SetOf builds the set of the usable addresses in as, sorted per family and
// each once: what a node announced or lists. Zoned, unspecified and
// multicast addresses are dropped, not errors: they come from the network
// or the API, not from a Corefile.
func SetOf(as []netip.Addr) Set {
	var v4, v6 []netip.Addr
	for _, a := range as {
		a = a.Unmap()
		if !a.IsValid() || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() {
			continue
		}
		if a.Is4() {
			v4 = append(v4, a)
		} else {
			v6 = append(v6, a)
		}
	}
	var s Set
	for _, fam := range []struct {
		in  []netip.Addr
		out *[]net.IP
	}{{v4, &s.V4}, {v6, &s.V6}} {
		slices.SortFunc(fam.in, netip.Addr.Compare)
		for _, a := range slices.Compact(fam.in) {
			*fam.out = append(*fam.out, net.IP(a.AsSlice()))
		}
	}
	return s
}

// Empty reports whether the set has no address.
func (s Set) Empty() bool { return len(s.V4) == 0 && len(s.V6) == 0 }

// Addrs returns the addresses of the set, IPv4 first, in the set's order.
func (s Set) Addrs() []netip.Addr {
	out := make([]netip.Addr, 0, len(s.V4)+len(s.V6))
	for _, ip := range append(slices.Clip(s.V4), s.V6...) {
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// RRs returns the records of qtype for owner. Other types get none: the name
// exists, so the caller answers NODATA. ANY gets both families' records
// (RFC 8482: a name with data never answers ANY with NODATA). The records
// are fresh (later plugins may rewrite them in place) but come from one or
// two allocations, not one per record: this is the answer path of every query.
func (s Set) RRs(owner string, qtype uint16, ttl uint32) []dns.RR {
	switch qtype {
	case dns.TypeANY:
		return s.anyRRs(owner, ttl)
	case dns.TypeA:
		switch len(s.V4) {
		case 0:
			return nil
		case 1:
			one := &oneA{rr: dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: s.V4[0]}}
			one.s[0] = &one.rr
			return one.s[:]
		}
		recs := make([]dns.A, len(s.V4))
		rrs := make([]dns.RR, len(s.V4))
		for i, ip := range s.V4 {
			recs[i] = dns.A{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: ip}
			rrs[i] = &recs[i]
		}
		return rrs
	case dns.TypeAAAA:
		switch len(s.V6) {
		case 0:
			return nil
		case 1:
			one := &oneAAAA{rr: dns.AAAA{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: s.V6[0]}}
			one.s[0] = &one.rr
			return one.s[:]
		}
		recs := make([]dns.AAAA, len(s.V6))
		rrs := make([]dns.RR, len(s.V6))
		for i, ip := range s.V6 {
			recs[i] = dns.AAAA{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: ip}
			rrs[i] = &recs[i]
		}
		return rrs
	}
	return nil
}

// oneA and oneAAAA hold a single-record answer and its slice in one allocation.
type oneA struct {
	rr dns.A
	s  [1]dns.RR
}

type oneAAAA struct {
	rr dns.AAAA
	s  [1]dns.RR
}

// anyRRs returns every record of the set, A first. ANY is rare: it is kept
// out of the A/AAAA paths.
func (s Set) anyRRs(owner string, ttl uint32) []dns.RR {
	n := len(s.V4) + len(s.V6)
	if n == 0 {
		return nil
	}
	rrs := make([]dns.RR, 0, n)
	rrs = append(rrs, s.RRs(owner, dns.TypeA, ttl)...)
	return append(rrs, s.RRs(owner, dns.TypeAAAA, ttl)...)
}
