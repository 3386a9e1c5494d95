package vrrp

import (
	"errors"
	"net/netip"
	"testing"
)

func TestDrainCopy(t *testing.T) {
	vips := []netip.Addr{netip.MustParseAddr("192.0.2.5"), netip.MustParseAddr("2001:db8::5")}
	tests := []struct {
		p         string
		arpIgnore int
		want      bool
	}{
		{"192.0.2.5/32", 1, true},
		{"192.0.2.5/32", 2, true},
		{"192.0.2.5/32", 0, false},  // the copy would answer ARP beside the next holder
		{"192.0.2.5/32", -1, false}, // unreadable: assume Linux's default
		{"192.0.2.5/24", 1, false},  // the node's own address in the VIP's place
		{"192.0.2.6/32", 1, false},  // not ours
		{"2001:db8::5/128", 0, true},
		{"2001:db8::5/64", 0, false},
	}
	for _, tt := range tests {
		if got := DrainCopy(netip.MustParsePrefix(tt.p), vips, tt.arpIgnore); got != tt.want {
			t.Errorf("DrainCopy(%s, arp_ignore %d) = %v, want %v", tt.p, tt.arpIgnore, got, tt.want)
		}
	}
}

func TestParseSysctlInt(t *testing.T) {
	for _, tt := range []struct {
		b    string
		err  error
		want int
	}{{"1\n", nil, 1}, {"0", nil, 0}, {"x", nil, -1}, {"", errors.New("no such file"), -1}} {
		if got := ParseSysctlInt([]byte(tt.b), tt.err); got != tt.want {
			t.Errorf("ParseSysctlInt(%q, %v) = %d, want %d", tt.b, tt.err, got, tt.want)
		}
	}
}
