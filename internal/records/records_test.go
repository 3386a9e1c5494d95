package records

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestParseSet(t *testing.T) {
	tests := []struct {
		args    []string
		want    string // "v4 v6"
		errText string
	}{
		{args: []string{"192.0.2.5", "2001:db8::5", "192.0.2.6"}, want: "[192.0.2.5 192.0.2.6] [2001:db8::5]"},
		{args: []string{"::ffff:192.0.2.5"}, want: "[192.0.2.5] []"},
		{args: []string{"2001:DB8::A"}, want: "[] [2001:db8::a]"},
		{args: []string{"192.0.2.5", "::ffff:192.0.2.5"}, errText: "duplicate address"},
		{args: []string{"192.0.2.256"}, errText: "invalid address"},
		{args: []string{"fe80::1%eth0"}, errText: "zoned"},
		{args: []string{"::"}, errText: "not a unicast"},
		{args: []string{"224.0.0.251"}, errText: "not a unicast"},
	}
	for _, tc := range tests {
		s, err := ParseSet(tc.args)
		if tc.errText != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("ParseSet(%v): expected error %q, got %v", tc.args, tc.errText, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSet(%v): %v", tc.args, err)
			continue
		}
		if got := fmt.Sprint(s.V4) + " " + fmt.Sprint(s.V6); got != tc.want {
			t.Errorf("ParseSet(%v) = %s, want %s", tc.args, got, tc.want)
		}
	}
}

func TestRRs(t *testing.T) {
	s, err := ParseSet([]string{"192.0.2.5", "192.0.2.6", "2001:db8::5"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		qtype uint16
		want  []string
	}{
		{dns.TypeA, []string{"Api.example.com.\t7\tIN\tA\t192.0.2.5", "Api.example.com.\t7\tIN\tA\t192.0.2.6"}},
		{dns.TypeAAAA, []string{"Api.example.com.\t7\tIN\tAAAA\t2001:db8::5"}},
		{dns.TypeMX, nil},
		// ANY once got nil (NODATA). RFC 8482 asks a name with data to
		// answer ANY with at least one of its RRsets: every record it has.
		{dns.TypeANY, []string{"Api.example.com.\t7\tIN\tA\t192.0.2.5", "Api.example.com.\t7\tIN\tA\t192.0.2.6", "Api.example.com.\t7\tIN\tAAAA\t2001:db8::5"}},
	}
	for _, tc := range tests {
		rrs := s.RRs("Api.example.com.", tc.qtype, 7)
		var got []string
		for _, rr := range rrs {
			got = append(got, rr.String())
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("RRs(%s) = %q, want %q", dns.TypeToString[tc.qtype], got, tc.want)
		}
	}
	v6, _ := ParseSet([]string{"2001:db8::6"})
	if rrs := v6.RRs("x.", dns.TypeANY, 1); len(rrs) != 1 || rrs[0].Header().Rrtype != dns.TypeAAAA {
		t.Errorf("Expected ANY of an IPv6-only set to be its AAAA, got %v", rrs)
	}
	if (Set{}).RRs("x.", dns.TypeA, 1) != nil || (Set{}).RRs("x.", dns.TypeANY, 1) != nil || !(Set{}).Empty() {
		t.Error("Expected an empty set to have no records")
	}
}

func TestSetOf(t *testing.T) {
	p := netip.MustParseAddr
	for _, tc := range []struct {
		name   string
		in     []netip.Addr
		v4, v6 string
	}{
		{"empty", nil, "[]", "[]"},
		{"sorted per family, once each", []netip.Addr{p("198.51.100.12"), p("2001:db8::2"), p("198.51.100.11"), p("198.51.100.12"), p("2001:db8::1")},
			"[198.51.100.11 198.51.100.12]", "[2001:db8::1 2001:db8::2]"},
		{"mapped is IPv4", []netip.Addr{p("::ffff:198.51.100.11")}, "[198.51.100.11]", "[]"},
		{"unusable dropped", []netip.Addr{{}, p("0.0.0.0"), p("::"), p("224.0.0.251"), p("fe80::1%eth0"), p("fe80::1")}, "[]", "[fe80::1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := SetOf(tc.in)
			if got := fmt.Sprint(s.V4); got != tc.v4 {
				t.Errorf("V4 %s, want %s", got, tc.v4)
			}
			if got := fmt.Sprint(s.V6); got != tc.v6 {
				t.Errorf("V6 %s, want %s", got, tc.v6)
			}
		})
	}
}

func TestAddrs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "[]"},
		{[]string{"2001:db8::5", "192.0.2.6", "192.0.2.5"}, "[192.0.2.6 192.0.2.5 2001:db8::5]"},
		{[]string{"::ffff:192.0.2.5"}, "[192.0.2.5]"},
	} {
		s, err := ParseSet(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(s.Addrs()); got != tc.want {
			t.Errorf("Addrs of %v = %s, want %s", tc.args, got, tc.want)
		}
		if a := s.Addrs(); len(a) > 0 && !a[0].Is4() && len(s.V4) > 0 {
			t.Errorf("Addrs of %v: IPv4 not first", tc.args)
		}
	}
}
