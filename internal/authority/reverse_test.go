package authority

import (
	"context"
	"net"
	"testing"

	"github.com/infradns/infradns/internal/records"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
)

// revMember is a member with an Authority and a reverse map, as the plugins
// are.
type revMember struct {
	member
	Authority
	rev    records.Reverse
	served int
}

func (m *revMember) HoldsReverseBelow(name string) bool { return m.rev.HasBelow(name) }

// TestReverseZonesChain: the reverse zones one member declares are shared
// at Link; only the last member answers a reverse name nobody serves (the
// others pass it on), and a name above another member's address is NODATA.
func TestReverseZonesChain(t *testing.T) {
	origins := []string{"ocp4.example.com."}
	first := &revMember{member: member{name: "first", origins: origins, ttl: 30}, rev: records.Reverse{}}
	first.Authority = New(origins, 30, fall.F{})
	first.SetReverseZones([]string{"8.b.d.0.1.0.0.2.ip6.arpa."}, "ocp4.example.com.", 30)
	first.rev.AddIP(net.ParseIP("2001:db8::5"), "api-int.ocp4.example.com.")
	last := &revMember{member: member{name: "last", origins: origins, ttl: 10}, rev: records.Reverse{}}
	last.Authority = New(origins, 10, fall.F{})
	last.rev.AddIP(net.ParseIP("2001:db8:1::7"), "master-0.ocp4.example.com.")
	members := []Member{first, last}
	first.LinkMembers(members, first)
	last.LinkMembers(members, last)

	ask := func(m *revMember, name string) (bool, *dns.Msg) {
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypePTR)
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		q, _ := NewQuery(req)
		ok, _, _ := m.ServeReverse(rec, req, q, m.rev, m.RecordTTL())
		return ok, rec.Msg
	}
	unknown, _ := dns.ReverseAddr("2001:db8::6")
	if ok, _ := ask(first, unknown); ok {
		t.Errorf("Expected the first member to pass an unknown address on")
	}
	ok, m := ask(last, unknown)
	if !ok || m.Rcode != dns.RcodeNameError || len(m.Ns) != 1 || m.Ns[0].Header().Name != "8.b.d.0.1.0.0.2.ip6.arpa." || m.Ns[0].Header().Ttl != 10 {
		t.Errorf("Expected NXDOMAIN with the reverse zone's SOA (TTL 10) from the last member, got %v %v", ok, m)
	}
	// 2001:db8:1::/48 holds the last member's node: an empty non-terminal.
	ent := "1.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa."
	if ok, m := ask(last, ent); !ok || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 {
		t.Errorf("Expected NODATA with the SOA above a served address, got %v %v", ok, m)
	}
	// Above the first member's address, asked of the last one.
	api, _ := dns.ReverseAddr("2001:db8::5")
	if ok, m := ask(last, api[4:]); !ok || m.Rcode != dns.RcodeSuccess || len(m.Ns) != 1 {
		t.Errorf("Expected NODATA above another member's address, got %v %v", ok, m)
	}
	outside, _ := dns.ReverseAddr("192.0.2.99")
	if ok, _ := ask(last, outside); ok {
		t.Errorf("Expected a name outside the reverse zones to go on")
	}
}

// served counts what a revMember answered through ServeOwnReverse.
func (m *revMember) ServeOwnReverse(_ context.Context, w dns.ResponseWriter, r *dns.Msg, q Query) (bool, int) {
	ok, rc, _ := m.ServeReverse(w, r, q, m.rev, m.RecordTTL())
	if ok {
		m.served++
	}
	return ok, rc
}

// TestHandReverse: the first member hands a reverse name to the later
// member that holds it, which answers (and counts) it; a miss is answered by
// the last member only in a declared reverse zone; a member whose own zone
// holds the name stops the hand (the chain decides); later members hand
// nothing.
func TestHandReverse(t *testing.T) {
	origins := []string{"ocp4.example.com."}
	mk := func(name string, origins []string) *revMember {
		m := &revMember{member: member{name: name, origins: origins, ttl: 30}, rev: records.Reverse{}}
		m.Authority = New(origins, 30, fall.F{})
		return m
	}
	first, middle, last := mk("first", origins), mk("middle", origins), mk("last", origins)
	first.SetReverseZones([]string{"2.0.192.in-addr.arpa."}, "ocp4.example.com.", 30)
	first.rev.AddIP(net.ParseIP("192.0.2.5"), "api-int.ocp4.example.com.")
	middle.rev.AddIP(net.ParseIP("192.0.2.10"), "ingress.apps.ocp4.example.com.")
	last.rev.AddIP(net.ParseIP("192.0.2.21"), "master-0.ocp4.example.com.")
	link := func(ms ...*revMember) {
		var members []Member
		for _, m := range ms {
			members = append(members, m)
		}
		for _, m := range ms {
			m.LinkMembers(members, m)
			m.served = 0
		}
	}
	link(first, middle, last)
	hand := func(from *revMember, addr string) (bool, *dns.Msg) {
		name, _ := dns.ReverseAddr(addr)
		req := new(dns.Msg)
		req.SetQuestion(name, dns.TypePTR)
		rec := dnstest.NewRecorder(&test.ResponseWriter{})
		q, _ := NewQuery(req)
		ok, _ := from.HandReverse(context.Background(), rec, req, q)
		return ok, rec.Msg
	}
	for _, tc := range []struct {
		addr   string
		ok     bool
		rcode  int
		ptr    string
		served [3]int // first, middle, last
	}{
		{"192.0.2.21", true, dns.RcodeSuccess, "master-0.ocp4.example.com.", [3]int{0, 0, 1}},
		{"192.0.2.10", true, dns.RcodeSuccess, "ingress.apps.ocp4.example.com.", [3]int{0, 1, 0}},
		// Nobody holds it, in a declared zone: the last member's NXDOMAIN.
		{"192.0.2.99", true, dns.RcodeNameError, "", [3]int{0, 0, 1}},
		// Outside the declared zones: nobody answers, the chain goes on.
		{"198.51.100.1", false, 0, "", [3]int{}},
	} {
		link(first, middle, last)
		ok, m := hand(first, tc.addr)
		if ok != tc.ok {
			t.Errorf("%s: handed %v, want %v", tc.addr, ok, tc.ok)
			continue
		}
		if got := [3]int{first.served, middle.served, last.served}; got != tc.served {
			t.Errorf("%s: answered by (first, middle, last) %v, want %v", tc.addr, got, tc.served)
		}
		if !ok {
			if m != nil {
				t.Errorf("%s: wrote %v, want nothing", tc.addr, m)
			}
			continue
		}
		if m.Rcode != tc.rcode {
			t.Errorf("%s: rcode %d, want %d", tc.addr, m.Rcode, tc.rcode)
		}
		if tc.ptr != "" && (len(m.Answer) != 1 || m.Answer[0].(*dns.PTR).Ptr != tc.ptr) {
			t.Errorf("%s: answer %v, want PTR %s", tc.addr, m.Answer, tc.ptr)
		}
	}
	if ok, _ := hand(middle, "192.0.2.21"); ok {
		t.Error("Expected a member that is not the first to hand nothing")
	}
	// A middle member serving the reverse zone as its own zone answers the
	// name itself in the chain: the first member must not skip it.
	owner := mk("owner", []string{"in-addr.arpa."})
	link(first, owner, last)
	if ok, _ := hand(first, "192.0.2.21"); ok || last.served != 0 {
		t.Errorf("Expected the hand to stop at a member whose zone holds the name, got %v (last answered %d)", ok, last.served)
	}
}
