package authority

import (
	"testing"

	"github.com/miekg/dns"
)

func TestScreen(t *testing.T) {
	opt := func(name string) dns.RR {
		return &dns.OPT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeOPT, Class: 1232}}
	}
	tests := []struct {
		name   string
		mod    func(m *dns.Msg)
		rcode  int
		result Result
	}{
		{"plain query", func(*dns.Msg) {}, dns.RcodeSuccess, ""},
		{"EDNS query", func(m *dns.Msg) { m.SetEdns0(1232, true) }, dns.RcodeSuccess, ""},
		{"ANY", func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeANY }, dns.RcodeSuccess, ""},
		{"TSIG beside OPT", func(m *dns.Msg) {
			m.SetEdns0(1232, false)
			m.SetTsig("key.", dns.HmacSHA256, 300, 0)
		}, dns.RcodeSuccess, ""},
		{"class CH", func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }, dns.RcodeRefused, Refused},
		{"class HS", func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassHESIOD }, dns.RcodeRefused, Refused},
		{"class ANY", func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassANY }, dns.RcodeRefused, Refused},
		{"class NONE", func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassNONE }, dns.RcodeRefused, Refused},
		{"AXFR", func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeAXFR }, dns.RcodeRefused, Refused},
		{"IXFR", func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeIXFR }, dns.RcodeRefused, Refused},
		{"NOTIFY", func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }, dns.RcodeNotImplemented, NotImplemented},
		{"UPDATE with EDNS", func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate; m.SetEdns0(1232, false) }, dns.RcodeNotImplemented, NotImplemented},
		{"question cut before its class", func(m *dns.Msg) { m.Question[0].Qclass = 0 }, dns.RcodeFormatError, FormErr},
		{"question cut before its type", func(m *dns.Msg) { m.Question[0].Qtype, m.Question[0].Qclass = 0, 0 }, dns.RcodeFormatError, FormErr},
		{"two OPT records", func(m *dns.Msg) { m.Extra = []dns.RR{opt("."), opt(".")} }, dns.RcodeFormatError, FormErr},
		{"OPT owned by a name", func(m *dns.Msg) { m.Extra = []dns.RR{opt("x.")} }, dns.RcodeFormatError, FormErr},
		{"malformed NOTIFY is FORMERR first", func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify; m.Extra = []dns.RR{opt("x.")} }, dns.RcodeFormatError, FormErr},
	}
	for _, tc := range tests {
		m := new(dns.Msg).SetQuestion("api-int.ocp4.example.com.", dns.TypeA)
		tc.mod(m)
		q, _ := NewQuery(m)
		if rc, res := Screen(m, q); rc != tc.rcode || res != tc.result {
			t.Errorf("%s: Screen = (%s, %q), want (%s, %q)", tc.name, dns.RcodeToString[rc], res, dns.RcodeToString[tc.rcode], tc.result)
		}
	}
}

func TestScreenAllocs(t *testing.T) {
	m := new(dns.Msg).SetQuestion("api-int.ocp4.example.com.", dns.TypeA)
	m.SetEdns0(1232, false)
	q, _ := NewQuery(m)
	if n := testing.AllocsPerRun(100, func() { Screen(m, q) }); n != 0 {
		t.Errorf("Screen allocates %v times per query, want 0", n)
	}
}
