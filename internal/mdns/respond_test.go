package mdns

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

var (
	mdnsSrc   = netip.MustParseAddrPort("198.51.100.20:5353")
	legacySrc = netip.MustParseAddrPort("198.51.100.20:40000")
)

func TestRespond(t *testing.T) {
	inst := `ocp4\ Workstation-node1._workstation._tcp.local.`
	qu := dns.Question{Name: "node1.local.", Qtype: dns.TypeA, Qclass: dns.ClassINET | classUnicast}
	tests := []struct {
		name      string
		key       []byte
		q         *dns.Msg
		src       netip.AddrPort
		answer    []string // nil: no reply
		extra     []string
		unicast   bool
		shared    bool
		legacy    bool
		knownDrop bool
	}{
		{name: "browse", q: query(q("_workstation._tcp.local.", dns.TypePTR)), src: mdnsSrc,
			answer: []string{"PTR _workstation._tcp.local."}, extra: []string{"SRV " + inst, "TXT " + inst, "A node1.local.", "AAAA node1.local."}, shared: true},
		{name: "case-insensitive", q: query(q("_WORKSTATION._tcp.Local.", dns.TypePTR)), src: mdnsSrc,
			answer: []string{"PTR _workstation._tcp.local."}, extra: []string{"SRV " + inst, "TXT " + inst, "A node1.local.", "AAAA node1.local."}, shared: true},
		{name: "service enumeration", q: query(q("_services._dns-sd._udp.local.", dns.TypePTR)), src: mdnsSrc,
			answer: []string{"PTR _services._dns-sd._udp.local."}, shared: true},
		{name: "A", q: query(q("NODE1.local.", dns.TypeA)), src: mdnsSrc,
			answer: []string{"A node1.local."}, extra: []string{"AAAA node1.local."}},
		{name: "AAAA", q: query(q("node1.local.", dns.TypeAAAA)), src: mdnsSrc,
			answer: []string{"AAAA node1.local."}, extra: []string{"A node1.local."}},
		{name: "A signed carries the signature", key: key, q: query(q("node1.local.", dns.TypeA)), src: mdnsSrc,
			answer: []string{"A node1.local."}, extra: []string{"AAAA node1.local.", "SRV " + inst, "TXT " + inst}},
		{name: "SRV", q: query(q(inst, dns.TypeSRV)), src: mdnsSrc,
			answer: []string{"SRV " + inst}, extra: []string{"A node1.local.", "AAAA node1.local."}},
		{name: "ANY instance", q: query(q(inst, dns.TypeANY)), src: mdnsSrc,
			answer: []string{"SRV " + inst, "TXT " + inst}, extra: []string{"A node1.local.", "AAAA node1.local."}},
		{name: "QU bit", q: query(qu), src: mdnsSrc, answer: []string{"A node1.local."}, extra: []string{"AAAA node1.local."}, unicast: true},
		{name: "legacy unicast", q: query(q("node1.local.", dns.TypeA)), src: legacySrc,
			answer: []string{"A node1.local."}, extra: []string{"AAAA node1.local."}, unicast: true, legacy: true},
		{name: "other host", q: query(q("node2.local.", dns.TypeA)), src: mdnsSrc},
		{name: "other type", q: query(q("node1.local.", dns.TypeMX)), src: mdnsSrc},
		{name: "response ignored", q: func() *dns.Msg { m := query(q("node1.local.", dns.TypeA)); m.Response = true; return m }(), src: mdnsSrc},
		{name: "known answer", q: func() *dns.Msg {
			m := query(q("node1.local.", dns.TypeA))
			m.Answer = testZone(nil).addrRRs(dns.TypeA, rrOpts{})
			return m
		}(), src: mdnsSrc},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			z := testZone(tc.key)
			r := z.Respond(tc.q, tc.src, NewStamp(t0))
			if tc.answer == nil {
				if r != nil {
					t.Fatalf("Reply %v, want none", r.Msg)
				}
				return
			}
			if r == nil {
				t.Fatal("No reply")
			}
			m := roundTrip(t, r.Msg)
			if got := names(m.Answer); !slices.Equal(got, tc.answer) {
				t.Errorf("Answer %v, want %v", got, tc.answer)
			}
			if got := names(m.Extra); !slices.Equal(got, tc.extra) {
				t.Errorf("Extra %v, want %v", got, tc.extra)
			}
			if r.Unicast != tc.unicast || r.Shared != tc.shared {
				t.Errorf("Unicast %v shared %v, want %v %v", r.Unicast, r.Shared, tc.unicast, tc.shared)
			}
			if tc.legacy {
				if m.Id != tc.q.Id || len(m.Question) != 1 {
					t.Errorf("Legacy reply id %d questions %v: want id %d and the question", m.Id, m.Question, tc.q.Id)
				}
				for _, rr := range append(m.Answer, m.Extra...) {
					if rr.Header().Ttl > legacyTTL || rr.Header().Class&classFlush != 0 {
						t.Errorf("Legacy record %v: want TTL <= %d and no cache-flush bit", rr, legacyTTL)
					}
				}
			} else if m.Id != 0 || len(m.Question) != 0 {
				t.Errorf("mDNS reply id %d questions %v: want 0 and none", m.Id, m.Question)
			}
		})
	}
}

func TestConflicts(t *testing.T) {
	z := testZone(nil)
	self := roundTrip(t, z.Announcement(NewStamp(t0), false))
	if z.Conflicts(self) {
		t.Error("Our own announcement conflicts")
	}
	other := roundTrip(t, NewZone("node1.local.", "ocp4", z.Services, []netip.Addr{netip.MustParseAddr("198.51.100.99")}, nil).Announcement(Stamp{}, false))
	if !z.Conflicts(other) {
		t.Error("Another host's records for node1.local. do not conflict")
	}
	bye := roundTrip(t, NewZone("node1.local.", "ocp4", z.Services, []netip.Addr{netip.MustParseAddr("198.51.100.99")}, nil).Announcement(Stamp{}, true))
	if z.Conflicts(bye) {
		t.Error("A goodbye conflicts")
	}
	elsewhere := announce(t, "node2", "ocp4", []netip.Addr{netip.MustParseAddr("198.51.100.99")}, nil, t0, false)
	if z.Conflicts(elsewhere) {
		t.Error("Another name conflicts")
	}
}

func TestByeForUs(t *testing.T) {
	z := testZone(nil) // node1.local. with 198.51.100.11 and 2001:db8:1::11
	addr := func(s string) []netip.Addr { return []netip.Addr{netip.MustParseAddr(s)} }
	tests := []struct {
		name string
		msg  *dns.Msg
		want bool
	}{
		{"goodbye for our IPv4", NewZone("NODE1.local.", "ocp4", nil, addr("198.51.100.11"), nil).Announcement(Stamp{}, true), true},
		{"goodbye for our IPv6", NewZone("node1.local.", "ocp4", nil, addr("2001:db8:1::11"), nil).Announcement(Stamp{}, true), true},
		{"our own announcement", z.Announcement(NewStamp(t0), false), false},
		{"goodbye for an address we no longer hold", NewZone("node1.local.", "ocp4", nil, addr("198.51.100.99"), nil).Announcement(Stamp{}, true), false},
		{"goodbye for another host", NewZone("node2.local.", "ocp4", nil, addr("198.51.100.11"), nil).Announcement(Stamp{}, true), false},
		{"a query", z.Probe(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := z.ByeForUs(roundTrip(t, tc.msg)); got != tc.want {
				t.Errorf("ByeForUs = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestProbeConflict(t *testing.T) {
	low := NewZone("node1.local.", "ocp4", []Service{DefaultService("ocp4", "node1")}, []netip.Addr{netip.MustParseAddr("198.51.100.1")}, nil)
	high := NewZone("node1.local.", "ocp4", []Service{DefaultService("ocp4", "node1")}, []netip.Addr{netip.MustParseAddr("198.51.100.200")}, nil)
	if !low.ProbeConflict(roundTrip(t, high.Probe())) {
		t.Error("The lexicographically lower prober does not defer")
	}
	if high.ProbeConflict(roundTrip(t, low.Probe())) {
		t.Error("The higher prober defers")
	}
	if low.ProbeConflict(roundTrip(t, low.Probe())) {
		t.Error("Our own probe conflicts")
	}
}
