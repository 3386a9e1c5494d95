package mdns

import (
	"cmp"
	"net/netip"
	"slices"
	"time"
)

// Heard is what a resolver serves at one moment, in terms of the link only:
// host labels and addresses, no DNS answers. What to answer, and for which
// names or types, is the DNS side's to decide, so a new kind of answer does
// not change the discovery engine.
//
// Each Heard is built afresh and the cache keeps no reference to it: a
// reader may keep it, and share it, for as long as it likes; no one modifies it.
type Heard struct {
	// Hosts are sorted by label, each label once.
	Hosts []HeardHost
}

// HeardHost is one host a live, accepted instance points at.
type HeardHost struct {
	// Label is the host's label in the browsed domain: lower case, a valid
	// host label, not reserved.
	Label string
	// Addrs are its live addresses as announced (unzoned, not IPv4-mapped),
	// none saying goodbye; sorted (IPv4 first), each once, never empty.
	// Whether each is usable in an answer is the reader's rule.
	Addrs []netip.Addr
}

// Heard builds the snapshot of what is served at now: hosts that a live,
// accepted instance points at and that have live addresses not saying goodbye.
func (c *Cache) Heard(now time.Time) Heard {
	var h Heard
	seen := map[string]bool{}
	for _, in := range c.instances {
		if !in.hasSRV || !in.srv.served(now) {
			continue
		}
		l, why := c.hostOK(in.target)
		if why != "" || seen[l] {
			continue
		}
		host := c.hosts[in.target]
		if host == nil {
			continue
		}
		var live []netip.Addr
		for a, r := range host.addrs {
			if r.served(now) {
				live = append(live, a)
			}
		}
		if len(live) == 0 {
			continue
		}
		seen[l] = true
		slices.SortFunc(live, netip.Addr.Compare)
		h.Hosts = append(h.Hosts, HeardHost{Label: l, Addrs: live})
	}
	slices.SortFunc(h.Hosts, func(a, b HeardHost) int { return cmp.Compare(a.Label, b.Label) })
	return h
}
