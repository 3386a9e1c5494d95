package lbservices

import (
	"context"
	"net/netip"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/plugintest"

	"github.com/miekg/dns"
)

const nextRcode = dns.RcodeRefused

func newHandler(t *testing.T, keys []string, corefile string) *LBServices {
	t.Helper()
	c := caddy.NewTestController("dns", corefile)
	c.ServerBlockKeys = keys
	l, err := parse(c)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	l.Next = test.NextHandler(nextRcode, nil)
	return l
}

func svc(ns, name, hostname string, addrs ...string) cluster.Service {
	s := cluster.Service{Namespace: ns, Name: name, Hostname: hostname}
	for _, a := range addrs {
		s.Addrs = append(s.Addrs, netip.MustParseAddr(a))
	}
	return s
}

const soa = "ocp4.example.com. 30 IN SOA ns.dns.ocp4.example.com. hostmaster.ocp4.example.com. 0 7200 1800 86400 30"

// theServices are sorted by namespace and name, as the watch hands them on.
var theServices = []cluster.Service{
	svc("payments", "api", "", "192.0.2.50"),
	svc("shop", "db", "", "192.0.2.51"),
	svc("shop", "web", "store.eu", "192.0.2.52", "2001:db8::52"),
	svc("shop", "web-v6", "", "2001:db8::53"),
	// Two Services sharing one address (different ports).
	svc("tcp", "dns-tcp", "", "192.0.2.54"),
	svc("tcp", "dns-udp", "", "192.0.2.54"),
}

func TestServeDNS(t *testing.T) {
	l := newHandler(t, []string{"ocp4.example.com."}, "lbservices {\n kubeconfig /dev/null\n}")
	l.publish(theServices)
	nx := func(name string) test.Case {
		return test.Case{Qname: name, Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}}
	}
	nodata := func(name string, qtype uint16) test.Case {
		return test.Case{Qname: name, Qtype: qtype, Ns: []dns.RR{test.SOA(soa)}}
	}
	cases := []struct {
		name string
		tc   test.Case
		next bool
	}{
		{name: "SERVICE.NAMESPACE A", tc: test.Case{Qname: "web.shop.lb.ocp4.example.com.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("web.shop.lb.ocp4.example.com. 30 IN A 192.0.2.52")}}},
		{name: "dual-stack AAAA", tc: test.Case{Qname: "web.shop.lb.ocp4.example.com.", Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA("web.shop.lb.ocp4.example.com. 30 IN AAAA 2001:db8::52")}}},
		{name: "ANY has both families", tc: test.Case{Qname: "web.shop.lb.ocp4.example.com.", Qtype: dns.TypeANY,
			Answer: []dns.RR{test.A("web.shop.lb.ocp4.example.com. 30 IN A 192.0.2.52"), test.AAAA("web.shop.lb.ocp4.example.com. 30 IN AAAA 2001:db8::52")}}},
		{name: "case kept", tc: test.Case{Qname: "WEB.Shop.LB.ocp4.example.com.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("WEB.Shop.LB.ocp4.example.com. 30 IN A 192.0.2.52")}}},
		{name: "IPv6-only Service: A is NODATA", tc: nodata("web-v6.shop.lb.ocp4.example.com.", dns.TypeA)},
		{name: "IPv6-only Service: AAAA", tc: test.Case{Qname: "web-v6.shop.lb.ocp4.example.com.", Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA("web-v6.shop.lb.ocp4.example.com. 30 IN AAAA 2001:db8::53")}}},
		{name: "other type is NODATA", tc: nodata("db.shop.lb.ocp4.example.com.", dns.TypeMX)},
		{name: "hostname annotation", tc: test.Case{Qname: "store.eu.lb.ocp4.example.com.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("store.eu.lb.ocp4.example.com. 30 IN A 192.0.2.52")}}},
		{name: "above a hostname is an empty non-terminal", tc: nodata("eu.lb.ocp4.example.com.", dns.TypeA)},
		{name: "a namespace is an empty non-terminal", tc: nodata("shop.lb.ocp4.example.com.", dns.TypeA)},
		{name: "the domain itself is NODATA", tc: nodata("lb.ocp4.example.com.", dns.TypeA)},
		{name: "unknown Service is NXDOMAIN", tc: nx("cart.shop.lb.ocp4.example.com.")},
		{name: "unknown namespace is NXDOMAIN", tc: nx("web.other.lb.ocp4.example.com.")},
		{name: "below a Service is NXDOMAIN", tc: nx("x.web.shop.lb.ocp4.example.com.")},
		{name: "escaped dot is one label: NXDOMAIN", tc: nx(`web\.shop.lb.ocp4.example.com.`)},
		{name: "look-alike of the domain is not ours", tc: test.Case{Qname: "web.shop.xlb.ocp4.example.com.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}}},
		{name: "apex SOA", tc: test.Case{Qname: "ocp4.example.com.", Qtype: dns.TypeSOA, Answer: []dns.RR{test.SOA(soa)}}},
		{name: "PTR of a Service address", tc: test.Case{Qname: "52.2.0.192.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("52.2.0.192.in-addr.arpa. 30 IN PTR web.shop.lb.ocp4.example.com.")}}},
		{name: "PTR of a shared address names both", tc: test.Case{Qname: "54.2.0.192.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("54.2.0.192.in-addr.arpa. 30 IN PTR dns-tcp.tcp.lb.ocp4.example.com."),
				test.PTR("54.2.0.192.in-addr.arpa. 30 IN PTR dns-udp.tcp.lb.ocp4.example.com.")}}},
		{name: "PTR of an unknown address goes on", tc: test.Case{Qname: "99.2.0.192.in-addr.arpa.", Qtype: dns.TypePTR}, next: true},
		{name: "outside the zone goes on", tc: test.Case{Qname: "web.shop.lb.example.org.", Qtype: dns.TypeA}, next: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := dnstest.NewRecorder(&test.ResponseWriter{})
			rc, err := l.ServeDNS(context.Background(), rec, c.tc.Msg())
			if err != nil {
				t.Fatalf("Expected no error, got %v", err)
			}
			if c.next {
				if rc != nextRcode || rec.Msg != nil {
					t.Fatalf("Expected the query to go to the next plugin, got rcode %d, reply %v", rc, rec.Msg)
				}
				return
			}
			if rec.Msg == nil {
				t.Fatalf("Expected a reply, got none (rcode %d)", rc)
			}
			if !rec.Msg.Authoritative {
				t.Errorf("Expected AA, got %v", rec.Msg)
			}
			for _, rr := range append(rec.Msg.Answer, rec.Msg.Ns...) {
				if s, ok := rr.(*dns.SOA); ok {
					s.Serial = 0
				}
			}
			if err := test.SortAndCheck(rec.Msg, c.tc); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestNotReady: before the first Service list a name below the domain may
// exist; SERVFAIL, not an NXDOMAIN a resolver would cache.
func TestNotReady(t *testing.T) {
	l := newHandler(t, []string{"ocp4.example.com."}, "lbservices {\n kubeconfig /dev/null\n}")
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	rc, err := l.ServeDNS(context.Background(), rec, test.Case{Qname: "web.shop.lb.ocp4.example.com.", Qtype: dns.TypeA}.Msg())
	if err != nil || rc != dns.RcodeServerFailure || rec.Msg != nil {
		t.Fatalf("Expected SERVFAIL written by the server before the first list, got rc %d, %v, %v", rc, rec.Msg, err)
	}
	l.publish(nil)
	rec = dnstest.NewRecorder(&test.ResponseWriter{})
	if _, err := l.ServeDNS(context.Background(), rec, test.Case{Qname: "web.shop.lb.ocp4.example.com.", Qtype: dns.TypeA}.Msg()); err != nil {
		t.Fatal(err)
	}
	if rec.Msg == nil || rec.Msg.Rcode != dns.RcodeNameError {
		t.Fatalf("Expected NXDOMAIN once an empty list is served, got %v", rec.Msg)
	}
}

// TestMultiLabelDomain: with label lb.int the labels between the zone and
// the domain are empty non-terminals, and names beside them are a later
// member's (or NXDOMAIN).
func TestMultiLabelDomain(t *testing.T) {
	l := newHandler(t, []string{"ocp4.example.com."}, "lbservices {\n kubeconfig /dev/null\n label lb.int\n}")
	l.publish(theServices)
	for _, c := range []struct {
		name   string
		rcode  int
		answer int
	}{
		{"web.shop.lb.int.ocp4.example.com.", dns.RcodeSuccess, 1},
		{"int.ocp4.example.com.", dns.RcodeSuccess, 0},
		{"lb.int.ocp4.example.com.", dns.RcodeSuccess, 0},
		{"web.shop.lb.ocp4.example.com.", dns.RcodeNameError, 0},
	} {
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		if _, err := l.ServeDNS(context.Background(), rec, test.Case{Qname: c.name, Qtype: dns.TypeA}.Msg()); err != nil {
			t.Fatal(err)
		}
		if rec.Msg == nil || rec.Msg.Rcode != c.rcode || len(rec.Msg.Answer) != c.answer {
			t.Errorf("%s: expected rcode %d with %d answers, got %v", c.name, c.rcode, c.answer, rec.Msg)
		}
	}
}

// TestConformance: the answers issue 26 holds every plugin to, for the
// names lbservices owns.
func TestConformance(t *testing.T) {
	l := newHandler(t, []string{"."}, "lbservices {\n zone ocp4.example.com\n kubeconfig /dev/null\n}")
	l.Next = test.NextHandler(plugintest.PassedRcode, nil)
	l.publish(theServices)
	q := func(name string, qtype uint16) test.Case { return test.Case{Qname: name, Qtype: qtype} }
	plugintest.Run(t, l, []plugintest.Case{
		{Name: "CH is REFUSED", TC: q("web.shop.lb.ocp4.example.com.", dns.TypeA), Mod: plugintest.Class(dns.ClassCHAOS), Server: dns.RcodeRefused},
		{Name: "CH apex is REFUSED, lbservices alone in the block", TC: q("ocp4.example.com.", dns.TypeSOA), Mod: plugintest.Class(dns.ClassCHAOS), Server: dns.RcodeRefused},
		{Name: "AXFR of the zone is REFUSED", TC: q("ocp4.example.com.", dns.TypeAXFR), Server: dns.RcodeRefused},
		{Name: "AXFR of the domain is REFUSED", TC: q("lb.ocp4.example.com.", dns.TypeAXFR), Server: dns.RcodeRefused},
		{Name: "NOTIFY is NOTIMP", TC: q("web.shop.lb.ocp4.example.com.", dns.TypeSOA), Mod: func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }, Server: dns.RcodeNotImplemented},
		{Name: "two OPT records", TC: q("web.shop.lb.ocp4.example.com.", dns.TypeA), Mod: func(m *dns.Msg) {
			m.Extra = []dns.RR{plugintest.Opt("."), plugintest.Opt(".")}
		}, Server: dns.RcodeFormatError},
		{Name: "outside the zone goes on", TC: q("web.shop.lb.example.org.", dns.TypeA), Next: true},
	})
}

func TestIndexHostnames(t *testing.T) {
	cases := []struct {
		name    string
		svcs    []cluster.Service
		served  map[string]string // relative name → first address
		refused []cluster.HostnameRefusal
	}{
		{
			name:   "a hostname beside the standard name",
			svcs:   []cluster.Service{svc("shop", "web", "store", "192.0.2.1")},
			served: map[string]string{"web.shop": "192.0.2.1", "store": "192.0.2.1"},
		},
		{
			name:   "a hostname below its own namespace",
			svcs:   []cluster.Service{svc("shop", "web", "www.shop", "192.0.2.1")},
			served: map[string]string{"web.shop": "192.0.2.1", "www.shop": "192.0.2.1"},
		},
		{
			name:    "another namespace's SERVICE.NAMESPACE name",
			svcs:    []cluster.Service{svc("bank", "db", "", "192.0.2.1"), svc("shop", "web", "db.bank", "192.0.2.2")},
			served:  map[string]string{"db.bank": "192.0.2.1", "web.shop": "192.0.2.2"},
			refused: []cluster.HostnameRefusal{{Service: "shop/web", Hostname: "db.bank", Reason: "it is a SERVICE.NAMESPACE name"}},
		},
		{
			name:    "below another namespace, not its Service's name",
			svcs:    []cluster.Service{svc("bank", "db", "", "192.0.2.1"), svc("shop", "web", "www.bank", "192.0.2.2")},
			served:  map[string]string{"db.bank": "192.0.2.1", "web.shop": "192.0.2.2"},
			refused: []cluster.HostnameRefusal{{Service: "shop/web", Hostname: "www.bank", Reason: "it is below namespace bank"}},
		},
		{
			name:    "another namespace's label itself",
			svcs:    []cluster.Service{svc("bank", "db", "", "192.0.2.1"), svc("shop", "web", "bank", "192.0.2.2")},
			served:  map[string]string{"db.bank": "192.0.2.1", "web.shop": "192.0.2.2"},
			refused: []cluster.HostnameRefusal{{Service: "shop/web", Hostname: "bank", Reason: "it is below namespace bank"}},
		},
		{
			name:    "the first Service by namespace/name keeps a hostname",
			svcs:    []cluster.Service{svc("a", "one", "www", "192.0.2.1"), svc("b", "two", "www", "192.0.2.2")},
			served:  map[string]string{"one.a": "192.0.2.1", "two.b": "192.0.2.2", "www": "192.0.2.1"},
			refused: []cluster.HostnameRefusal{{Service: "b/two", Hostname: "www", Reason: "Service a/one has it"}},
		},
		{
			name:    "a SERVICE.NAMESPACE name of the same namespace is refused",
			svcs:    []cluster.Service{svc("shop", "db", "", "192.0.2.1"), svc("shop", "web", "db.shop", "192.0.2.2")},
			served:  map[string]string{"db.shop": "192.0.2.1", "web.shop": "192.0.2.2"},
			refused: []cluster.HostnameRefusal{{Service: "shop/web", Hostname: "db.shop", Reason: "it is a SERVICE.NAMESPACE name"}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ix := buildIndex(c.svcs, []string{"lb.ocp4.example.com."})
			if len(ix.names) != len(c.served) {
				t.Errorf("served %d names, want %d: %v", len(ix.names), len(c.served), ix.names)
			}
			for rel, addr := range c.served {
				set, ok := ix.lookup(rel)
				if !ok || set.Addrs()[0] != netip.MustParseAddr(addr) {
					t.Errorf("%s: got %v (%v), want %s", rel, set.Addrs(), ok, addr)
				}
			}
			if len(ix.refused) != len(c.refused) {
				t.Fatalf("refused %v, want %v", ix.refused, c.refused)
			}
			for i := range c.refused {
				if ix.refused[i] != c.refused[i] {
					t.Errorf("refused %v, want %v", ix.refused[i], c.refused[i])
				}
			}
		})
	}
}
