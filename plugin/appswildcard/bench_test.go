package appswildcard

import (
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"

	"github.com/infradns/infradns/internal/plugintest"

	"github.com/miekg/dns"
)

// BenchmarkServeDNS compares appswildcard with the cheapest handler that could
// serve the same names: one map lookup returning pre-built records (of the exact
// names asked), no SOA. Both write through packWriter, which packs the reply as
// the server would, so the SOA our negative answers carry is paid for too.
// make bench measures the same pair end to end with dnsperf.
func BenchmarkServeDNS(b *testing.B) {
	c := caddy.NewTestController("dns", "appswildcard 192.0.2.10 2001:db8::10 {\n zone ocp4.example.com\n}")
	c.ServerBlockKeys = []string{"."}
	a, err := parse(c)
	if err != nil {
		b.Fatal(err)
	}
	const app = "console-openshift-console.apps.ocp4.example.com."
	handlers := []plugin.Handler{a, plugintest.NewMapHandler("ocp4.example.com.", map[string][2]string{
		app: {"192.0.2.10", "2001:db8::10"},
	})}
	queries := []struct {
		name  string
		qname string
		qtype uint16
		rcode int
	}{
		{"apps-A", app, dns.TypeA, dns.RcodeSuccess},
		{"apps-AAAA", app, dns.TypeAAAA, dns.RcodeSuccess},
		{"nxdomain", "nosuch.ocp4.example.com.", dns.TypeA, dns.RcodeNameError},
	}
	for _, q := range queries {
		for _, h := range handlers {
			b.Run(q.name+"/"+h.Name(), func(b *testing.B) {
				plugintest.Serve(b, h, q.qname, q.qtype, q.rcode)
			})
		}
	}
	// PTR of a VIP: one map lookup too; the map handler serves no PTR.
	b.Run("ptr/appswildcard", func(b *testing.B) {
		plugintest.Serve(b, a, "10.2.0.192.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess)
	})
}
