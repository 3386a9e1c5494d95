package vrrp

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestGuard(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := &Guard{Window: 3 * time.Second, Expiry: 10 * time.Second}
	g.SetInstances([]Instance{{Name: "ocp4_api_v4", VRID: 14, VIPs: addrs("192.0.2.5")}}, addrs("198.51.100.11"), addrs("198.51.100.12"))
	if err := g.Verdict(t0); !errors.Is(err, ErrListening) {
		t.Errorf("Before Start: %v", err)
	}
	g.Start(t0)
	g.Observe(obs("198.51.100.12", 14, "192.0.2.5"), t0.Add(time.Second)) // our peer: fine
	if err := g.Verdict(t0.Add(2 * time.Second)); !errors.Is(err, ErrListening) {
		t.Errorf("Inside the window: %v", err)
	}
	if err := g.Verdict(t0.Add(3 * time.Second)); err != nil {
		t.Errorf("After the window, only our peer: %v", err)
	}
	// An unregistered node is reported but does not block.
	g.Observe(obs("198.51.100.14", 14, "192.0.2.5"), t0.Add(4*time.Second))
	if err := g.Verdict(t0.Add(4 * time.Second)); err != nil {
		t.Errorf("Unknown peer blocked: %v", err)
	}
	if c := g.Conflicts(t0.Add(4 * time.Second)); len(c) != 1 || c[0].Kind != UnknownPeer {
		t.Errorf("Conflicts = %v", c)
	}
	// Another cluster on our ID blocks until its adverts stop for Expiry.
	g.Observe(obs("198.51.100.50", 14, "192.0.2.77"), t0.Add(5*time.Second))
	if err := g.Verdict(t0.Add(5 * time.Second)); err == nil || !strings.Contains(err.Error(), "foreign-addresses") {
		t.Errorf("Foreign router: %v", err)
	}
	if err := g.Verdict(t0.Add(16 * time.Second)); err != nil {
		t.Errorf("After the foreign router went quiet: %v", err)
	}
}

func TestGuardBounded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := &Guard{Window: time.Second, Expiry: time.Minute}
	g.Start(t0)
	for i := 0; i < maxTracked+100; i++ {
		src := netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)})
		g.Observe(Observation{Source: src, Advert: Advert{Version: 3, VRID: 1}}, t0)
	}
	if n := len(g.lastSeen); n > maxTracked {
		t.Errorf("%d observations tracked, bound is %d", n, maxTracked)
	}
}
