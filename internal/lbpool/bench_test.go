package lbpool

import (
	"fmt"
	"net/netip"
	"testing"
)

// BenchmarkAllocate is one pass of the allocator over 1,000 Services that
// have their addresses and one new Service: what lbpools runs after each
// change (issue 29 asks for under 1 s per Service at this size).
func BenchmarkAllocate(b *testing.B) {
	cfg, err := Parse([]byte("pools:\n- name: default\n  addresses: [10.10.0.0/16, 2001:db8::/112]\n"))
	if err != nil {
		b.Fatal(err)
	}
	claims := make([]Claim, 0, 1001)
	ip := netip.MustParseAddr("10.10.0.1")
	for i := range 1000 {
		claims = append(claims, Claim{Namespace: fmt.Sprintf("ns-%d", i%50), Name: fmt.Sprintf("svc-%d", i),
			Families: []bool{false}, Ports: []Port{{"TCP", 443}}, Current: []netip.Addr{ip}})
		ip = ip.Next()
	}
	claims = append(claims, Claim{Namespace: "new", Name: "svc", Families: []bool{false, true}, Ports: []Port{{"TCP", 443}}})
	b.ReportAllocs()
	for b.Loop() {
		res := Allocate(cfg, claims)
		if len(res[1000].Addrs) != 2 {
			b.Fatalf("new Service: %+v", res[1000])
		}
	}
}
