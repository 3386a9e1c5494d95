package vrrp

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultDrain is how long a released VIP stays on lo (see Drainer).
// Clients still send to this node's MAC until the next holder's gratuitous
// ARP reaches them: its takeover waits the backup's skew time, up to one
// advert interval after the release (14 ms at 80 ms adverts, priority 210),
// and a connection started in that gap was lost (its SYN dropped, retried
// after 1 s) in 4 of 5 lab hand-overs. A second covers the gap and the
// stragglers whose caches missed the ARP, at every advert interval up to 1 s.
const DefaultDrain = time.Second

// DrainCopy says whether a VIP that left the VRRP interface may be kept on
// lo for the drain: only a host prefix of one of vips, and for IPv4 only
// while the interface does not answer ARP for addresses on other
// interfaces (arp_ignore >= 1, the effective value being the larger of
// "all" and the interface's): with Linux's default 0 the node would answer
// ARP for the copy beside the next holder (and the lab lost no request on
// hand-over with 0 anyway). IPv6 Neighbor Discovery answers only for
// addresses on the interface asked, so an IPv6 copy is always safe.
func DrainCopy(p netip.Prefix, vips []netip.Addr, arpIgnore int) bool {
	if !p.IsSingleIP() || !slices.Contains(vips, p.Addr().Unmap()) {
		return false
	}
	return p.Addr().Is6() && !p.Addr().Is4In6() || arpIgnore >= 1
}

// ParseSysctlInt reads a /proc/sys integer ("1\n"); -1 when unreadable.
func ParseSysctlInt(b []byte, err error) int {
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}

// StopHoldWait is how long a stopping process waits for keepalived to
// release the VIPs it still holds before it stops keeping drain copies
// (see LingerOver).
const StopHoldWait = 2 * time.Second

// LingerOver says whether a process that is stopping (kubelet replaces its
// pod) may stop its Drainer, waited after the stop began: kubelet stops
// the lbconfig and keepalived pods at the same time, and keepalived's
// release came 106 ms after lbconfig's SIGTERM in the upgrade test; a
// drainer gone by then leaves the released VIP no copy on lo, and a
// connection started before the next holder's gratuitous ARP is reset. So
// it waits while a VIP is held, up to holdWait (a keepalived that is not
// stopping keeps it, and nothing is released), and while a released VIP's
// copy drains, up to holdWait plus two drains (a release at the last
// moment).
func LingerOver(held, draining bool, waited, holdWait time.Duration) bool {
	switch {
	case draining:
		return waited >= holdWait+2*DefaultDrain
	case held:
		return waited >= holdWait
	}
	return true
}
