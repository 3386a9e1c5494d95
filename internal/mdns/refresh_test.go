package mdns

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestCacheRefresh(t *testing.T) {
	c := NewCache(testFilter(), nil)
	c.rand = func() float64 { return 0 }
	c.Process(t0, n1v4, announce(t, "node1", "ocp4", []netip.Addr{n1v4}, nil, t0, false))
	if qs := c.Due(t0.Add(90 * time.Second)); len(qs) != 0 {
		t.Errorf("Due at 75%%: %v", qs)
	}
	if qs := c.Due(t0.Add(96 * time.Second)); !slices.Equal(qs, []dns.Question{q("node1.local.", dns.TypeA)}) {
		t.Errorf("Due at 80%%: %v, want the A record", qs)
	}
	if qs := c.Due(t0.Add(97 * time.Second)); len(qs) != 0 {
		t.Errorf("Due twice: %v", qs)
	}
	if qs := c.Due(t0.Add(103 * time.Second)); len(qs) != 1 {
		t.Errorf("Due at 85%%: %v", qs)
	}
	if next := c.Next(); !next.Equal(t0.Add(108 * time.Second)) {
		t.Errorf("Next = %v, want 90%% of 120 s", next.Sub(t0))
	}
}
