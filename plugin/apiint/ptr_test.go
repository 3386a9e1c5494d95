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
