package vrrp

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/lb/netnstest"
)

// TestNDPConnAnswers runs a real keepalived holding an IPv6 VIP in one
// namespace made for the test and an NDPConn in another on the same link:
// the VIP (from keepalived's own advertisements or our solicitation) and
// the holder's node address (solicited) land in the table under the
// holder's MAC.
func TestNDPConnAnswers(t *testing.T) {
	holder, asker := netnstest.Pair(t, "ndp")
	vip := netip.MustParseAddr("2001:db8::5")
	peer := netip.MustParseAddr("2001:db8:1::11")
	absent := netip.MustParseAddr("2001:db8:1::99")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	startKeepalived(t, ctx, holder, `global_defs {
    vrrp_version 3
}
vrrp_instance ndp_v6 {
    state MASTER
    interface eth0
    virtual_router_id 15
    priority 250
    advert_int 0.1
    virtual_ipaddress {
        2001:db8::5/128
    }
}
`, "--vrrp")
	var table NeighborTable
	c, runErr := runIn(t, ctx, asker, func() (*NDPConn, error) { return OpenNDP("eth0", &table) })
	var holderMAC MAC
	copy(holderMAC[:], macOf(t, holder))

	start := time.Now()
	// Sends fail with "network is unreachable" until the new link has its
	// link-local address and multicast route; lbconfig asks again at its
	// next check, and so does this loop.
	var sendErr error
	sent := 0
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && (len(table.Since(vip, start)) == 0 || len(table.Since(peer, start)) == 0) {
		for _, a := range []netip.Addr{vip, peer, absent} {
			if err := c.Ask(a); err != nil {
				sendErr = err
			} else {
				sent++
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if sent == 0 {
		t.Fatalf("no Neighbor Solicitation could be sent: %v", sendErr)
	}
	for _, a := range []netip.Addr{vip, peer} {
		if got := table.Since(a, start); !slices.Equal(got, []MAC{holderMAC}) {
			t.Errorf("who has %s: %v, want [%s]", a, got, holderMAC)
		}
	}
	if got := table.Since(absent, start); len(got) != 0 {
		t.Errorf("who has %s (nobody): %v", absent, got)
	}
	if err := c.Announce(vip); err != nil {
		t.Errorf("Announce: %v", err)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
