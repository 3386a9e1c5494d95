package lbservices

import (
	"fmt"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/plugintest"

	"github.com/miekg/dns"
)

// BenchmarkServeDNS compares lbservices, holding 1,000 Services, with the
// cheapest handler that could serve the same name: one map lookup returning
// pre-built records, no SOA. Both write through packWriter, which packs the
// reply as the server would.
func BenchmarkServeDNS(b *testing.B) {
	c := caddy.NewTestController("dns", "lbservices {\n zone ocp4.example.com\n kubeconfig /dev/null\n}")
	c.ServerBlockKeys = []string{"."}
	l, err := parse(c)
	if err != nil {
		b.Fatal(err)
	}
	var svcs []cluster.Service
	for i := range 1000 {
		svcs = append(svcs, svc(fmt.Sprintf("ns-%03d", i/10), fmt.Sprintf("svc-%d", i), "",
			fmt.Sprintf("192.0.%d.%d", 2+i/250, 1+i%250), fmt.Sprintf("2001:db8::%x", i+1)))
	}
	l.publish(svcs)
	const name = "svc-517.ns-051.lb.ocp4.example.com."
	handlers := []plugin.Handler{l, plugintest.NewMapHandler("ocp4.example.com.", map[string][2]string{
		name: {"192.0.4.18", "2001:db8::206"},
	})}
	queries := []struct {
		name  string
		qname string
		qtype uint16
		rcode int
	}{
		{"service-A", name, dns.TypeA, dns.RcodeSuccess},
		{"service-AAAA", name, dns.TypeAAAA, dns.RcodeSuccess},
		{"nxdomain", "nosuch.ns-051.lb.ocp4.example.com.", dns.TypeA, dns.RcodeNameError},
	}
	for _, q := range queries {
		for _, h := range handlers {
			b.Run(q.name+"/"+h.Name(), func(b *testing.B) {
				plugintest.Serve(b, h, q.qname, q.qtype, q.rcode)
			})
		}
	}
	b.Run("ptr/lbservices", func(b *testing.B) {
		plugintest.Serve(b, l, "18.4.0.192.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess)
	})
}

// BenchmarkBuildIndex is the cost of one change to the Services (any of
// them): the whole index is rebuilt, for 1,000 Services of type
// LoadBalancer, a tenth with a hostname.
func BenchmarkBuildIndex(b *testing.B) {
	var svcs []cluster.Service
	for i := range 1000 {
		h := ""
		if i%10 == 0 {
			h = fmt.Sprintf("www-%d.ns-%03d", i, i/10)
		}
		svcs = append(svcs, svc(fmt.Sprintf("ns-%03d", i/10), fmt.Sprintf("svc-%d", i), h,
			fmt.Sprintf("192.0.%d.%d", 2+i/250, 1+i%250), fmt.Sprintf("2001:db8::%x", i+1)))
	}
	domains := []string{"lb.ocp4.example.com."}
	b.ReportAllocs()
	for b.Loop() {
		buildIndex(svcs, domains)
	}
}
