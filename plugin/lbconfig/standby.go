package lbconfig

import (
	"net/netip"
	"slices"
	"sync"

	"github.com/infradns/infradns/internal/cluster"
)

// standbyKept is the last standby verdict (the node's health for the VIP's
// group) of each VIP in this process. A reloaded instance's drainer starts
// from it: its own probers' first verdict comes two probe intervals after
// the reload, and until then the IPv6 copies on lo were gone, so a takeover
// in that window met the race the copies are there for (an IPv6 VIP not
// yet usable when keepalived announces it).
var standbyKept struct {
	sync.Mutex
	on map[netip.Addr]bool
}

// rememberStandby records a verdict for vips.
func rememberStandby(vips []netip.Addr, on bool) {
	standbyKept.Lock()
	defer standbyKept.Unlock()
	if standbyKept.on == nil {
		standbyKept.on = map[netip.Addr]bool{}
	}
	for _, v := range vips {
		standbyKept.on[v.Unmap()] = on
	}
}

// rememberedStandby are the VIPs of m last known on standby whose group
// still has a check of its own: a group whose check became none gets no
// copy (nothing would take it away again).
func rememberedStandby(m *cluster.Model) []netip.Addr {
	standbyKept.Lock()
	defer standbyKept.Unlock()
	var out []netip.Addr
	for _, g := range m.Groups() {
		if m.HealthURL(g.Check) == cluster.HealthNone {
			continue
		}
		for _, v := range g.VIPs {
			if v = v.Unmap(); standbyKept.on[v] && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}
