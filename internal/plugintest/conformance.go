package plugintest

import (
	"context"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
)

// PassedRcode is what the Next handler of a conformance test returns: no
// handler answers it, so a test tells a query passed on from one the
// plugin left to the server (REFUSED, FORMERR, NOTIMP).
const PassedRcode = dns.RcodeYXDomain

// Case is one row of a conformance table: a test.Case, a change to its
// query (a class, an opcode, extra records) and what the plugin must do.
type Case struct {
	Name string
	TC   test.Case
	Mod  func(m *dns.Msg) // nil: the query as tc.Msg() builds it
	// Server, when not zero, is the rcode the plugin must return without
	// writing, so the server replies (and echoes the query's OPT).
	Server int
	// Next: the query must go on to the next plugin, unanswered.
	Next bool
}

// Opt returns an OPT record owned by name.
func Opt(name string) dns.RR {
	return &dns.OPT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeOPT, Class: 1232}}
}

// Class returns a Mod that sets the question's class.
func Class(c uint16) func(*dns.Msg) { return func(m *dns.Msg) { m.Question[0].Qclass = c } }

// Run sends each case to h, whose Next must return PassedRcode, and checks
// what h did. Answers are compared with test.SortAndCheck, SOA serials
// zeroed.
func Run(t *testing.T, h plugin.Handler, cases []Case) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			m := c.TC.Msg()
			if c.Mod != nil {
				c.Mod(m)
			}
			rec := dnstest.NewRecorder(&test.ResponseWriter{})
			rc, err := h.ServeDNS(context.Background(), rec, m)
			if err != nil {
				t.Fatalf("ServeDNS: %v", err)
			}
			switch {
			case c.Next:
				if rc != PassedRcode || rec.Msg != nil {
					t.Fatalf("Expected the query passed on, got rcode %s, reply %v", dns.RcodeToString[rc], rec.Msg)
				}
				return
			case c.Server != 0:
				if rc != c.Server || rec.Msg != nil {
					t.Fatalf("Expected %s left to the server, got rcode %s, reply %v", dns.RcodeToString[c.Server], dns.RcodeToString[rc], rec.Msg)
				}
				return
			}
			if rec.Msg == nil {
				t.Fatalf("Expected a reply, got none (rcode %s)", dns.RcodeToString[rc])
			}
			if !rec.Msg.Authoritative {
				t.Error("Expected an authoritative reply")
			}
			for _, sec := range [][]dns.RR{rec.Msg.Answer, rec.Msg.Ns} {
				for _, rr := range sec {
					if s, ok := rr.(*dns.SOA); ok {
						s.Serial = 0
					}
				}
			}
			if err := test.SortAndCheck(rec.Msg, c.TC); err != nil {
				t.Error(err)
			}
		})
	}
}
