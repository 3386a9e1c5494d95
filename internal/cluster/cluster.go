// Package cluster is the one model of a cluster's virtual IPs. Every front
// end (the cluster file of `infradns render-node`, lbconfig's Corefile
// options, the CLI's flags) fills in a Spec, and New checks it with the same
// rules and fills in the same defaults, so a rule lives in one place and an
// error names the same key whichever door the value came in by (the front
// end translates the key into its own words and position).
//
// The model holds named VIP groups: "api", then one "ingress" group per
// ingress VIP slot ("ingress", "ingress-2", ...). A group is the unit that
// moves: its addresses (at most one per family), its VRRP router ID, which
// nodes may hold it and which health check gates it. Assign decides, for one
// node and one cluster snapshot, which groups that node may hold and in what
// order of preference; it knows nothing of VRRP or BGP, which turn its answer
// into their own terms (internal/lb renders keepalived from it).
//
// Everything here is pure: no sockets, files or clients.
package cluster

import (
	"net/netip"
	"slices"
	"strings"
)

// Node is what the configuration needs of a Kubernetes Node.
type Node struct {
	Name string
	// Addresses are the node's InternalIP addresses.
	Addresses []netip.Addr
	// ControlPlane nodes run an apiserver and may hold the API VIP.
	ControlPlane bool
	// Excluded: the node carries node.kubernetes.io/exclude-from-external-load-balancers
	// (an admin draining it): it gives up every VIP group that has another
	// eligible node.
	Excluded bool
}

// Snapshot is the cluster state one render is made from.
type Snapshot struct {
	Nodes []Node
	// APIServers are the ready endpoints of default/kubernetes.
	APIServers []netip.AddrPort
	// IngressNodes are the names of the nodes with a ready default router:
	// the only ones that may hold an ingress VIP.
	IngressNodes []string
	// Services are the Services of type LoadBalancer of our class: their
	// addresses, policy, endpoint nodes and (Local) router ID. Read when
	// the model's Services are held over VRRP (Spec.Services).
	Services []LBService
}

// Node returns the node called name, if the snapshot has it.
func (s Snapshot) Node(name string) (Node, bool) {
	i := slices.IndexFunc(s.Nodes, func(n Node) bool { return n.Name == name })
	if i < 0 {
		return Node{}, false
	}
	return s.Nodes[i], true
}

// Family names an address family the way instance and Lease names carry it.
func Family(a netip.Addr) string {
	if a.Unmap().Is4() {
		return "v4"
	}
	return "v6"
}

// StatusLeaseName is the name of the status Lease of a VIP of group:
// CLUSTER-GROUP-vip-FAMILY (ocp4-api-vip-v4, ocp4-ingress-2-vip-v6).
// deploy/rbac.yaml's admission policy keeps workers off the API VIP's by
// the suffix this gives the "api" group.
func StatusLeaseName(clusterName, group string, vip netip.Addr) string {
	return clusterName + "-" + group + "-vip-" + Family(vip)
}

// SortedAddrs returns as unmapped, sorted and without duplicates.
func SortedAddrs(as []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, len(as))
	for i, a := range as {
		out[i] = a.Unmap()
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// sortedNodes returns the nodes ordered by name (the order every decision
// is made in, so equal snapshots give equal answers).
func sortedNodes(ns []Node) []Node {
	out := slices.Clone(ns)
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}
