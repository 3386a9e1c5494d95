package apiint

import (
	"testing"

	"github.com/coredns/coredns/plugin/test"

	"github.com/infradns/infradns/internal/plugintest"

	"github.com/miekg/dns"
)

func TestPTR(t *testing.T) {
	a := newHandler(t, []string{"ocp4.example.com."}, `apiint 192.0.2.5 2001:db8::5 {
		api 192.0.2.5 198.51.100.7
	}`)
	a.Next = test.NextHandler(plugintest.PassedRcode, nil)
	const v6 = "5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa."
	q := func(name string, qtype uint16) test.Case { return test.Case{Qname: name, Qtype: qtype} }
	plugintest.Run(t, a, []plugintest.Case{
		{Name: "API VIP IPv4", TC: test.Case{Qname: "5.2.0.192.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("5.2.0.192.in-addr.arpa. 30 IN PTR api-int.ocp4.example.com.")}}},
		{Name: "API VIP IPv6, nibbles", TC: test.Case{Qname: v6, Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR(v6 + " 30 IN PTR api-int.ocp4.example.com.")}}},
		{Name: "case kept", TC: test.Case{Qname: "5.2.0.192.IN-ADDR.ARPA.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("5.2.0.192.IN-ADDR.ARPA. 30 IN PTR api-int.ocp4.example.com.")}}},
		{Name: "an address only api has", TC: test.Case{Qname: "7.100.51.198.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("7.100.51.198.in-addr.arpa. 30 IN PTR api.ocp4.example.com.")}}},
		{Name: "ANY", TC: test.Case{Qname: "5.2.0.192.in-addr.arpa.", Qtype: dns.TypeANY,
			Answer: []dns.RR{test.PTR("5.2.0.192.in-addr.arpa. 30 IN PTR api-int.ocp4.example.com.")}}},
		{Name: "other type of a known address is NODATA", TC: q("5.2.0.192.in-addr.arpa.", dns.TypeA)},
		{Name: "unknown address goes on", TC: q("6.2.0.192.in-addr.arpa.", dns.TypePTR), Next: true},
		{Name: "reverse zone goes on", TC: q("2.0.192.in-addr.arpa.", dns.TypePTR), Next: true},
		{Name: "CH of a known address is REFUSED", TC: q("5.2.0.192.in-addr.arpa.", dns.TypePTR), Mod: plugintest.Class(dns.ClassCHAOS), Server: dns.RcodeRefused},
	})
}

// TestPTRReverseZones: with the reverse option the cluster's reverse zones
// are answered like the forward zone: NXDOMAIN and NODATA with the reverse
// zone's SOA; names outside them still go on (issue 26).
func TestPTRReverseZones(t *testing.T) {
	a := newHandler(t, []string{"ocp4.example.com."}, `apiint 192.0.2.5 2001:db8::5 {
		api 192.0.2.5 198.51.100.7
		reverse 192.0.2.0/24 2001:db8::/32
	}`)
	a.Next = test.NextHandler(plugintest.PassedRcode, nil)
	const (
		v6    = "5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa."
		rev4  = "2.0.192.in-addr.arpa."
		rev6  = "8.b.d.0.1.0.0.2.ip6.arpa."
		soa4  = rev4 + " 30 IN SOA ns.dns.ocp4.example.com. hostmaster.ocp4.example.com. 0 7200 1800 86400 30"
		soa6  = rev6 + " 30 IN SOA ns.dns.ocp4.example.com. hostmaster.ocp4.example.com. 0 7200 1800 86400 30"
		nxdom = dns.RcodeNameError
	)
	q := func(name string, qtype uint16) test.Case { return test.Case{Qname: name, Qtype: qtype} }
	ns4 := []dns.RR{test.SOA(soa4)}
	plugintest.Run(t, a, []plugintest.Case{
		{Name: "API VIP", TC: test.Case{Qname: "5.2.0.192.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("5.2.0.192.in-addr.arpa. 30 IN PTR api-int.ocp4.example.com.")}}},
		{Name: "API VIP IPv6", TC: test.Case{Qname: v6, Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR(v6 + " 30 IN PTR api-int.ocp4.example.com.")}}},
		{Name: "other type of a known address is NODATA with the SOA", TC: test.Case{Qname: "5.2.0.192.in-addr.arpa.", Qtype: dns.TypeA, Ns: ns4}},
		{Name: "unknown address in the CIDR is NXDOMAIN", TC: test.Case{Qname: "6.2.0.192.in-addr.arpa.", Qtype: dns.TypePTR, Rcode: nxdom, Ns: ns4}},
		{Name: "below an address is NXDOMAIN", TC: test.Case{Qname: "x.5.2.0.192.in-addr.arpa.", Qtype: dns.TypePTR, Rcode: nxdom, Ns: ns4}},
		{Name: "case kept", TC: test.Case{Qname: "6.2.0.192.IN-ADDR.ARPA.", Qtype: dns.TypePTR, Rcode: nxdom, Ns: ns4}},
		{Name: "unknown IPv6 address is NXDOMAIN", TC: test.Case{Qname: "6" + v6[1:], Qtype: dns.TypePTR, Rcode: nxdom, Ns: []dns.RR{test.SOA(soa6)}}},
		{Name: "empty non-terminal above an IPv6 address is NODATA", TC: test.Case{Qname: v6[2:], Qtype: dns.TypePTR, Ns: []dns.RR{test.SOA(soa6)}}},
		{Name: "apex SOA", TC: test.Case{Qname: rev4, Qtype: dns.TypeSOA, Answer: []dns.RR{test.SOA(soa4)}}},
		{Name: "apex NS", TC: test.Case{Qname: rev6, Qtype: dns.TypeNS,
			Answer: []dns.RR{test.NS(rev6 + " 30 IN NS ns.dns.ocp4.example.com.")}}},
		{Name: "apex PTR is NODATA", TC: test.Case{Qname: rev4, Qtype: dns.TypePTR, Ns: ns4}},
		{Name: "an address outside the CIDRs still answers", TC: test.Case{Qname: "7.100.51.198.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("7.100.51.198.in-addr.arpa. 30 IN PTR api.ocp4.example.com.")}}},
		{Name: "unknown address outside the CIDRs goes on", TC: q("8.100.51.198.in-addr.arpa.", dns.TypePTR), Next: true},
		{Name: "the parent of a reverse zone goes on", TC: q("0.192.in-addr.arpa.", dns.TypePTR), Next: true},
		{Name: "CH in a reverse zone is REFUSED", TC: q("6.2.0.192.in-addr.arpa.", dns.TypePTR), Mod: plugintest.Class(dns.ClassCHAOS), Server: dns.RcodeRefused},
		{Name: "AXFR of a reverse zone is REFUSED", TC: q(rev4, dns.TypeAXFR), Server: dns.RcodeRefused},
	})
}
