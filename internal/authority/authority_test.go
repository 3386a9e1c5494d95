package authority

import (
	"context"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
)

func TestIsBelow(t *testing.T) {
	tests := []struct {
		name, parent string
		want         bool
	}{
		{"a.apps.example.com.", "apps.example.com.", true},
		{"a.b.apps.example.com.", "apps.example.com.", true},
		{"apps.example.com.", "apps.example.com.", false},
		{"xapps.example.com.", "apps.example.com.", false},
		{"example.com.", "apps.example.com.", false},
		{"com.", ".", true},
		{".", ".", false},
	}
	for _, tc := range tests {
		if got := IsBelow(tc.name, tc.parent); got != tc.want {
			t.Errorf("IsBelow(%q, %q) = %v, want %v", tc.name, tc.parent, got, tc.want)
		}
	}
}

// member is a minimal Member for linking tests.
type member struct {
	name    string
	origins []string
	fall    fall.F
	ttl     uint32
}

func (m *member) ServeDNS(context.Context, dns.ResponseWriter, *dns.Msg) (int, error) { return 0, nil }
func (m *member) Name() string                                                        { return m.name }
func (m *member) Origins() []string                                                   { return m.origins }
func (m *member) Fallthrough() fall.F                                                 { return m.fall }
func (m *member) RecordTTL() uint32                                                   { return m.ttl }

func TestLinkMembers(t *testing.T) {
	first := &member{name: "first", origins: []string{"ocp4.example.com."}, ttl: 30}
	second := &member{name: "second", origins: []string{"ocp4.example.com."}, ttl: 10, fall: fall.F{Zones: []string{"ocp4.example.com."}}}
	other := &member{name: "other", origins: []string{"example.net."}, ttl: 1}
	members := []Member{first, second, other}

	a := New(first.origins, first.ttl, first.fall)
	a.LinkMembers(members, first)
	if got := a.zones["ocp4.example.com."].ttl; got != 10 {
		t.Errorf("Expected the zone TTL to be the smallest of its members' (10), got %d", got)
	}
	if len(a.later) != 2 {
		t.Errorf("Expected two later origins, got %v", a.later)
	}

	b := New(second.origins, second.ttl, second.fall)
	b.LinkMembers(members, second)
	if len(b.later) != 1 || b.later[0] != "example.net." {
		t.Errorf("Expected only example.net. later, got %v", b.later)
	}

	// second is the last member for ocp4; the first member's lack of fallthrough
	// does not cancel second's.
	req := new(dns.Msg)
	req.SetQuestion("nothere.ocp4.example.com.", dns.TypeA)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	q, _ := NewQuery(req)
	rc, res, err := b.Miss(context.Background(), rec, req, q, "ocp4.example.com.", "second", test.NextHandler(dns.RcodeRefused, nil))
	if err != nil || res != Fallthrough || rc != dns.RcodeRefused {
		t.Errorf("Expected fallthrough to next, got rc %d res %s err %v", rc, res, err)
	}
}

func TestSOA(t *testing.T) {
	a := New([]string{"ocp4.example.com."}, 42, fall.F{})
	req := new(dns.Msg)
	req.SetQuestion("OCP4.example.com.", dns.TypeSOA)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	q, _ := NewQuery(req)
	ok, res := a.Own(rec, req, q, "ocp4.example.com.")
	if !ok || res != Answer || len(rec.Msg.Answer) != 1 {
		t.Fatalf("Expected an SOA answer, got ok=%v res=%s msg=%v", ok, res, rec.Msg)
	}
	soa := rec.Msg.Answer[0].(*dns.SOA)
	if soa.Minttl != 42 || soa.Hdr.Ttl != 42 || soa.Ns != "ns.dns.ocp4.example.com." || soa.Mbox != "hostmaster.ocp4.example.com." {
		t.Errorf("Unexpected SOA %v", soa)
	}
}
