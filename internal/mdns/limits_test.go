package mdns

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// addrsFrom returns n IPv4 addresses counting up from 10.64.0.0 + first.
func addrsFrom(first, n int) []netip.Addr {
	out := make([]netip.Addr, n)
	for i := range out {
		v := uint32(10)<<24 | uint32(64)<<16 + uint32(first+i)
		out[i] = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return out
}

// withTTL is an announcement whose every record has ttl.
func withTTL(host string, ttl uint32, addrs ...netip.Addr) func(*testing.T, time.Time) *dns.Msg {
	return func(t *testing.T, at time.Time) *dns.Msg {
		svc := DefaultService("ocp4", host)
		svc.TTL = ttl
		z := NewZone(host+".local.", "ocp4", []Service{svc}, addrs, nil)
		z.HostTTL = ttl
		return roundTrip(t, z.Announcement(NewStamp(at), false))
	}
}

// flood is n announcements from src, one per host "<prefix>-<i>", each with
// per addresses of its own.
func flood(prefix string, src netip.Addr, n, per int) []step {
	var steps []step
	for i := range n {
		steps = append(steps, step{0, src, ann(fmt.Sprintf("%s-%d", prefix, i), "ocp4", nil, false, addrsFrom(i*per, per)...)})
	}
	return steps
}

var vip = netip.MustParseAddr("198.51.100.5")

// TestCacheLimits checks each limit of what a sender can make the cache hold,
// and that a node announced after a sender reached its limits is still served.
func TestCacheLimits(t *testing.T) {
	tests := []struct {
		name     string
		key      []byte
		filter   func(*Filter)
		steps    []step
		at       time.Duration
		check    string // "host=count" of addresses served, "" for none
		hosts    int    // hosts served (-1: do not check)
		rejected map[string]int
		dropped  map[string]int
		capped   int
	}{
		{name: "a host serves at most MaxHostAddrs addresses",
			steps: []step{{0, rogue, ann("flood", "ocp4", nil, false, addrsFrom(0, 200)...)}},
			at:    time.Second, check: fmt.Sprintf("flood=%d", MaxHostAddrs), hosts: 1,
			dropped: map[string]int{DropHostLimit: 200 - MaxHostAddrs}},
		{name: "later packets add no more",
			steps: []step{
				{0, rogue, ann("flood", "ocp4", nil, false, addrsFrom(0, 10)...)},
				{0, rogue, ann("flood", "ocp4", nil, false, addrsFrom(10, 10)...)},
				{0, rogue, ann("flood", "ocp4", nil, false, addrsFrom(20, 10)...)}},
			at: time.Second, check: fmt.Sprintf("flood=%d", MaxHostAddrs), hosts: 1,
			dropped: map[string]int{DropHostLimit: 30 - MaxHostAddrs}},
		{name: "wire TTL is capped at MaxTTL",
			steps: []step{{0, n1v4, withTTL("node1", 0xffffffff, n1v4)}},
			at:    MaxTTL*time.Second - time.Millisecond, check: "node1=1", hosts: 1, capped: 3},
		{name: "capped records expire at MaxTTL",
			steps: []step{{0, n1v4, withTTL("node1", 0xffffffff, n1v4)}},
			at:    MaxTTL * time.Second, hosts: 0, capped: 3},
		{name: "TTL at the cap is kept",
			steps: []step{{0, n1v4, withTTL("node1", MaxTTL, n1v4)}},
			at:    MaxTTL*time.Second - time.Millisecond, check: "node1=1", hosts: 1},
		{name: "one sender holds at most MaxSourceAddrs addresses",
			steps: append(flood("flood", rogue, MaxSourceAddrs/MaxHostAddrs+10, MaxHostAddrs),
				step{0, n1v4, ann("node1", "ocp4", nil, false, n1v4, n1v6)}),
			at: time.Second, check: "node1=2", hosts: MaxSourceAddrs/MaxHostAddrs + 1,
			dropped: map[string]int{DropSourceLimit: 10 * MaxHostAddrs}},
		{name: "one sender holds at most MaxSourceInstances instances",
			steps: append(flood("flood", rogue, MaxSourceInstances+5, 1),
				step{0, n1v4, ann("node1", "ocp4", nil, false, n1v4)}),
			at: time.Second, check: "node1=1", hosts: MaxSourceInstances + 1,
			rejected: map[string]int{ReasonLimit: 5}}, // once per refused instance
		{name: "signed: a host serves at most MaxHostAddrs addresses", key: key,
			steps: []step{{0, n1v4, ann("node1", "ocp4", key, false, addrsFrom(0, 40)...)}},
			at:    time.Second, check: fmt.Sprintf("node1=%d", MaxHostAddrs), hosts: 1,
			dropped: map[string]int{DropHostLimit: 40 - MaxHostAddrs}},
		{name: "a VIP is not a node's address", filter: func(f *Filter) { f.Exclude = []netip.Addr{vip} },
			steps: []step{{0, n1v4, ann("master-2", "ocp4", nil, false, n1v4, vip)}},
			at:    time.Second, check: "master-2=1", hosts: 1, dropped: map[string]int{DropVIP: 1}},
		{name: "a name pointing at a VIP alone is not served", filter: func(f *Filter) { f.Exclude = []netip.Addr{vip} },
			steps: []step{{0, rogue, ann("master-2", "ocp4", nil, false, vip)}},
			at:    time.Second, hosts: 0, dropped: map[string]int{DropVIP: 1}},
		{name: "signed: a VIP is not a node's address", key: key, filter: func(f *Filter) { f.Exclude = []netip.Addr{vip} },
			steps: []step{{0, n1v4, ann("master-2", "ocp4", key, false, n1v4, vip)}},
			at:    time.Second, check: "master-2=1", hosts: 1, dropped: map[string]int{DropVIP: 1}},
		{name: "dns is reserved",
			steps: []step{{0, n1v4, ann("dns", "ocp4", nil, false, n1v4)}},
			at:    time.Second, hosts: 0, rejected: map[string]int{ReasonReserved: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := testFilter()
			if tc.filter != nil {
				tc.filter(&f)
			}
			var v *Verifier
			if tc.key != nil {
				v = NewVerifier(tc.key)
			}
			c := NewCache(f, v)
			rejected, dropped, capped := map[string]int{}, map[string]int{}, 0
			for _, s := range tc.steps {
				now := t0.Add(s.at)
				c.Expire(now)
				res := c.Process(now, s.src, s.msg(t, now))
				for r, n := range res.Rejected {
					rejected[r] += n
				}
				for r, n := range res.Dropped {
					dropped[r] += n
				}
				capped += res.TTLCapped
			}
			now := t0.Add(tc.at)
			c.Expire(now)
			h := c.Heard(now)
			if tc.hosts >= 0 && len(h.Hosts) != tc.hosts {
				t.Errorf("Served %d hosts, want %d", len(h.Hosts), tc.hosts)
			}
			if label, _, ok := strings.Cut(tc.check, "="); ok {
				got := label + " not served"
				for _, host := range h.Hosts {
					if host.Label == label {
						got = fmt.Sprintf("%s=%d", host.Label, len(host.Addrs))
					}
				}
				if got != tc.check {
					t.Errorf("Served %s, want %s", got, tc.check)
				}
			}
			for _, m := range []struct {
				name      string
				got, want map[string]int
			}{{"Rejected", rejected, tc.rejected}, {"Dropped", dropped, tc.dropped}} {
				if len(m.got) != len(m.want) {
					t.Errorf("%s %v, want %v", m.name, m.got, m.want)
					continue
				}
				for r, n := range m.want {
					if m.got[r] != n {
						t.Errorf("%s %v, want %v", m.name, m.got, m.want)
						break
					}
				}
			}
			if capped != tc.capped {
				t.Errorf("TTLCapped %d, want %d", capped, tc.capped)
			}
		})
	}
}

// TestCacheLimitsGlobal fills the cache's address limit from many senders
// (as forged source addresses would): the next address is dropped as full.
func TestCacheLimitsGlobal(t *testing.T) {
	c := NewCache(testFilter(), nil)
	hosts := MaxAddrs / MaxHostAddrs
	for i := range hosts {
		src := netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)})
		res := c.Process(t0, src, announce(t, fmt.Sprintf("h-%d", i), "ocp4", addrsFrom(i*MaxHostAddrs, MaxHostAddrs), nil, t0, false))
		if len(res.Dropped) > 0 || len(res.Rejected) > 0 {
			t.Fatalf("Host %d: %+v, want accepted", i, res)
		}
	}
	res := c.Process(t0, n1v4, announce(t, "node1", "ocp4", []netip.Addr{n1v4}, nil, t0, false))
	if res.Dropped[DropFull] != 1 {
		t.Errorf("Dropped %v, want full", res.Dropped)
	}
	if c.addrs != MaxAddrs {
		t.Errorf("Cache holds %d addresses, want %d", c.addrs, MaxAddrs)
	}
}

// TestCacheLimitsReleased checks that what a sender held is freed as its
// records go: its limit does not lock it out for ever, and nothing is left
// of it once all are gone.
func TestCacheLimitsReleased(t *testing.T) {
	c := NewCache(testFilter(), nil)
	for _, s := range flood("flood", rogue, MaxSourceAddrs/MaxHostAddrs, MaxHostAddrs) {
		c.Process(t0, s.src, s.msg(t, t0))
	}
	if u := c.bySource[rogue]; u == nil || u.addrs != MaxSourceAddrs || u.instances != MaxSourceAddrs/MaxHostAddrs {
		t.Fatalf("Usage of the sender %+v, want %d addresses", u, MaxSourceAddrs)
	}
	later := t0.Add(MaxTTL * time.Second)
	c.Expire(later)
	if len(c.bySource) != 0 || c.addrs != 0 || len(c.instances) != 0 || len(c.hosts) != 0 {
		t.Fatalf("After expiry: %d senders, %d addresses, %d instances, %d hosts; want none", len(c.bySource), c.addrs, len(c.instances), len(c.hosts))
	}
	res := c.Process(later, rogue, announce(t, "node1", "ocp4", []netip.Addr{n1v4}, nil, later, false))
	if res.Accepted == 0 || len(res.Dropped) > 0 {
		t.Errorf("The sender again after expiry: %+v, want accepted", res)
	}
}

// TestCacheLimitsSignedReplace checks the accounting when a signed
// announcement replaces a host's addresses.
func TestCacheLimitsSignedReplace(t *testing.T) {
	c := NewCache(testFilter(), NewVerifier(key))
	c.Process(t0, n1v4, announce(t, "node1", "ocp4", addrsFrom(0, 10), key, t0, false))
	at := t0.Add(time.Second)
	c.Process(at, n1v4, announce(t, "node1", "ocp4", addrsFrom(100, 3), key, at, false))
	if c.addrs != 3 || c.bySource[n1v4].addrs != 3 {
		t.Errorf("Cache holds %d addresses (sender %d), want 3", c.addrs, c.bySource[n1v4].addrs)
	}
}
