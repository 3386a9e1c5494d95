package mdns

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestCacheReplay(t *testing.T) {
	c := NewCache(testFilter(), NewVerifier(key))
	first := announce(t, "node1", "ocp4", []netip.Addr{n1v4}, key, t0, false)
	if res := c.Process(t0, n1v4, first); res.Accepted != 1 {
		t.Fatalf("First announcement: %+v", res)
	}
	bye := announce(t, "node1", "ocp4", []netip.Addr{n1v4}, key, t0.Add(time.Second), true)
	c.Process(t0.Add(time.Second), n1v4, bye)
	// The same announcement again, and an older one: neither brings it back.
	for _, m := range []*dns.Msg{first, announce(t, "node1", "ocp4", []netip.Addr{n1v4}, key, t0.Add(500*time.Millisecond), false)} {
		res := c.Process(t0.Add(2*time.Second), rogue, m)
		if res.Rejected[ReasonReplay] != 1 {
			t.Errorf("Replay: %+v, want rejected as replay", res)
		}
	}
	now := t0.Add(3 * time.Second)
	c.Expire(now)
	if h := c.Heard(now); len(h.Hosts) != 0 {
		t.Errorf("Served %v after replays, want nothing", served(h))
	}
}

func TestCacheQueriesMissing(t *testing.T) {
	c := NewCache(testFilter(), nil)
	m := announce(t, "node1", "ocp4", []netip.Addr{n1v4}, nil, t0, false)
	m.Answer = m.Answer[:3] // PTR, SRV, TXT without the addresses
	res := c.Process(t0, n1v4, m)
	want := []dns.Question{q("node1.local.", dns.TypeA), q("node1.local.", dns.TypeAAAA)}
	if !slices.Equal(res.Query, want) {
		t.Errorf("Query %v, want %v", res.Query, want)
	}
	// The answer to that query alone completes the node.
	a := new(dns.Msg)
	a.Response = true
	a.Answer = testZone(nil).addrRRs(dns.TypeA, rrOpts{flush: true})
	c.Process(t0.Add(100*time.Millisecond), n1v4, a)
	if got := served(c.Heard(t0.Add(time.Second))); !slices.Equal(got, []string{"node1=198.51.100.11,"}) {
		t.Errorf("Served %v", got)
	}
}
