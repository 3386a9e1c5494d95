package cluster

import (
	"errors"
	"net/netip"
	"slices"
)

// Assignment is one group this node may hold, and how much it wants it.
type Assignment struct {
	Group Group
	// Rank orders the group's eligible nodes: 0 is the node that should
	// hold it when every eligible node is up, 1 the first to take over
	// from it, and so on. Groups with the same holders rotate the order
	// by their Index, so N groups over N nodes start on N different nodes.
	Rank int
	// Home says the group starts here: rank 0, and the first group that
	// ranks this node first (with more groups than nodes, a node is rank 0
	// of several; only the first is its home, the others wait for the
	// nodes still to come).
	Home bool
	// Spread: several groups share these holders and are spread over them.
	// A holder then keeps its group when a more preferred node returns,
	// so a node coming back moves no VIP.
	Spread bool
	// Peers are the other eligible nodes, sorted by name.
	Peers []Node
}

// ErrNoNodes: the snapshot lists no node and there are no static backends
// to serve the API from: the API was almost certainly not read, and
// rendering it would take every VIP down. Keep the last good state.
var ErrNoNodes = errors.New("snapshot has no nodes")

// Assign decides which groups this node (the model's NodeName) may hold in
// the snapshot, in the order of the model's groups. A node may hold the API
// group when it is in the control plane, or when there are no nodes yet but
// static backends (a bootstrap node); an ingress group when it has a ready
// router endpoint. A node that is not in the snapshot holds nothing: an
// unregistered node never fights for a VIP.
func Assign(m *Model, s Snapshot) ([]Assignment, error) {
	bootstrap := len(s.Nodes) == 0 && len(m.spec.StaticBackends) > 0
	if len(s.Nodes) == 0 && !bootstrap {
		return nil, ErrNoNodes
	}
	nodes := sortedNodes(s.Nodes)
	vips := m.VIPs()
	for i, n := range nodes {
		// A VIP is no node's own address, whatever a Node says: kubelet
		// reports one when it picks its address from an interface that
		// holds a VIP. As a unicast peer or source it would follow the VIP.
		nodes[i].Addresses = slices.DeleteFunc(slices.Clone(n.Addresses), func(a netip.Addr) bool { return slices.Contains(vips, a.Unmap()) })
	}
	routers := map[string]bool{}
	for _, n := range s.IngressNodes {
		routers[n] = true
	}
	eligible := map[Holders][]Node{}
	for _, n := range nodes {
		if n.ControlPlane {
			eligible[ControlPlane] = append(eligible[ControlPlane], n)
		}
		if routers[n.Name] {
			eligible[Routers] = append(eligible[Routers], n)
		}
	}
	bootRank := 0
	if bootstrap {
		eligible[ControlPlane] = []Node{{Name: m.spec.Node, Addresses: m.spec.NodeIPs, ControlPlane: true}}
		bootRank = staticRank(m.spec.StaticBackends, m.spec.NodeIPs)
	}
	// A node being drained (excluded from load balancers) gives its groups
	// to the others; a group it would leave with nobody keeps it: a label
	// put on every control-plane node must not take the API VIP away. The
	// others keep their ranks, peers and so their configuration: a drain
	// reloads the drained node's keepalived alone. (When every node
	// reloaded, keepalived 2.2.7 sometimes made the next holder MASTER
	// inside its own reload and never sent that instance's gratuitous
	// ARPs: the lab's client stayed on the drained node's MAC for 3 s.)
	leave := map[Holders]bool{}
	for h, el := range eligible {
		leave[h] = slices.ContainsFunc(el, func(n Node) bool { return !n.Excluded })
	}
	count := map[Holders]int{}
	for _, g := range m.groups {
		count[g.Holders]++
	}

	var out []Assignment
	for _, g := range m.groups {
		el := eligible[g.Holders]
		self := slices.IndexFunc(el, func(n Node) bool { return n.Name == m.spec.Node })
		if self < 0 || el[self].Excluded && leave[g.Holders] {
			continue
		}
		rank := ((self-g.Index)%len(el) + len(el)) % len(el)
		if bootstrap && g.Holders == ControlPlane {
			rank = bootRank
		}
		a := Assignment{
			Group:  g,
			Rank:   rank,
			Home:   rank == 0 && g.Index < len(el),
			Spread: count[g.Holders] > 1,
		}
		for i, n := range el {
			if i != self {
				a.Peers = append(a.Peers, n)
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// staticRank is a bootstrap node's rank among the static backends: the
// position of its first address in their sorted addresses, 0 when it is
// not one of them. Static backends are the control plane, so the nodes
// that run before the API exists get distinct ranks (by address; by name
// once the Nodes are known) and priorities: no two backups time out in
// the same millisecond.
func staticRank(backends []netip.AddrPort, own []netip.Addr) int {
	var addrs []netip.Addr
	for _, b := range backends {
		addrs = append(addrs, b.Addr())
	}
	addrs = SortedAddrs(addrs)
	for i, a := range addrs {
		if slices.Contains(own, a) {
			return i
		}
	}
	return 0
}
