package mdnsnodes

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/infradns/infradns/internal/authority"
	"github.com/infradns/infradns/internal/records"

	"github.com/miekg/dns"
)

const nextRcode = dns.RcodeRefused

const soa = "ocp4.example.com. 30 IN SOA ns.dns.ocp4.example.com. hostmaster.ocp4.example.com. 0 7200 1800 86400 30"

func newHandler(t *testing.T, corefile string) *MDNSNodes {
	t.Helper()
	c := caddy.NewTestController("dns", corefile)
	c.ServerBlockKeys = []string{"ocp4.example.com."}
	m, err := parse(c)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	m.Next = test.NextHandler(nextRcode, nil)
	return m
}

// withNodes stores an index as the browser would, and marks the plugin ready.
func withNodes(m *MDNSNodes, nodes map[string]records.Set) {
	m.index.Store((&nodeIndex{nodes: nodes}).withReverse(m.Zones))
	m.forceReady = true
}

func TestServeDNS(t *testing.T) {
	m := newHandler(t, "mdnsnodes {\n interface eth0\n}")
	withNodes(m, map[string]records.Set{
		"master-0": {V4: []net.IP{net.ParseIP("198.51.100.11").To4()}, V6: []net.IP{net.ParseIP("2001:db8:1::11")}},
		"worker-0": {V4: []net.IP{net.ParseIP("198.51.100.21").To4(), net.ParseIP("198.51.100.22").To4()}},
		// Never in an index built from the cache or the API (reserved
		// there too); here to show that the name stays the authority's.
		"dns": {V4: []net.IP{net.ParseIP("198.51.100.53").To4()}},
	})
	cases := []struct {
		name string
		tc   test.Case
		next bool
	}{
		{name: "A", tc: test.Case{Qname: "master-0.ocp4.example.com.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("master-0.ocp4.example.com. 30 IN A 198.51.100.11")}}},
		{name: "AAAA", tc: test.Case{Qname: "master-0.ocp4.example.com.", Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA("master-0.ocp4.example.com. 30 IN AAAA 2001:db8:1::11")}}},
		{name: "two addresses", tc: test.Case{Qname: "worker-0.ocp4.example.com.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("worker-0.ocp4.example.com. 30 IN A 198.51.100.21"), test.A("worker-0.ocp4.example.com. 30 IN A 198.51.100.22")}}},
		{name: "case-insensitive, case kept", tc: test.Case{Qname: "Master-0.OCP4.example.com.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("Master-0.OCP4.example.com. 30 IN A 198.51.100.11")}}},
		{name: "AAAA of a v4-only node is NODATA", tc: test.Case{Qname: "worker-0.ocp4.example.com.", Qtype: dns.TypeAAAA,
			Ns: []dns.RR{test.SOA(soa)}}},
		{name: "MX is NODATA", tc: test.Case{Qname: "master-0.ocp4.example.com.", Qtype: dns.TypeMX,
			Ns: []dns.RR{test.SOA(soa)}}},
		{name: "unknown node is NXDOMAIN", tc: test.Case{Qname: "master-9.ocp4.example.com.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}}},
		{name: "below a node is NXDOMAIN", tc: test.Case{Qname: "x.master-0.ocp4.example.com.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}}},
		{name: "reserved label is not ours", tc: test.Case{Qname: "api-int.ocp4.example.com.", Qtype: dns.TypeA,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}}},
		{name: "dns is the authority's, not a node's", tc: test.Case{Qname: "dns.ocp4.example.com.", Qtype: dns.TypeA,
			Ns: []dns.RR{test.SOA(soa)}}},
		{name: "apex SOA", tc: test.Case{Qname: "ocp4.example.com.", Qtype: dns.TypeSOA, Answer: []dns.RR{test.SOA(soa)}}},
		{name: "apex NS", tc: test.Case{Qname: "ocp4.example.com.", Qtype: dns.TypeNS,
			Answer: []dns.RR{test.NS("ocp4.example.com. 30 IN NS ns.dns.ocp4.example.com.")}}},
		{name: "outside the zone goes on", tc: test.Case{Qname: "master-0.example.org.", Qtype: dns.TypeA}, next: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := dnstest.NewRecorder(&test.ResponseWriter{})
			rc, err := m.ServeDNS(context.Background(), rec, c.tc.Msg())
			if err != nil {
				t.Fatalf("ServeDNS: %v", err)
			}
			if c.next {
				if rc != nextRcode || rec.Msg != nil {
					t.Fatalf("Rcode %d msg %v: want the query passed on", rc, rec.Msg)
				}
				return
			}
			if rec.Msg == nil {
				t.Fatalf("No reply, rcode %d", rc)
			}
			if !rec.Msg.Authoritative {
				t.Error("Reply is not authoritative")
			}
			if err := test.SortAndCheck(rec.Msg, c.tc); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestFallthrough(t *testing.T) {
	m := newHandler(t, "mdnsnodes {\n interface eth0\n fallthrough\n}")
	withNodes(m, nil)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	rc, _ := m.ServeDNS(context.Background(), rec, test.Case{Qname: "master-9.ocp4.example.com.", Qtype: dns.TypeA}.Msg())
	if rc != nextRcode || rec.Msg != nil {
		t.Errorf("Rcode %d msg %v: want fall through", rc, rec.Msg)
	}
}

func TestNotReady(t *testing.T) {
	m := newHandler(t, "mdnsnodes {\n interface eth0\n}")
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	rc, _ := m.ServeDNS(context.Background(), rec, test.Case{Qname: "master-0.ocp4.example.com.", Qtype: dns.TypeA}.Msg())
	if rc != dns.RcodeServerFailure || rec.Msg != nil {
		t.Errorf("Rcode %d msg %v before the first query window: want SERVFAIL from the server", rc, rec.Msg)
	}
	if m.Ready() {
		t.Error("Ready before Start")
	}
}

// TestAuthority checks that mdnsnodes, after apiint/appswildcard-like
// members, takes part in the zone's shared decisions.
func TestAuthority(t *testing.T) {
	m := newHandler(t, "mdnsnodes {\n interface eth0\n ttl 10\n}")
	var _ authority.Member = m
	m.LinkMembers([]authority.Member{m}, m)
	withNodes(m, nil)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	m.ServeDNS(context.Background(), rec, test.Case{Qname: "nothere.ocp4.example.com.", Qtype: dns.TypeA}.Msg())
	if rec.Msg == nil || rec.Msg.Rcode != dns.RcodeNameError || rec.Msg.Ns[0].(*dns.SOA).Minttl != 10 {
		t.Errorf("Reply %v: want NXDOMAIN with minttl 10", rec.Msg)
	}
}

// TestKnowsAll: when a node name neither source has is NXDOMAIN rather than
// SERVFAIL.
func TestKnowsAll(t *testing.T) {
	for _, c := range []struct {
		name  string
		heard bool
		api   bool
		since time.Duration
		want  bool
	}{
		{"mDNS only, before the first window", false, false, time.Minute, false},
		{"mDNS only, after the first window", true, false, 0, true},
		{"API too, its list not in yet", true, true, time.Second, false},
		{"API too, the list late past the grace", true, true, apiGrace, true},
		{"API too, nothing heard yet", false, true, time.Minute, false},
	} {
		if got := knowsAll(c.heard, c.api, c.since); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
