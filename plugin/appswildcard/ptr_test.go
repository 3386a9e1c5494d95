package appswildcard

import (
	"testing"

	"github.com/coredns/coredns/plugin/test"

	"github.com/infradns/infradns/internal/plugintest"

	"github.com/miekg/dns"
)

func TestPTR(t *testing.T) {
	a := newHandler(t, []string{"."}, `
		appswildcard 192.0.2.10 2001:db8::10 {
			zone ocp4.example.com
		}`)
	a.Next = test.NextHandler(plugintest.PassedRcode, nil)
	const v6 = "0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa."
	plugintest.Run(t, a, []plugintest.Case{
		{Name: "ingress VIP IPv4", TC: test.Case{Qname: "10.2.0.192.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("10.2.0.192.in-addr.arpa. 30 IN PTR ingress.apps.ocp4.example.com.")}}},
		{Name: "ingress VIP IPv6", TC: test.Case{Qname: v6, Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR(v6 + " 30 IN PTR ingress.apps.ocp4.example.com.")}}},
		// The PTR target resolves back to the VIP (forward-confirmed).
		{Name: "the PTR target answers the VIP", TC: test.Case{Qname: "ingress.apps.ocp4.example.com.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("ingress.apps.ocp4.example.com. 30 IN A 192.0.2.10")}}},
		{Name: "unknown address goes on", TC: test.Case{Qname: "11.2.0.192.in-addr.arpa.", Qtype: dns.TypePTR}, Next: true},
	})
}
