package apiint

import (
	"context"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/infradns/infradns/internal/authority"

	"github.com/miekg/dns"
)

// nextRcode is what the fake next plugin returns, so a test can tell that a
// query was passed on rather than answered.
const nextRcode = dns.RcodeRefused

func newHandler(t *testing.T, keys []string, corefile string) *APIInt {
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

const soa = "ocp4.example.com. 30 IN SOA ns.dns.ocp4.example.com. hostmaster.ocp4.example.com. 0 7200 1800 86400 30"

func TestServeDNS(t *testing.T) {
	a := newHandler(t, []string{"ocp4.example.com."}, `apiint 192.0.2.5 192.0.2.6 2001:db8::5 {
		api 198.51.100.7
	}`)
	cases := []struct {
		name string
		tc   test.Case
		next bool // expect the query to reach the next plugin
	}{
		{name: "api-int A, every address", tc: test.Case{Qname: "api-int.ocp4.example.com.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("api-int.ocp4.example.com. 30 IN A 192.0.2.5"), test.A("api-int.ocp4.example.com. 30 IN A 192.0.2.6")}}},
		{name: "api-int AAAA", tc: test.Case{Qname: "api-int.ocp4.example.com.", Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA("api-int.ocp4.example.com. 30 IN AAAA 2001:db8::5")}}},
		{name: "api A from the api option", tc: test.Case{Qname: "api.ocp4.example.com.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("api.ocp4.example.com. 30 IN A 198.51.100.7")}}},
		{name: "api AAAA with only v4 configured is NODATA", tc: test.Case{Qname: "api.ocp4.example.com.", Qtype: dns.TypeAAAA,
			Ns: []dns.RR{test.SOA(soa)}}},
		{name: "case kept in the answer", tc: test.Case{Qname: "API-Int.OCP4.example.COM.", Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA("API-Int.OCP4.example.COM. 30 IN AAAA 2001:db8::5")}}},
		{name: "other type is NODATA", tc: test.Case{Qname: "api-int.ocp4.example.com.", Qtype: dns.TypeMX,
			Ns: []dns.RR{test.SOA(soa)}}},
		{name: "TXT is NODATA", tc: test.Case{Qname: "api.ocp4.example.com.", Qtype: dns.TypeTXT,
			Ns: []dns.RR{test.SOA(soa)}}},
		{name: "apex SOA", tc: test.Case{Qname: "ocp4.example.com.", Qtype: dns.TypeSOA,
			Answer: []dns.RR{test.SOA(soa)}}},
		{name: "apex NS", tc: test.Case{Qname: "ocp4.example.com.", Qtype: dns.TypeNS,
			Answer: []dns.RR{test.NS("ocp4.example.com. 30 IN NS ns.dns.ocp4.example.com.")}}},
		{name: "apex A is NODATA", tc: test.Case{Qname: "ocp4.example.com.", Qtype: dns.TypeA,
			Ns: []dns.RR{test.SOA(soa)}}},
		{name: "nameserver name answers the local address", tc: test.Case{Qname: "ns.dns.ocp4.example.com.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("ns.dns.ocp4.example.com. 30 IN A 127.0.0.1")}}},
		{name: "nameserver name AAAA over v4 is NODATA", tc: test.Case{Qname: "ns.dns.ocp4.example.com.", Qtype: dns.TypeAAAA,
			Ns: []dns.RR{test.SOA(soa)}}},
		{name: "unknown name is NXDOMAIN", tc: test.Case{Qname: "nothere.ocp4.example.com.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}}},
		{name: "name below api is NXDOMAIN", tc: test.Case{Qname: "x.api.ocp4.example.com.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}}},
		{name: "unanchored look-alike is NXDOMAIN", tc: test.Case{Qname: "myapi.ocp4.example.com.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}}},
		{name: "outside the zone goes on", tc: test.Case{Qname: "api.example.org.", Qtype: dns.TypeA}, next: true},
		{name: "look-alike zone goes on", tc: test.Case{Qname: "api.xocp4.example.com.", Qtype: dns.TypeA}, next: true},
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
			zeroSerial(rec.Msg)
			if err := test.SortAndCheck(rec.Msg, c.tc); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestFallthrough(t *testing.T) {
	a := newHandler(t, []string{"."}, "apiint 192.0.2.5 {\n zone ocp4.example.com\n fallthrough\n}")
	for _, name := range []string{"nothere.ocp4.example.com.", "www.example.org."} {
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		rc, err := a.ServeDNS(context.Background(), rec, test.Case{Qname: name, Qtype: dns.TypeA}.Msg())
		if err != nil || rc != nextRcode || rec.Msg != nil {
			t.Errorf("Expected %s to fall through, got rcode %d err %v reply %v", name, rc, err, rec.Msg)
		}
	}
	// Owned names never fall through.
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	if _, err := a.ServeDNS(context.Background(), rec, test.Case{Qname: "api.ocp4.example.com.", Qtype: dns.TypeAAAA}.Msg()); err != nil || rec.Msg == nil || rec.Msg.Rcode != dns.RcodeSuccess {
		t.Errorf("Expected NODATA for api AAAA, got %v (err %v)", rec.Msg, err)
	}
}

// TestSharedAuthority checks that apiint does not NXDOMAIN a name when a later
// member of the server block serves the zone: the later one decides.
func TestSharedAuthority(t *testing.T) {
	a := newHandler(t, []string{"ocp4.example.com."}, `apiint 192.0.2.5`)
	later := newHandler(t, []string{"ocp4.example.com."}, `apiint 192.0.2.9`)
	a.LinkMembers([]authority.Member{a, later}, a)

	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	rc, err := a.ServeDNS(context.Background(), rec, test.Case{Qname: "foo.apps.ocp4.example.com.", Qtype: dns.TypeA}.Msg())
	if err != nil || rc != nextRcode || rec.Msg != nil {
		t.Fatalf("Expected the name to be passed to the later member, got rcode %d err %v reply %v", rc, err, rec.Msg)
	}
	// The last member decides NXDOMAIN.
	later.LinkMembers([]authority.Member{a, later}, later)
	rec = dnstest.NewRecorder(&test.ResponseWriter{})
	if _, err := later.ServeDNS(context.Background(), rec, test.Case{Qname: "foo.apps.ocp4.example.com.", Qtype: dns.TypeA}.Msg()); err != nil || rec.Msg == nil || rec.Msg.Rcode != dns.RcodeNameError {
		t.Fatalf("Expected NXDOMAIN from the last member, got %v (err %v)", rec.Msg, err)
	}
}

// zeroSerial blanks the SOA serial, which is the start time.
func zeroSerial(m *dns.Msg) {
	for _, sec := range [][]dns.RR{m.Answer, m.Ns} {
		for _, rr := range sec {
			if s, ok := rr.(*dns.SOA); ok {
				s.Serial = 0
			}
		}
	}
}
