package lbconfig

import (
	"net/netip"
	"slices"
	"testing"
)

func TestHeldVIPs(t *testing.T) {
	v4, v6 := netip.MustParseAddr("198.51.100.100"), netip.MustParseAddr("2001:db8:1::100")
	node := netip.MustParsePrefix("198.51.100.12/24")
	for _, tc := range []struct {
		name    string
		present []netip.Prefix
		want    []netip.Addr
	}{
		{"neither", []netip.Prefix{node}, nil},
		// The IPv4 instance took over first: the IPv6 VIP is not ours yet.
		{"IPv4 only", []netip.Prefix{node, netip.PrefixFrom(v4, 32)}, []netip.Addr{v4}},
		{"IPv6 only", []netip.Prefix{netip.PrefixFrom(v6, 128)}, []netip.Addr{v6}},
		{"both", []netip.Prefix{netip.PrefixFrom(v6, 128), node, netip.PrefixFrom(v4, 32)}, []netip.Addr{v4, v6}},
		// The node's own subnet holds the VIP's address space, not the VIP.
		{"subnet only", []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := heldVIPs(tc.present, []netip.Addr{v4, v6})
			if !slices.Equal(got, tc.want) {
				t.Errorf("heldVIPs = %v, want %v", got, tc.want)
			}
			if held := holdsAny(tc.present, []netip.Addr{v4, v6}); held != (len(tc.want) > 0) {
				t.Errorf("holdsAny = %v with %v held", held, tc.want)
			}
		})
	}
}
