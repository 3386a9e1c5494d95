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
		// An escaped dot is part of a label, not a boundary (issue 26):
		// x\.apps is one label directly below example.com.
		{`x\.apps.example.com.`, "apps.example.com.", false},
		{`x\.apps.example.com.`, "example.com.", true},
		{`x\.example.com.`, "example.com.", false},
		{`x\.example.com.`, "com.", true},
		{`api-int\.ocp4.example.com.`, "ocp4.example.com.", false},
		{`a.b\.apps.example.com.`, "apps.example.com.", false},
		// An escaped backslash before a real dot: the dot is a boundary.
		{`x\\.apps.example.com.`, "apps.example.com.", true},
		{`x\\\.apps.example.com.`, "apps.example.com.", false},
		{`\.apps.example.com.`, "apps.example.com.", false},
		{".apps.example.com.", "apps.example.com.", false},
	}
	for _, tc := range tests {
		if got := IsBelow(tc.name, tc.parent); got != tc.want {
			t.Errorf("IsBelow(%q, %q) = %v, want %v", tc.name, tc.parent, got, tc.want)
		}
		if tc.name == ".apps.example.com." {
			continue // not a name: miekg/dns has no answer to compare with
		}
		// The reference: miekg/dns's label-wise comparison.
		if ref := dns.IsSubDomain(tc.parent, tc.name) && !dnsEqual(tc.name, tc.parent); ref != tc.want {
			t.Errorf("dns.IsSubDomain(%q, %q) = %v: the table disagrees with miekg/dns", tc.parent, tc.name, ref)
		}
	}
}

// TestIsBelowAgreesWithMiekg compares IsBelow with dns.IsSubDomain over
// names built from labels that hold escaped dots and backslashes.
func TestIsBelowAgreesWithMiekg(t *testing.T) {
	labels := []string{"a", "apps", `x\.apps`, `x\\`, `\.`, `\\\.`, "example", `y\.example`, "com", `\046`, "*"}
	var names []string
	var build func(suffix string, depth int)
	build = func(suffix string, depth int) {
		names = append(names, suffix)
		if depth == 0 {
			return
		}
		for _, l := range labels {
			if suffix == "." {
				build(l+".", depth-1)
			} else {
				build(l+"."+suffix, depth-1)
			}
		}
	}
	build(".", 3)
	for _, n := range names {
		for _, p := range names {
			want := dns.IsSubDomain(p, n) && dns.CountLabel(n) > dns.CountLabel(p)
			if got := IsBelow(n, p); got != want {
				t.Errorf("IsBelow(%q, %q) = %v, dns.IsSubDomain says %v", n, p, got, want)
			}
		}
	}
}

func dnsEqual(a, b string) bool {
	return dns.CountLabel(a) == dns.CountLabel(b) && dns.IsSubDomain(a, b)
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
