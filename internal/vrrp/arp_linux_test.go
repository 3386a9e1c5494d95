package vrrp

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/lb/netnstest"
)

// TestARPConnAnswers asks a real Linux neighbour, in a namespace made for
// the test, who has its own address and a VIP on its interface, as an ARP
// request from a node and as an RFC 5227 probe: each answer lands in the
// table under the neighbour's MAC, and nothing else does.
func TestARPConnAnswers(t *testing.T) {
	holder, asker := netnstest.Pair(t, "arp")
	vip := netip.MustParseAddr("192.0.2.5")
	netnstest.Run(t, "-n", holder, "addr", "add", vip.String()+"/32", "dev", "eth0")
	self := netip.MustParseAddr("198.51.100.12")
	peer := netip.MustParseAddr("198.51.100.11")
	absent := netip.MustParseAddr("198.51.100.99")

	var table NeighborTable
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, runErr := runIn(t, ctx, asker, func() (*ARPConn, error) { return OpenARP("eth0", &table) })
	var holderMAC MAC
	copy(holderMAC[:], macOf(t, holder))

	start := time.Now()
	for _, q := range []struct{ sender, target netip.Addr }{
		{self, vip}, {netip.IPv4Unspecified(), vip}, {self, peer}, {self, absent},
	} {
		if err := c.Ask(q.sender, q.target); err != nil {
			t.Fatalf("Ask(%s, %s): %v", q.sender, q.target, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && (len(table.Since(vip, start)) == 0 || len(table.Since(peer, start)) == 0) {
		time.Sleep(10 * time.Millisecond)
	}
	for _, ip := range []netip.Addr{vip, peer} {
		if got := table.Since(ip, start); !slices.Equal(got, []MAC{holderMAC}) {
			t.Errorf("who has %s: %v, want [%s]", ip, got, holderMAC)
		}
	}
	if got := table.Since(absent, start); len(got) != 0 {
		t.Errorf("who has %s (nobody): %v", absent, got)
	}
	if got := table.Since(self, start); len(got) != 0 {
		t.Errorf("our own requests were recorded: %v", got)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func macOf(t *testing.T, ns string) net.HardwareAddr {
	t.Helper()
	done := make(chan net.HardwareAddr, 1)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netnstest.Enter(ns); err != nil {
			errc <- err
			return
		}
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			errc <- err
			return
		}
		done <- ifi.HardwareAddr
	}()
	select {
	case hw := <-done:
		return hw
	case err := <-errc:
		t.Fatal(err)
	}
	return nil
}

// TestARPConnSurvivesLinkFlap: the interface going down and up again (a
// cable, a switch port, `ip link set down`) must not end the reader: the
// socket reports ENETDOWN once, and answers after the link is back are
// recorded. It ended the split-brain check for good before.
func TestARPConnSurvivesLinkFlap(t *testing.T) {
	holder, asker := netnstest.Pair(t, "arpflap")
	peer := netip.MustParseAddr("198.51.100.11")
	self := netip.MustParseAddr("198.51.100.12")
	var table NeighborTable
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, runErr := runIn(t, ctx, asker, func() (*ARPConn, error) { return OpenARP("eth0", &table) })

	netnstest.Run(t, "-n", asker, "link", "set", "eth0", "down")
	time.Sleep(200 * time.Millisecond)
	netnstest.Run(t, "-n", asker, "link", "set", "eth0", "up")
	select {
	case err := <-runErr:
		t.Fatalf("Run ended with the link flap: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	var holderMAC MAC
	copy(holderMAC[:], macOf(t, holder))
	start := time.Now()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && len(table.Since(peer, start)) == 0 {
		_ = c.Ask(self, peer) // fails while the link comes back (no carrier yet)
		time.Sleep(100 * time.Millisecond)
	}
	if got := table.Since(peer, start); !slices.Equal(got, []MAC{holderMAC}) {
		t.Errorf("who has %s after the flap: %v, want [%s]", peer, got, holderMAC)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// announcements collects what a conn's Announced hook was told.
type announcements struct {
	mu  sync.Mutex
	got []string
}

func (a *announcements) add(ip netip.Addr, mac MAC) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, ip.String()+" "+mac.String())
}

func (a *announcements) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.got)
}

// TestARPConnAnnounced: a gratuitous ARP from another host reaches the
// Announced hook with its MAC; the kernel's answers to our requests (the
// same host, the same VIP) do not: a paused node's kernel answers too.
func TestARPConnAnnounced(t *testing.T) {
	holder, asker := netnstest.Pair(t, "arpa")
	vip := netip.MustParseAddr("192.0.2.5")
	netnstest.Run(t, "-n", holder, "addr", "add", vip.String()+"/32", "dev", "eth0")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got announcements
	var table NeighborTable
	c, runErr := runIn(t, ctx, asker, func() (*ARPConn, error) {
		c, err := OpenARP("eth0", &table)
		if err == nil {
			c.Announced = got.add
		}
		return c, err
	})
	h, holderErr := runIn(t, ctx, holder, func() (*ARPConn, error) { return OpenARP("eth0", &NeighborTable{}) })
	var holderMAC MAC
	copy(holderMAC[:], macOf(t, holder))

	start := time.Now()
	if err := c.Ask(netip.MustParseAddr("198.51.100.12"), vip); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && len(table.Since(vip, start)) == 0; {
		time.Sleep(10 * time.Millisecond)
	}
	if len(table.Since(vip, start)) == 0 {
		t.Fatal("the holder's kernel never answered")
	}
	if a := got.list(); len(a) != 0 {
		t.Fatalf("a kernel's answer counted as an announcement: %v", a)
	}
	if err := h.Announce(vip); err != nil {
		t.Fatal(err)
	}
	want := []string{vip.String() + " " + holderMAC.String()}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && len(got.list()) == 0; {
		time.Sleep(10 * time.Millisecond)
	}
	if a := got.list(); !slices.Equal(a, want) {
		t.Errorf("announcements %v, want %v", a, want)
	}
	cancel()
	for _, ch := range []<-chan error{runErr, holderErr} {
		if err := <-ch; err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
}
