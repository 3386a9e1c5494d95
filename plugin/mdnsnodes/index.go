package mdnsnodes

import (
	"github.com/infradns/infradns/internal/mdns"
	"github.com/infradns/infradns/internal/records"
)

// nodeIndex is what ServeDNS answers node names from: host label (lower
// case) → addresses. It lives on the DNS side so that a new kind of answer
// changes only this plugin, not the mDNS engine. It is immutable once built
// and swapped whole, so queries read it without a lock, and each records.Set
// is built once per index rather than per query.
type nodeIndex struct {
	nodes map[string]records.Set
	// reverse answers PTR queries: a node address's reverse name → the
	// node's name in every zone. Built by withReverse before the index is
	// published.
	reverse records.Reverse
}

// withReverse returns a copy of ix (sharing its nodes) with the reverse map
// of its nodes' addresses in zones. ix may be shared (merge returns its
// input), so it is not changed.
func (ix *nodeIndex) withReverse(zones []string) *nodeIndex {
	if ix == nil {
		return &nodeIndex{}
	}
	rev := make(records.Reverse, 2*len(ix.nodes))
	for label, set := range ix.nodes {
		for _, z := range zones {
			name := label + "." + z
			if z == "." {
				name = label + "."
			}
			rev.Add(set, name)
		}
	}
	rev.Sort()
	return &nodeIndex{nodes: ix.nodes, reverse: rev}
}

// Len returns the number of nodes; a nil index (nothing published yet) has none.
func (ix *nodeIndex) Len() int {
	if ix == nil {
		return 0
	}
	return len(ix.nodes)
}

// reverseMap returns the PTR map; a nil index has none.
func (ix *nodeIndex) reverseMap() records.Reverse {
	if ix == nil {
		return nil
	}
	return ix.reverse
}

// Lookup returns the addresses of a node label.
func (ix *nodeIndex) Lookup(label string) (records.Set, bool) {
	if ix == nil {
		return records.Set{}, false
	}
	s, ok := ix.nodes[label]
	return s, ok
}

// heardIndex turns what mDNS heard into the labels it serves. The addresses
// go through records.SetOf, the rule the API's Nodes go through too, so both
// sources serve the same kind of address; a host left with no usable one is
// not served, as it would only be NODATA for both families.
func heardIndex(h mdns.Heard) *nodeIndex {
	ix := &nodeIndex{nodes: make(map[string]records.Set, len(h.Hosts))}
	for _, host := range h.Hosts {
		if set := records.SetOf(host.Addrs); !set.Empty() {
			ix.nodes[host.Label] = set
		}
	}
	return ix
}
