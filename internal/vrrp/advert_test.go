package vrrp

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"
)

var (
	src4 = netip.MustParseAddr("198.51.100.11")
	src6 = netip.MustParseAddr("fe80::11")
)

func TestAdvertRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		src, dst netip.Addr
		a        Advert
	}{
		{"v3 ipv4", src4, GroupV4, Advert{Version: 3, VRID: 14, Priority: 140, Interval: 100 * time.Millisecond,
			Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.5")}}},
		{"v3 ipv6 two addresses", src6, GroupV6, Advert{Version: 3, VRID: 214, Priority: 40, Interval: 50 * time.Millisecond,
			Addresses: []netip.Addr{netip.MustParseAddr("2001:db8::5"), netip.MustParseAddr("2001:db8::6")}}},
		{"v2 ipv4 simple auth", src4, GroupV4, Advert{Version: 2, VRID: 1, Priority: 255, Interval: time.Second, AuthType: 1,
			Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")}}},
		{"v3 unicast no addresses", src4, netip.MustParseAddr("198.51.100.12"), Advert{Version: 3, VRID: 7, Priority: 0,
			Interval: 4095 * 10 * time.Millisecond, Addresses: []netip.Addr{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.a.Marshal(tc.src, tc.dst)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseAdvert(b, tc.src.Is6(), tc.src, tc.dst)
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != tc.a.Version || got.VRID != tc.a.VRID || got.Priority != tc.a.Priority ||
				got.Interval != tc.a.Interval || got.AuthType != tc.a.AuthType || !slices.Equal(got.Addresses, tc.a.Addresses) {
				t.Errorf("Round trip = %+v, want %+v", got, tc.a)
			}
			// One flipped bit anywhere is caught by the checksum (or the header checks).
			for i := range b {
				c := slices.Clone(b)
				c[i] ^= 0x10
				if _, err := ParseAdvert(c, tc.src.Is6(), tc.src, tc.dst); err == nil {
					t.Errorf("Byte %d flipped: no error", i)
				}
			}
		})
	}
}

// TestParseKeepalivedV3 decodes a datagram laid out by hand from RFC 5798
// §5.1 (not by Marshal): what keepalived sends for vrrp_version 3,
// advert_int 0.1 and one IPv4 VIP.
func TestParseKeepalivedV3(t *testing.T) {
	pkt := []byte{
		// IPv4 header: TTL 255, protocol 112, 198.51.100.11 → 224.0.0.18.
		0x45, 0xc0, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0xff, 0x70, 0x00, 0x00,
		198, 51, 100, 11, 224, 0, 0, 18,
		// VRRP v3 advertisement: VRID 14, priority 100, 1 address, 10 cs.
		0x31, 0x0e, 0x64, 0x01, 0x00, 0x0a, 0x00, 0x00, 192, 0, 2, 5,
	}
	// Fill in the checksum as a real sender would, then parse the datagram.
	a := Advert{Version: 3, VRID: 14, Priority: 100, Interval: 100 * time.Millisecond,
		Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.5")}}
	b, err := a.Marshal(src4, GroupV4)
	if err != nil {
		t.Fatal(err)
	}
	copy(pkt[26:28], b[6:8])
	src, dst, got, err := ParsePacket(pkt)
	if err != nil {
		t.Fatal(err)
	}
	if src != src4 || dst != GroupV4 || got.VRID != 14 || got.Priority != 100 || got.Interval != 100*time.Millisecond {
		t.Errorf("Got %s → %s %+v", src, dst, got)
	}
	pkt[8] = 64 // routed from elsewhere: not on the link
	if _, _, _, err := ParsePacket(pkt); !errors.Is(err, ErrNotVRRP) {
		t.Errorf("TTL 64: err = %v, want ErrNotVRRP", err)
	}
}

func TestParseAdvertErrors(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"header only, one address", []byte{0x31, 1, 100, 1, 0, 10, 0, 0}, ErrShort},
		{"version 4", []byte{0x41, 1, 100, 0, 0, 10, 0, 0}, ErrVersion},
		{"type 2", []byte{0x32, 1, 100, 0, 0, 10, 0, 0}, ErrType},
		{"v2 without auth data", []byte{0x21, 1, 100, 1, 0, 1, 0, 0, 192, 0, 2, 1}, ErrShort},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseAdvert(tc.b, false, netip.Addr{}, netip.Addr{}); !errors.Is(err, tc.want) {
				t.Errorf("Err = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestChecksumV3WithoutPseudoHeader accepts the checksum form of
// keepalived's vrrp_v3_checksum_as_v2 for IPv4.
func TestChecksumV3WithoutPseudoHeader(t *testing.T) {
	a := Advert{Version: 3, VRID: 9, Priority: 100, Interval: time.Second,
		Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.9")}}
	b, err := a.Marshal(src4, GroupV4)
	if err != nil {
		t.Fatal(err)
	}
	b[6], b[7] = 0, 0
	c := checksum(b, 3, src4, GroupV4, false)
	b[6], b[7] = byte(c>>8), byte(c)
	if _, err := ParseAdvert(b, false, src4, GroupV4); err != nil {
		t.Errorf("Checksum without pseudo-header rejected: %v", err)
	}
}

func FuzzParseAdvert(f *testing.F) {
	for _, a := range []Advert{
		{Version: 3, VRID: 14, Priority: 100, Interval: 100 * time.Millisecond, Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.5")}},
		{Version: 2, VRID: 1, Priority: 255, Interval: time.Second, AuthType: 1, Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")}},
	} {
		b, _ := a.Marshal(src4, GroupV4)
		f.Add(b, false)
	}
	b, _ := (&Advert{Version: 3, VRID: 2, Addresses: []netip.Addr{netip.MustParseAddr("2001:db8::5")}}).Marshal(src6, GroupV6)
	f.Add(b, true)
	f.Fuzz(func(t *testing.T, b []byte, v6 bool) {
		a, err := ParseAdvert(b, v6, netip.Addr{}, netip.Addr{})
		if err != nil {
			return
		}
		if len(a.Addresses) != int(b[3]) {
			t.Fatalf("%d addresses decoded, header says %d", len(a.Addresses), b[3])
		}
		for _, ad := range a.Addresses {
			if ad.Is6() != v6 {
				t.Fatalf("Address %s of the wrong family", ad)
			}
		}
		src, dst := src4, GroupV4
		if v6 {
			src, dst = src6, GroupV6
		}
		// What parses re-encodes to something that parses to the same advert.
		out, err := a.Marshal(src, dst)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseAdvert(out, v6, src, dst)
		if err != nil {
			t.Fatal(err)
		}
		if again.VRID != a.VRID || again.Priority != a.Priority || !slices.Equal(again.Addresses, a.Addresses) {
			t.Fatalf("Re-encoded %+v parses as %+v", a, again)
		}
	})
}
