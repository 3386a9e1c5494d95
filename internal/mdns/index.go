package mdns

import (
	"net/netip"
	"time"

	"github.com/infradns/infradns/internal/records"
)

// Index is an immutable snapshot of the nodes a resolver serves: host label
// (lower case) → addresses. Readers share it without locks.
type Index struct {
	Nodes map[string]records.Set
}

// Len returns the number of nodes.
func (ix *Index) Len() int {
	if ix == nil {
		return 0
	}
	return len(ix.Nodes)
}

// Lookup returns the addresses of a node label.
func (ix *Index) Lookup(label string) (records.Set, bool) {
	if ix == nil {
		return records.Set{}, false
	}
	s, ok := ix.Nodes[label]
	return s, ok
}

// Index builds the snapshot of what is served at now: hosts that a live,
// accepted instance points at and that have live addresses not saying goodbye.
func (c *Cache) Index(now time.Time) *Index {
	ix := &Index{Nodes: map[string]records.Set{}}
	for _, in := range c.instances {
		if !in.hasSRV || !in.srv.served(now) {
			continue
		}
		l, why := c.hostOK(in.target)
		if why != "" {
			continue
		}
		if _, done := ix.Nodes[l]; done {
			continue
		}
		h := c.hosts[in.target]
		if h == nil {
			continue
		}
		var live []netip.Addr
		for a, r := range h.addrs {
			if r.served(now) {
				live = append(live, a)
			}
		}
		if set := records.SetOf(live); !set.Empty() {
			ix.Nodes[l] = set
		}
	}
	return ix
}
