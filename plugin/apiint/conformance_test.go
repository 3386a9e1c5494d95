package apiint

import (
	"testing"

	"github.com/coredns/coredns/plugin/test"

	"github.com/infradns/infradns/internal/plugintest"

	"github.com/miekg/dns"
)

// TestConformance holds the answers issue 26 found to differ from a mature
// authoritative server (BIND, Knot) for the names apiint owns.
func TestConformance(t *testing.T) {
	a := newHandler(t, []string{"ocp4.example.com."}, `apiint 192.0.2.5 2001:db8::5`)
	a.Next = test.NextHandler(plugintest.PassedRcode, nil)
	nx := func(name string) test.Case {
		return test.Case{Qname: name, Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}}
	}
	q := func(name string, qtype uint16) test.Case { return test.Case{Qname: name, Qtype: qtype} }
	plugintest.Run(t, a, []plugintest.Case{
		// 1. An escaped dot is inside a label.
		{Name: "escaped dot: one label below example.com goes on", TC: q(`x\.ocp4.example.com.`, dns.TypeA), Next: true},
		{Name: "escaped dot: api-int look-alike goes on", TC: q(`api-int\.ocp4.example.com.`, dns.TypeAAAA), Next: true},
		{Name: "escaped dot: one label in the zone is NXDOMAIN", TC: nx(`api\.x.ocp4.example.com.`)},
		{Name: "escaped dot below api-int is NXDOMAIN", TC: nx(`a\.b.api-int.ocp4.example.com.`)},
		// 2. Class IN only.
		{Name: "CH api-int is REFUSED", TC: q("api-int.ocp4.example.com.", dns.TypeA), Mod: plugintest.Class(dns.ClassCHAOS), Server: dns.RcodeRefused},
		{Name: "HS api is REFUSED", TC: q("api.ocp4.example.com.", dns.TypeA), Mod: plugintest.Class(dns.ClassHESIOD), Server: dns.RcodeRefused},
		{Name: "class ANY apex SOA is REFUSED", TC: q("ocp4.example.com.", dns.TypeSOA), Mod: plugintest.Class(dns.ClassANY), Server: dns.RcodeRefused},
		{Name: "CH unknown name is REFUSED", TC: q("nothere.ocp4.example.com.", dns.TypeA), Mod: plugintest.Class(dns.ClassCHAOS), Server: dns.RcodeRefused},
		{Name: "CH outside the zone goes on", TC: q("version.bind.", dns.TypeTXT), Mod: plugintest.Class(dns.ClassCHAOS), Next: true},
		// 3. ANY answers the RRsets the name has.
		{Name: "ANY api-int", TC: test.Case{Qname: "api-int.ocp4.example.com.", Qtype: dns.TypeANY, Answer: []dns.RR{
			test.A("api-int.ocp4.example.com. 30 IN A 192.0.2.5"), test.AAAA("api-int.ocp4.example.com. 30 IN AAAA 2001:db8::5")}}},
		{Name: "ANY apex", TC: test.Case{Qname: "ocp4.example.com.", Qtype: dns.TypeANY, Answer: []dns.RR{
			test.NS("ocp4.example.com. 30 IN NS ns.dns.ocp4.example.com."), test.SOA(soa)}}},
		{Name: "ANY nameserver name", TC: test.Case{Qname: "ns.dns.ocp4.example.com.", Qtype: dns.TypeANY, Answer: []dns.RR{
			test.A("ns.dns.ocp4.example.com. 30 IN A 127.0.0.1")}}},
		{Name: "ANY unknown name is NXDOMAIN", TC: test.Case{Qname: "nothere.ocp4.example.com.", Qtype: dns.TypeANY,
			Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}}},
		// 4. No zone transfers.
		{Name: "AXFR is REFUSED", TC: q("ocp4.example.com.", dns.TypeAXFR), Server: dns.RcodeRefused},
		{Name: "IXFR is REFUSED", TC: q("ocp4.example.com.", dns.TypeIXFR), Mod: func(m *dns.Msg) {
			m.Ns = []dns.RR{test.SOA(soa)}
		}, Server: dns.RcodeRefused},
		// 5. Other opcodes: NOTIMP, left to the server, which keeps the OPT.
		{Name: "UPDATE is NOTIMP", TC: q("api-int.ocp4.example.com.", dns.TypeA), Mod: func(m *dns.Msg) {
			m.Opcode = dns.OpcodeUpdate
			m.SetEdns0(1232, false)
		}, Server: dns.RcodeNotImplemented},
		// 6. Malformed queries get FORMERR, never records.
		{Name: "two OPT records", TC: q("api-int.ocp4.example.com.", dns.TypeA), Mod: func(m *dns.Msg) {
			m.Extra = []dns.RR{plugintest.Opt("."), plugintest.Opt(".")}
		}, Server: dns.RcodeFormatError},
		{Name: "OPT owned by a name", TC: q("api-int.ocp4.example.com.", dns.TypeA), Mod: func(m *dns.Msg) {
			m.Extra = []dns.RR{plugintest.Opt("api-int.ocp4.example.com.")}
		}, Server: dns.RcodeFormatError},
		{Name: "question cut before its class", TC: q("api-int.ocp4.example.com.", dns.TypeA), Mod: plugintest.Class(0), Server: dns.RcodeFormatError},
		// Still an ordinary answer with EDNS.
		{Name: "EDNS query is answered", TC: test.Case{Qname: "api-int.ocp4.example.com.", Qtype: dns.TypeA, Do: true,
			Answer: []dns.RR{test.A("api-int.ocp4.example.com. 30 IN A 192.0.2.5")}}},
	})
}
