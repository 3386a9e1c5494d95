package lbconfig

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/infradns/infradns/internal/cluster"
)

// TestRememberedStandby: a reloaded instance starts from the verdicts the
// one before it had, for the groups that still have a check.
func TestRememberedStandby(t *testing.T) {
	// Addresses of this test only: the memory is the process's.
	api6, ing6, ing4 := netip.MustParseAddr("2001:db8:5eed::5"), netip.MustParseAddr("2001:db8:5eed::10"), netip.MustParseAddr("192.0.2.210")
	spec := func(ingressCheck string) *cluster.Model {
		s := cluster.Spec{Name: "ocp4", Node: "master-0", Interface: "eth0",
			APIVIPs:     []netip.Addr{netip.MustParseAddr("192.0.2.205"), api6},
			IngressVIPs: []netip.Addr{ing4, ing6}}
		if ingressCheck != "" {
			s.Health = map[string]string{cluster.CheckIngress: ingressCheck}
		}
		m, err := cluster.New(s)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	rememberStandby([]netip.Addr{api6}, true)
	rememberStandby([]netip.Addr{ing4, ing6}, true)
	if got := rememberedStandby(spec("")); !slices.Contains(got, api6) || !slices.Contains(got, ing6) {
		t.Fatalf("after two healthy verdicts: %v", got)
	}
	rememberStandby([]netip.Addr{api6}, false)
	if got := rememberedStandby(spec("")); slices.Contains(got, api6) || !slices.Contains(got, ing6) {
		t.Fatalf("after the api check failed: %v, want the ingress VIPs only", got)
	}
	if got := rememberedStandby(spec(cluster.HealthNone)); slices.Contains(got, ing6) {
		t.Fatalf("the ingress check is none now: %v, want no ingress VIP", got)
	}
}
