package records

import (
	"fmt"
	"net"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

func TestReverse(t *testing.T) {
	s, err := ParseSet([]string{"192.0.2.5", "2001:db8::5"})
	if err != nil {
		t.Fatal(err)
	}
	r := Reverse{}
	r.Add(s, "api-int.ocp4.example.com.")
	r.Add(s, "api-int.ocp4.example.com.") // once
	r.AddIP(net.ParseIP("192.0.2.5"), "api.ocp4.example.com.")
	r.Sort()
	for _, tc := range []struct {
		rev  string
		want []string
	}{
		{"5.2.0.192.in-addr.arpa.", []string{"api-int.ocp4.example.com.", "api.ocp4.example.com."}},
		{"5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.", []string{"api-int.ocp4.example.com."}},
		{"6.2.0.192.in-addr.arpa.", nil},
	} {
		if got := r[tc.rev]; !slices.Equal(got, tc.want) {
			t.Errorf("Reverse[%s] = %v, want %v", tc.rev, got, tc.want)
		}
		if !IsReverse(tc.rev) {
			t.Errorf("IsReverse(%s) = false", tc.rev)
		}
	}
	for _, n := range []string{"ocp4.example.com.", "in-addr.arpa.", "arpa.", "x.arpa."} {
		if IsReverse(n) {
			t.Errorf("IsReverse(%s) = true", n)
		}
	}
	rrs := PTRs("5.2.0.192.in-addr.arpa.", r["5.2.0.192.in-addr.arpa."], 30)
	if len(rrs) != 2 || rrs[0].(*dns.PTR).Ptr != "api-int.ocp4.example.com." || rrs[1].Header().Ttl != 30 {
		t.Errorf("PTRs = %v", rrs)
	}
	if one := PTRs("x.", []string{"y."}, 1); len(one) != 1 || one[0].(*dns.PTR).Ptr != "y." {
		t.Errorf("PTRs of one name = %v", one)
	}
}

func TestHasBelow(t *testing.T) {
	r := Reverse{}
	r.AddIP(net.ParseIP("192.0.2.5"), "api-int.ocp4.example.com.")
	r.AddIP(net.ParseIP("2001:db8::5"), "api-int.ocp4.example.com.")
	v6, _ := dns.ReverseAddr("2001:db8::5")
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"2.0.192.in-addr.arpa.", true},
		{"0.192.in-addr.arpa.", true},
		{"in-addr.arpa.", true},
		{"3.0.192.in-addr.arpa.", false},
		// Whole addresses: leaves, whether served or not.
		{"5.2.0.192.in-addr.arpa.", false},
		{"6.2.0.192.in-addr.arpa.", false},
		{"x.5.2.0.192.in-addr.arpa.", false},
		{v6, false},
		{v6[2:], true}, // one nibble short
		{"8.b.d.0.1.0.0.2.ip6.arpa.", true},
		{"9.b.d.0.1.0.0.2.ip6.arpa.", false},
		{"example.com.", false},
	} {
		if got := r.HasBelow(tc.name); got != tc.want {
			t.Errorf("HasBelow(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// BenchmarkHasBelowMiss: the reverse name of an address nobody serves, in a
// map of 500 dual-stack nodes (answered without a walk).
func BenchmarkHasBelowMiss(b *testing.B) {
	r := Reverse{}
	for i := range 500 {
		r.AddIP(net.IPv4(10, 128, byte(i/256), byte(i%256)), "node.")
		r.AddIP(net.ParseIP(fmt.Sprintf("fd00:128::%x", i+1)), "node.")
	}
	miss, _ := dns.ReverseAddr("10.128.200.7")
	for b.Loop() {
		if r.HasBelow(miss) {
			b.Fatal("below a whole address")
		}
	}
}
