package vrrp

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// ipv6Packet builds a fixed header and payload for the parser's tests.
func ipv6Packet(next, hops byte, src netip.Addr, payload []byte) []byte {
	b := make([]byte, ipv6HdrLen+len(payload))
	b[0] = 6 << 4
	binary.BigEndian.PutUint16(b[4:6], uint16(len(payload)))
	b[6], b[7] = next, hops
	s := src.As16()
	copy(b[8:24], s[:])
	copy(b[ipv6HdrLen:], payload)
	return b
}

func TestParseIPv6(t *testing.T) {
	ll := netip.MustParseAddr("fe80::1d:ff:fe00:b")
	vip := netip.MustParseAddr("2001:db8::5")
	mac := MAC{2, 0x1d, 0, 0, 0, 0xb}
	na := UnsolicitedAdvertisement(vip, mac)
	ns := NeighborSolicitation(vip, mac)
	// A kernel's answer to a solicitation: the solicited flag set.
	answer := append([]byte(nil), na...)
	binary.BigEndian.PutUint32(answer[4:8], naFlagSolicited|naFlagOverride)
	tests := []struct {
		name string
		b    []byte
		ok   bool
		want IPv6Packet
	}{
		{"advertisement", ipv6Packet(58, 255, ll, na), true, IPv6Packet{Source: ll, Target: vip}},
		{"solicited advertisement", ipv6Packet(58, 255, ll, answer), true, IPv6Packet{Source: ll, Target: vip, Solicited: true}},
		{"vrrp advert (the Reader's)", ipv6Packet(112, 255, ll, make([]byte, 24)), false, IPv6Packet{}},
		{"advertisement routed (hop limit 254)", ipv6Packet(58, 254, ll, na), false, IPv6Packet{}},
		{"solicitation", ipv6Packet(58, 255, ll, ns), false, IPv6Packet{}},
		{"short advertisement", ipv6Packet(58, 255, ll, na[:23]), false, IPv6Packet{}},
		{"multicast target", ipv6Packet(58, 255, ll, UnsolicitedAdvertisement(netip.MustParseAddr("ff02::1"), mac)), false, IPv6Packet{}},
		{"udp", ipv6Packet(17, 64, ll, make([]byte, 8)), false, IPv6Packet{}},
		{"short header", ipv6Packet(112, 255, ll, nil)[:39], false, IPv6Packet{}},
		{"ipv4", append([]byte{0x45}, make([]byte, 60)...), false, IPv6Packet{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseIPv6(tt.b)
			if ok != tt.ok || got != tt.want {
				t.Errorf("ParseIPv6 = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzParseIPv6(f *testing.F) {
	f.Add(ipv6Packet(58, 255, netip.MustParseAddr("fe80::1"), UnsolicitedAdvertisement(netip.MustParseAddr("2001:db8::5"), MAC{2})))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, ok := ParseIPv6(b)
		if ok && (!p.Source.Is6() || !p.Target.Is6()) {
			t.Fatalf("accepted %x as %+v", b, p)
		}
	})
}

func TestSolicitedNode(t *testing.T) {
	if got := SolicitedNode(netip.MustParseAddr("2001:db8::12:3456:789a")); got != netip.MustParseAddr("ff02::1:ff56:789a") {
		t.Errorf("SolicitedNode = %s", got)
	}
}
