package records

import (
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
