package authority

import (
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
	rev records.Reverse
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
