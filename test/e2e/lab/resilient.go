package lab

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// resilientTable is where BIRD installs its routes when the switch forwards
// through resilient next-hop groups: the main table holds the groups.
const resilientTable = 100

// A resilient next-hop group (Linux 5.13+) spreads flows over fixed hash
// buckets: a next hop that leaves gives away only its own buckets, and one
// that comes back takes over buckets only once they have been idle for
// resilientIdle, so no other next hop's open connection moves. That is what
// Cumulus, SONiC, Arista and Juniper call resilient hashing; neither FRR 8.4
// nor BIRD 2.0 programs Linux's groups, so the lab does it from BIRD's routes,
// as a switch programs its forwarding hardware from its routing table.
const (
	resilientBuckets = 64
	resilientIdle    = 1 // seconds
)

// mirrorResilient keeps, for every host route BIRD puts in resilientTable,
// a route in the main table through a resilient group of the same next
// hops, until the lab ends.
func (t *ToR) mirrorResilient() error {
	ns, err := netns.GetFromPath("/run/netns/" + t.ns)
	if err != nil {
		return err
	}
	defer ns.Close()
	m := &resilientMirror{ns: t.ns, ids: map[netip.Addr]int{}, groups: map[netip.Prefix]int{}}
	ch := make(chan netlink.RouteUpdate, 1024)
	done := make(chan struct{})
	err = netlink.RouteSubscribeWithOptions(ch, done, netlink.RouteSubscribeOptions{Namespace: &ns, ListExisting: true, ReceiveBufferSize: 1 << 20,
		ErrorCallback: func(err error) {
			select {
			case <-done:
			default:
				t.lab.t.Errorf("lab ToR: route events: %v (the resilient groups may lag)", err)
			}
		}})
	if err != nil {
		return fmt.Errorf("route events in %s: %w", t.ns, err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for u := range ch {
			if u.Table != resilientTable || u.Dst == nil {
				continue
			}
			a, ok := netip.AddrFromSlice(u.Dst.IP)
			ones, _ := u.Dst.Mask.Size()
			if !ok {
				continue
			}
			if err := m.sync(netip.PrefixFrom(a.Unmap(), ones)); err != nil {
				t.lab.t.Errorf("lab ToR: %v", err)
			}
		}
	}()
	t.lab.t.Cleanup(func() { close(done); wg.Wait() })
	return nil
}

// resilientMirror is the switch's forwarding: a next-hop object per
// gateway, a resilient group per prefix.
type resilientMirror struct {
	ns     string
	ids    map[netip.Addr]int
	groups map[netip.Prefix]int
}

// sync makes the main table's route to p go through a resilient group of
// the next hops BIRD has for it, or removes it.
func (m *resilientMirror) sync(p netip.Prefix) error {
	fam := "-4"
	if p.Addr().Is6() {
		fam = "-6"
	}
	out, err := exec.Command("ip", fam, "-n", m.ns, "-j", "route", "show", "table", fmt.Sprint(resilientTable), "exact", p.String()).Output()
	if err != nil {
		return fmt.Errorf("ip route show %s: %w", p, err)
	}
	var routes []struct {
		Gateway  string `json:"gateway"`
		Dev      string `json:"dev"`
		Nexthops []struct {
			Gateway string `json:"gateway"`
			Dev     string `json:"dev"`
		} `json:"nexthops"`
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		if err := json.Unmarshal(out, &routes); err != nil {
			return fmt.Errorf("ip route: %w: %s", err, out)
		}
	}
	type hop struct{ gw, dev string }
	var hops []hop
	for _, r := range routes {
		if r.Gateway != "" {
			hops = append(hops, hop{r.Gateway, r.Dev})
		}
		for _, n := range r.Nexthops {
			hops = append(hops, hop{n.Gateway, n.Dev})
		}
	}
	group, ok := m.groups[p]
	if !ok {
		group = 10000 + len(m.groups)
		m.groups[p] = group
	}
	if len(hops) == 0 {
		// Gone from BIRD: gone from the switch (the group with it).
		_ = m.ip(fam, "route", "del", p.String())
		_ = m.ip("nexthop", "del", "id", fmt.Sprint(group))
		return nil
	}
	var members []string
	for _, h := range hops {
		a, err := netip.ParseAddr(h.gw)
		if err != nil {
			return fmt.Errorf("next hop %q of %s: %w", h.gw, p, err)
		}
		id, ok := m.ids[a]
		if !ok {
			id = 1 + len(m.ids)
			m.ids[a] = id
			if err := m.ip("nexthop", "replace", "id", fmt.Sprint(id), "via", h.gw, "dev", h.dev); err != nil {
				return err
			}
		}
		members = append(members, fmt.Sprint(id))
	}
	if err := m.ip("nexthop", "replace", "id", fmt.Sprint(group), "group", strings.Join(members, "/"), "type", "resilient",
		"buckets", fmt.Sprint(resilientBuckets), "idle_timer", fmt.Sprint(resilientIdle), "unbalanced_timer", "0"); err != nil {
		return err
	}
	return m.ip(fam, "route", "replace", p.String(), "nhid", fmt.Sprint(group))
}

func (m *resilientMirror) ip(args ...string) error {
	if out, err := exec.Command("ip", append([]string{"-n", m.ns}, args...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}
