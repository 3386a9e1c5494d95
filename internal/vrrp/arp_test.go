package vrrp

import (
	"net/netip"
	"testing"
	"time"
)

func TestParseARP(t *testing.T) {
	mac := MAC{2, 0, 0, 0, 0, 7}
	req := ARPRequestBytes(mac, netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("192.0.2.5"))
	reply := append([]byte(nil), req...)
	reply[7] = arpReply
	garp := ARPRequestBytes(mac, netip.MustParseAddr("192.0.2.5"), netip.MustParseAddr("192.0.2.5"))
	tests := []struct {
		name string
		b    []byte
		ok   bool
		want ARPPacket
	}{
		{"request", req, true, ARPPacket{Op: 1, SenderMAC: mac, SenderIP: netip.MustParseAddr("198.51.100.7"), TargetIP: netip.MustParseAddr("192.0.2.5")}},
		{"reply", reply, true, ARPPacket{Op: 2, SenderMAC: mac, SenderIP: netip.MustParseAddr("198.51.100.7"), TargetIP: netip.MustParseAddr("192.0.2.5")}},
		{"gratuitous", garp, true, ARPPacket{Op: 1, SenderMAC: mac, SenderIP: netip.MustParseAddr("192.0.2.5"), TargetIP: netip.MustParseAddr("192.0.2.5"), GratuitousLike: true}},
		{"short", req[:27], false, ARPPacket{}},
		{"empty", nil, false, ARPPacket{}},
		{"not ethernet", append([]byte{0, 6}, req[2:]...), false, ARPPacket{}},
		{"not ipv4", append(append([]byte(nil), req[:2]...), append([]byte{0x86, 0xdd}, req[4:]...)...), false, ARPPacket{}},
		{"bad lengths", append(append([]byte(nil), req[:4]...), append([]byte{6, 16}, req[6:]...)...), false, ARPPacket{}},
		{"rarp op", append(append([]byte(nil), req[:6]...), append([]byte{0, 3}, req[8:]...)...), false, ARPPacket{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseARP(tt.b)
			if ok != tt.ok || got != tt.want {
				t.Errorf("ParseARP = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzParseARP(f *testing.F) {
	f.Add(ARPRequestBytes(MAC{2}, netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("192.0.2.5")))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, ok := ParseARP(b)
		if ok && (!p.SenderIP.Is4() || !p.TargetIP.Is4() || len(b) < arpLen) {
			t.Fatalf("accepted %x as %+v", b, p)
		}
	})
}

func TestNeighborTable(t *testing.T) {
	var tb NeighborTable
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	vip := netip.MustParseAddr("192.0.2.5")
	a, b := MAC{2, 0, 0, 0, 0, 1}, MAC{2, 0, 0, 0, 0, 2}
	tb.Record(vip, a, t0)
	tb.Record(vip, b, t0.Add(time.Second))
	tb.Record(netip.IPv4Unspecified(), a, t0) // a probe's sender: nothing
	if got := tb.Since(vip, t0.Add(500*time.Millisecond)); len(got) != 1 || got[0] != b {
		t.Errorf("Since = %v, want [%s]", got, b)
	}
	if got := tb.Since(vip, t0.Add(-time.Second)); len(got) != 2 {
		t.Errorf("Since = %v, want both", got)
	}
	if n := tb.Len(); n != 2 {
		t.Errorf("Len = %d, want 2", n)
	}
	// A flood of senders stays bounded, and old entries make room.
	for i := range 2 * maxNeighbors {
		tb.Record(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), a, t0.Add(2*time.Second))
	}
	if n := tb.Len(); n != maxNeighbors {
		t.Errorf("after a flood: %d entries, want the bound %d", n, maxNeighbors)
	}
	tb.Record(vip, a, t0.Add(time.Minute))
	if got := tb.Since(vip, t0.Add(59*time.Second)); len(got) != 1 {
		t.Errorf("after expiry the table takes new claims: %v", got)
	}
	// Watching only the VIP: the flood's addresses are gone and cost nothing.
	tb.Watch([]netip.Addr{vip})
	tb.Record(netip.MustParseAddr("10.9.9.9"), a, t0.Add(time.Minute))
	if n := tb.Len(); n != 2 {
		t.Errorf("watching one address: %d entries, want its 2 MACs", n)
	}
}
