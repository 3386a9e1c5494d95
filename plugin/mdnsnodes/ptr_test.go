package mdnsnodes

import (
	"net"
	"testing"

	"github.com/coredns/coredns/plugin/test"

	"github.com/infradns/infradns/internal/plugintest"
	"github.com/infradns/infradns/internal/records"

	"github.com/miekg/dns"
)

func TestPTR(t *testing.T) {
	m := newHandler(t, "mdnsnodes {\n interface eth0\n}")
	m.Next = test.NextHandler(plugintest.PassedRcode, nil)
	withNodes(m, map[string]records.Set{
		"master-0": {V4: []net.IP{net.ParseIP("198.51.100.11").To4()}, V6: []net.IP{net.ParseIP("2001:db8:1::11")}},
	})
	const v6 = "1.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa."
	plugintest.Run(t, m, []plugintest.Case{
		{Name: "node IPv4", TC: test.Case{Qname: "11.100.51.198.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("11.100.51.198.in-addr.arpa. 30 IN PTR master-0.ocp4.example.com.")}}},
		{Name: "node IPv6", TC: test.Case{Qname: v6, Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR(v6 + " 30 IN PTR master-0.ocp4.example.com.")}}},
		{Name: "unknown address goes on", TC: test.Case{Qname: "12.100.51.198.in-addr.arpa.", Qtype: dns.TypePTR}, Next: true},
		{Name: "AXFR of a known address is REFUSED", TC: test.Case{Qname: "11.100.51.198.in-addr.arpa.", Qtype: dns.TypeAXFR}, Server: dns.RcodeRefused},
	})
	// A new index brings its own reverse map.
	withNodes(m, map[string]records.Set{"worker-0": {V4: []net.IP{net.ParseIP("198.51.100.11").To4()}}})
	plugintest.Run(t, m, []plugintest.Case{
		{Name: "address moved to another node", TC: test.Case{Qname: "11.100.51.198.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("11.100.51.198.in-addr.arpa. 30 IN PTR worker-0.ocp4.example.com.")}}},
	})
}

func TestWithReverse(t *testing.T) {
	set := records.Set{V4: []net.IP{net.ParseIP("198.51.100.11").To4()}}
	for _, tc := range []struct {
		zones []string
		want  []string
	}{
		{[]string{"ocp4.example.com."}, []string{"master-0.ocp4.example.com."}},
		{[]string{"ocp4.example.com.", "example.net."}, []string{"master-0.example.net.", "master-0.ocp4.example.com."}},
		{[]string{"."}, []string{"master-0."}},
	} {
		ix := (&nodeIndex{nodes: map[string]records.Set{"master-0": set}}).withReverse(tc.zones)
		got := ix.reverseMap()["11.100.51.198.in-addr.arpa."]
		if len(got) != len(tc.want) {
			t.Errorf("Zones %v: %v, want %v", tc.zones, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("Zones %v: %v, want %v", tc.zones, got, tc.want)
			}
		}
	}
	var nilIndex *nodeIndex
	if nilIndex.reverseMap() != nil || nilIndex.withReverse([]string{"."}).Len() != 0 {
		t.Error("Expected a nil index to have no reverse names")
	}
}
