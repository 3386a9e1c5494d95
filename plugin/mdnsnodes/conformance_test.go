package mdnsnodes

import (
	"net"
	"testing"

	"github.com/coredns/coredns/plugin/test"

	"github.com/infradns/infradns/internal/plugintest"
	"github.com/infradns/infradns/internal/records"

	"github.com/miekg/dns"
)

// TestConformance holds the answers issue 26 found to differ from a mature
// authoritative server (BIND, Knot) for the names mdnsnodes owns.
func TestConformance(t *testing.T) {
	m := newHandler(t, "mdnsnodes {\n interface eth0\n}")
	m.Next = test.NextHandler(plugintest.PassedRcode, nil)
	withNodes(m, map[string]records.Set{
		"master-0": {V4: []net.IP{net.ParseIP("198.51.100.11").To4()}, V6: []net.IP{net.ParseIP("2001:db8:1::11")}},
		"worker-0": {V6: []net.IP{net.ParseIP("2001:db8:1::21")}},
	})
	nx := func(name string) test.Case {
		return test.Case{Qname: name, Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}}
	}
	q := func(name string, qtype uint16) test.Case { return test.Case{Qname: name, Qtype: qtype} }
	plugintest.Run(t, m, []plugintest.Case{
		// 1. An escaped dot is inside a label.
		{Name: "escaped dot: node look-alike outside the zone goes on", TC: q(`master-0\.ocp4.example.com.`, dns.TypeA), Next: true},
		{Name: "escaped dot: one label in the zone is NXDOMAIN", TC: nx(`x\.master-0.ocp4.example.com.`)},
		// 2. Class IN only.
		{Name: "CH node is REFUSED", TC: q("master-0.ocp4.example.com.", dns.TypeA), Mod: plugintest.Class(dns.ClassCHAOS), Server: dns.RcodeRefused},
		{Name: "HS apex NS is REFUSED", TC: q("ocp4.example.com.", dns.TypeNS), Mod: plugintest.Class(dns.ClassHESIOD), Server: dns.RcodeRefused},
		// 3. ANY answers the RRsets the name has.
		{Name: "ANY dual-stack node", TC: test.Case{Qname: "master-0.ocp4.example.com.", Qtype: dns.TypeANY, Answer: []dns.RR{
			test.A("master-0.ocp4.example.com. 30 IN A 198.51.100.11"), test.AAAA("master-0.ocp4.example.com. 30 IN AAAA 2001:db8:1::11")}}},
		{Name: "ANY IPv6-only node", TC: test.Case{Qname: "worker-0.ocp4.example.com.", Qtype: dns.TypeANY, Answer: []dns.RR{
			test.AAAA("worker-0.ocp4.example.com. 30 IN AAAA 2001:db8:1::21")}}},
		// 4. No zone transfers.
		{Name: "AXFR is REFUSED", TC: q("ocp4.example.com.", dns.TypeAXFR), Server: dns.RcodeRefused},
		{Name: "IXFR is REFUSED", TC: q("ocp4.example.com.", dns.TypeIXFR), Server: dns.RcodeRefused},
		// 5. Other opcodes: NOTIMP.
		{Name: "STATUS is NOTIMP", TC: q("master-0.ocp4.example.com.", dns.TypeA), Mod: func(m *dns.Msg) { m.Opcode = dns.OpcodeStatus }, Server: dns.RcodeNotImplemented},
		// 6. Malformed queries get FORMERR, never records.
		{Name: "two OPT records", TC: q("master-0.ocp4.example.com.", dns.TypeA), Mod: func(m *dns.Msg) {
			m.Extra = []dns.RR{plugintest.Opt("."), plugintest.Opt(".")}
		}, Server: dns.RcodeFormatError},
		{Name: "OPT owned by a name", TC: q("master-0.ocp4.example.com.", dns.TypeA), Mod: func(m *dns.Msg) {
			m.Extra = []dns.RR{plugintest.Opt("master-0.ocp4.example.com.")}
		}, Server: dns.RcodeFormatError},
		{Name: "question cut before its class", TC: q("master-0.ocp4.example.com.", dns.TypeA), Mod: plugintest.Class(0), Server: dns.RcodeFormatError},
	})
}
