package appswildcard

import (
	"context"
	"slices"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
)

const nextRcode = dns.RcodeRefused

func newHandler(t *testing.T, keys []string, corefile string) *AppsWildcard {
	t.Helper()
	c := caddy.NewTestController("dns", corefile)
	c.ServerBlockKeys = keys
	a, err := parse(c)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	a.Next = test.NextHandler(nextRcode, nil)
	return a
}

const (
	soa    = "ocp4.example.com. 5 IN SOA ns.dns.ocp4.example.com. hostmaster.ocp4.example.com. 0 7200 1800 86400 5"
	soaNet = "example.net. 5 IN SOA ns.dns.example.net. hostmaster.example.net. 0 7200 1800 86400 5"
)

func TestServeDNS(t *testing.T) {
	a := newHandler(t, []string{"."}, `
		appswildcard 192.0.2.10 2001:db8::10 {
			zone ocp4.example.com
		}
		appswildcard 192.0.2.20 {
			zone ocp4.example.com
			label shard1.apps
			ttl 5
		}
		appswildcard 192.0.2.30 192.0.2.31 {
			zone example.net
			label apps
		}`)
	cases := []struct {
		name string
		tc   test.Case
		next bool
	}{
		{name: "one label below apps", tc: test.Case{Qname: "console.apps.ocp4.example.com.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("console.apps.ocp4.example.com. 30 IN A 192.0.2.10")}}},
		{name: "any depth below apps", tc: test.Case{Qname: "a.b.c.apps.ocp4.example.com.", Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA("a.b.c.apps.ocp4.example.com. 30 IN AAAA 2001:db8::10")}}},
		{name: "case kept", tc: test.Case{Qname: "Console-OpenShift.APPS.ocp4.Example.com.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("Console-OpenShift.APPS.ocp4.Example.com. 30 IN A 192.0.2.10")}}},
		{name: "literal star label", tc: test.Case{Qname: "*.apps.ocp4.example.com.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("*.apps.ocp4.example.com. 30 IN A 192.0.2.10")}}},
		{name: "apps itself is an empty non-terminal", tc: test.Case{Qname: "apps.ocp4.example.com.", Qtype: dns.TypeA,
			Ns: []dns.RR{test.SOA(soa)}}},
		{name: "other type is NODATA", tc: test.Case{Qname: "x.apps.ocp4.example.com.", Qtype: dns.TypeMX,
			Ns: []dns.RR{test.SOA(soa)}}},
		{name: "nested shard wins", tc: test.Case{Qname: "x.shard1.apps.ocp4.example.com.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("x.shard1.apps.ocp4.example.com. 5 IN A 192.0.2.20")}}},
		{name: "shard AAAA with only v4 is NODATA", tc: test.Case{Qname: "x.shard1.apps.ocp4.example.com.", Qtype: dns.TypeAAAA,
			Ns: []dns.RR{test.SOA(soa)}}},
		{name: "shard domain itself stops the outer wildcard", tc: test.Case{Qname: "shard1.apps.ocp4.example.com.", Qtype: dns.TypeA,
			Ns: []dns.RR{test.SOA(soa)}}},
		{name: "appsDomain in another zone", tc: test.Case{Qname: "shop.apps.example.net.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("shop.apps.example.net. 30 IN A 192.0.2.30"), test.A("shop.apps.example.net. 30 IN A 192.0.2.31")}}},
		{name: "xapps look-alike is NXDOMAIN", tc: test.Case{Qname: "a.xapps.ocp4.example.com.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}}},
		{name: "api is not ours and we are last: NXDOMAIN", tc: test.Case{Qname: "api.ocp4.example.com.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}}},
		{name: "NXDOMAIN in the other zone carries its SOA", tc: test.Case{Qname: "www.example.net.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soaNet)}}},
		{name: "apex SOA of the other zone", tc: test.Case{Qname: "example.net.", Qtype: dns.TypeSOA,
			Answer: []dns.RR{test.SOA(soaNet)}}},
		{name: "outside every zone goes on", tc: test.Case{Qname: "apps.example.org.", Qtype: dns.TypeA}, next: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := dnstest.NewRecorder(&test.ResponseWriter{})
			rc, err := a.ServeDNS(context.Background(), rec, c.tc.Msg())
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
			if !rec.Msg.Authoritative || rec.Msg.RecursionAvailable {
				t.Errorf("Expected AA and no RA, got aa=%v ra=%v", rec.Msg.Authoritative, rec.Msg.RecursionAvailable)
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

func TestEmptyNonTerminalsAboveMultiLabel(t *testing.T) {
	a := newHandler(t, []string{"example.com."}, "appswildcard 192.0.2.10 {\n label apps.ocp4\n}")
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	if _, err := a.ServeDNS(context.Background(), rec, test.Case{Qname: "ocp4.example.com.", Qtype: dns.TypeA}.Msg()); err != nil {
		t.Fatal(err)
	}
	if rec.Msg == nil || rec.Msg.Rcode != dns.RcodeSuccess || len(rec.Msg.Answer) != 0 || len(rec.Msg.Ns) != 1 {
		t.Fatalf("Expected NODATA with SOA for the empty non-terminal, got %v", rec.Msg)
	}
}

// TestSeveralVIPsPerFamily: with several ingress VIPs of each family, every
// address of the asked family is answered, in the order of the directive's
// arguments, the same order every time (the loadbalance plugin shuffles).
func TestSeveralVIPsPerFamily(t *testing.T) {
	tests := []struct {
		name   string
		vips   string
		qtype  uint16
		answer []string
	}{
		{name: "A, grouped", vips: "192.0.2.10 192.0.2.11 192.0.2.12 2001:db8::10 2001:db8::11 2001:db8::12", qtype: dns.TypeA,
			answer: []string{"192.0.2.10", "192.0.2.11", "192.0.2.12"}},
		{name: "AAAA, grouped", vips: "192.0.2.10 192.0.2.11 192.0.2.12 2001:db8::10 2001:db8::11 2001:db8::12", qtype: dns.TypeAAAA,
			answer: []string{"2001:db8::10", "2001:db8::11", "2001:db8::12"}},
		{name: "A, interleaved", vips: "2001:db8::12 192.0.2.12 2001:db8::10 192.0.2.10 192.0.2.11 2001:db8::11", qtype: dns.TypeA,
			answer: []string{"192.0.2.12", "192.0.2.10", "192.0.2.11"}},
		{name: "AAAA, interleaved", vips: "2001:db8::12 192.0.2.12 2001:db8::10 192.0.2.10 192.0.2.11 2001:db8::11", qtype: dns.TypeAAAA,
			answer: []string{"2001:db8::12", "2001:db8::10", "2001:db8::11"}},
		{name: "AAAA with v4 only is NODATA", vips: "192.0.2.10 192.0.2.11 192.0.2.12", qtype: dns.TypeAAAA},
		{name: "MX is NODATA", vips: "192.0.2.10 192.0.2.11 2001:db8::10 2001:db8::11", qtype: dns.TypeMX},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newHandler(t, []string{"ocp4.example.com."}, "appswildcard "+tc.vips+" {\n ttl 7\n}")
			for range 3 {
				rec := dnstest.NewRecorder(&test.ResponseWriter{})
				q := test.Case{Qname: "console.apps.ocp4.example.com.", Qtype: tc.qtype}.Msg()
				if _, err := a.ServeDNS(context.Background(), rec, q); err != nil {
					t.Fatal(err)
				}
				if rec.Msg == nil || rec.Msg.Rcode != dns.RcodeSuccess || !rec.Msg.Authoritative {
					t.Fatalf("Expected an authoritative NOERROR reply, got %v", rec.Msg)
				}
				var got []string
				for _, rr := range rec.Msg.Answer {
					h := rr.Header()
					if h.Name != "console.apps.ocp4.example.com." || h.Rrtype != tc.qtype || h.Ttl != 7 {
						t.Errorf("Unexpected record %v", rr)
					}
					switch r := rr.(type) {
					case *dns.A:
						got = append(got, r.A.String())
					case *dns.AAAA:
						got = append(got, r.AAAA.String())
					}
				}
				if !slices.Equal(got, tc.answer) {
					t.Fatalf("Answer %v, want %v in this order", got, tc.answer)
				}
				if len(tc.answer) == 0 && (len(rec.Msg.Ns) != 1 || rec.Msg.Ns[0].Header().Rrtype != dns.TypeSOA) {
					t.Fatalf("Expected NODATA with the SOA, got %v", rec.Msg)
				}
			}
		})
	}
}
