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

// TestNDPConnAnnounced: an unsolicited Neighbor Advertisement from another
// host reaches the Announced hook; the kernel's solicited answers do not.
func TestNDPConnAnnounced(t *testing.T) {
	holder, asker := netnstest.Pair(t, "ndpa")
	vip := netip.MustParseAddr("2001:db8::5")
	netnstest.Run(t, "-n", holder, "addr", "add", vip.String()+"/128", "dev", "eth0", "nodad")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got announcements
	var table NeighborTable
	c, runErr := runIn(t, ctx, asker, func() (*NDPConn, error) {
		c, err := OpenNDP("eth0", &table)
		if err == nil {
			c.Announced = got.add
		}
		return c, err
	})
	h, holderErr := runIn(t, ctx, holder, func() (*NDPConn, error) { return OpenNDP("eth0", &NeighborTable{}) })
	var holderMAC MAC
	copy(holderMAC[:], macOf(t, holder))

	// Sends fail until the link has its link-local address: asked again.
	start := time.Now()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && len(table.Since(vip, start)) == 0; {
		_ = c.Ask(vip)
		time.Sleep(100 * time.Millisecond)
	}
	if len(table.Since(vip, start)) == 0 {
		t.Fatal("the holder's kernel never answered")
	}
	if a := got.list(); len(a) != 0 {
		t.Fatalf("a kernel's answer counted as an announcement: %v", a)
	}
	want := []string{vip.String() + " " + holderMAC.String()}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && len(got.list()) == 0; {
		_ = h.Announce(vip)
		time.Sleep(100 * time.Millisecond)
	}
	if a := got.list(); len(a) == 0 || !slices.Equal(slices.Compact(a), want) {
		t.Errorf("announcements %v, want %v", a, want)
	}
	cancel()
	for _, ch := range []<-chan error{runErr, holderErr} {
		if err := <-ch; err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
}
