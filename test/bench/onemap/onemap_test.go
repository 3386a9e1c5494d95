package onemap

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
)

func TestOneMap(t *testing.T) {
	file := filepath.Join(t.TempDir(), "names")
	if err := os.WriteFile(file, []byte("# name v4 v6\nApi.Example.org 192.0.2.5 2001:db8::5\n5.2.0.192.in-addr.arpa PTR Api.Example.org\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := parse(caddy.NewTestController("dns", "onemap example.org "+file))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	h.Next = test.NextHandler(dns.RcodeRefused, nil)
	cases := []test.Case{
		{Qname: "api.example.org.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("api.example.org. 30 IN A 192.0.2.5")}},
		{Qname: "API.example.org.", Qtype: dns.TypeAAAA, Answer: []dns.RR{test.AAAA("api.example.org. 30 IN AAAA 2001:db8::5")}},
		{Qname: "api.example.org.", Qtype: dns.TypeMX},
		{Qname: "nx.example.org.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError},
		{Qname: "5.2.0.192.in-addr.arpa.", Qtype: dns.TypePTR, Answer: []dns.RR{test.PTR("5.2.0.192.in-addr.arpa. 30 IN PTR api.example.org.")}},
		{Qname: "6.2.0.192.in-addr.arpa.", Qtype: dns.TypePTR, Rcode: dns.RcodeRefused},
		{Qname: "example.net.", Qtype: dns.TypeA, Rcode: dns.RcodeRefused},
	}
	for _, tc := range cases {
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		rc, err := h.ServeDNS(context.Background(), rec, tc.Msg())
		if err != nil {
			t.Fatalf("%s %d: %v", tc.Qname, tc.Qtype, err)
		}
		if tc.Rcode == dns.RcodeRefused {
			if rc != dns.RcodeRefused || rec.Msg != nil {
				t.Errorf("%s: want the next plugin, got rcode %d", tc.Qname, rc)
			}
			continue
		}
		if err := test.SortAndCheck(rec.Msg, tc); err != nil {
			t.Errorf("%s %d: %v", tc.Qname, tc.Qtype, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("a.example.org 192.0.2.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badPTR := filepath.Join(t.TempDir(), "badptr")
	if err := os.WriteFile(badPTR, []byte("1.2.0.192.in-addr.arpa PTR bad..name\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"onemap", "onemap example.org", "onemap example.org /nonexistent", "onemap example.org " + bad, "onemap example.org " + badPTR} {
		if _, err := parse(caddy.NewTestController("dns", in)); err == nil {
			t.Errorf("Parse %q: want an error", in)
		}
	}
}
