package appswildcard

import (
	"testing"

	"github.com/coredns/coredns/plugin/test"

	"github.com/infradns/infradns/internal/plugintest"

	"github.com/miekg/dns"
)

// TestConformance holds the answers issue 26 found to differ from a mature
// authoritative server (BIND, Knot) for the names appswildcard owns.
func TestConformance(t *testing.T) {
	a := newHandler(t, []string{"."}, `
		appswildcard 192.0.2.10 2001:db8::10 {
			zone ocp4.example.com
		}`)
	a.Next = test.NextHandler(plugintest.PassedRcode, nil)
	const soa = "ocp4.example.com. 30 IN SOA ns.dns.ocp4.example.com. hostmaster.ocp4.example.com. 0 7200 1800 86400 30"
	nx := func(name string) test.Case {
		return test.Case{Qname: name, Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}}
	}
	q := func(name string, qtype uint16) test.Case { return test.Case{Qname: name, Qtype: qtype} }
	plugintest.Run(t, a, []plugintest.Case{
		// 1. An escaped dot is inside a label: x\.apps is one label
		// directly below the zone, not a name below apps.
		{Name: "escaped dot: x.apps label is NXDOMAIN", TC: nx(`x\.apps.ocp4.example.com.`)},
		{Name: "escaped dot: apps label is NXDOMAIN", TC: nx(`\.apps.ocp4.example.com.`)},
		{Name: "escaped dot: outside the zone goes on", TC: q(`x\.ocp4.example.com.`, dns.TypeA), Next: true},
		{Name: "escaped dot in a label below apps gets the VIPs", TC: test.Case{Qname: `a\.b.apps.ocp4.example.com.`, Qtype: dns.TypeA,
			Answer: []dns.RR{test.A(`a\.b.apps.ocp4.example.com. 30 IN A 192.0.2.10`)}}},
		{Name: "below a literal star label gets the VIPs", TC: test.Case{Qname: "x.*.apps.ocp4.example.com.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("x.*.apps.ocp4.example.com. 30 IN A 192.0.2.10")}}},
		// 2. Class IN only.
		{Name: "CH below apps is REFUSED", TC: q("console.apps.ocp4.example.com.", dns.TypeA), Mod: plugintest.Class(dns.ClassCHAOS), Server: dns.RcodeRefused},
		{Name: "class NONE below apps is REFUSED", TC: q("console.apps.ocp4.example.com.", dns.TypeA), Mod: plugintest.Class(dns.ClassNONE), Server: dns.RcodeRefused},
		{Name: "CH apps is REFUSED", TC: q("apps.ocp4.example.com.", dns.TypeA), Mod: plugintest.Class(dns.ClassCHAOS), Server: dns.RcodeRefused},
		// 3. ANY answers the RRsets the name has.
		{Name: "ANY below apps", TC: test.Case{Qname: "console.apps.ocp4.example.com.", Qtype: dns.TypeANY, Answer: []dns.RR{
			test.A("console.apps.ocp4.example.com. 30 IN A 192.0.2.10"), test.AAAA("console.apps.ocp4.example.com. 30 IN AAAA 2001:db8::10")}}},
		{Name: "ANY apex", TC: test.Case{Qname: "ocp4.example.com.", Qtype: dns.TypeANY, Answer: []dns.RR{
			test.NS("ocp4.example.com. 30 IN NS ns.dns.ocp4.example.com."), test.SOA(soa)}}},
		{Name: "ANY apps, an empty non-terminal, is NODATA", TC: test.Case{Qname: "apps.ocp4.example.com.", Qtype: dns.TypeANY,
			Ns: []dns.RR{test.SOA(soa)}}},
		// 4. No zone transfers.
		{Name: "AXFR is REFUSED", TC: q("ocp4.example.com.", dns.TypeAXFR), Server: dns.RcodeRefused},
		{Name: "IXFR is REFUSED", TC: q("ocp4.example.com.", dns.TypeIXFR), Server: dns.RcodeRefused},
		{Name: "AXFR of apps is REFUSED", TC: q("apps.ocp4.example.com.", dns.TypeAXFR), Server: dns.RcodeRefused},
		// 5. Other opcodes: NOTIMP.
		{Name: "NOTIFY is NOTIMP", TC: q("x.apps.ocp4.example.com.", dns.TypeSOA), Mod: func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }, Server: dns.RcodeNotImplemented},
		// 6. Malformed queries get FORMERR, never records.
		{Name: "two OPT records", TC: q("x.apps.ocp4.example.com.", dns.TypeA), Mod: func(m *dns.Msg) {
			m.Extra = []dns.RR{plugintest.Opt("."), plugintest.Opt(".")}
		}, Server: dns.RcodeFormatError},
		{Name: "OPT owned by a name", TC: q("x.apps.ocp4.example.com.", dns.TypeA), Mod: func(m *dns.Msg) {
			m.Extra = []dns.RR{plugintest.Opt("x.")}
		}, Server: dns.RcodeFormatError},
		{Name: "question cut before its type", TC: q("x.apps.ocp4.example.com.", 0), Mod: plugintest.Class(0), Server: dns.RcodeFormatError},
	})
}
