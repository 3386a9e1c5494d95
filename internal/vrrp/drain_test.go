package vrrp

import (
	"errors"
	"net/netip"
	"testing"
	"time"
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

func TestLingerOver(t *testing.T) {
	const hold = StopHoldWait
	for _, tt := range []struct {
		name           string
		held, draining bool
		waited         time.Duration
		want           bool
	}{
		{"holds nothing: stop at once", false, false, 0, true},
		{"holds a VIP: keepalived may release it", true, false, 0, false},
		{"holds a VIP just before the bound", true, false, hold - time.Millisecond, false},
		{"still holds at the bound: keepalived stays", true, false, hold, true},
		{"released: its copy drains", false, true, 0, false},
		{"released at the last moment", false, true, hold + DefaultDrain, false},
		{"drain bound", false, true, hold + 2*DefaultDrain, true},
		{"one held, one draining past the hold bound", true, true, hold, false},
	} {
		if got := LingerOver(tt.held, tt.draining, tt.waited, hold); got != tt.want {
			t.Errorf("%s: LingerOver(held %v, draining %v, %v) = %v, want %v", tt.name, tt.held, tt.draining, tt.waited, got, tt.want)
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
