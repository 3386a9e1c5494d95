package cluster

import (
	"net/netip"
	"slices"
)

// CheckServices names the gate of the Services' addresses a node announces
// (see LBService): like CheckAPI and CheckIngress, a verdict the announcer
// waits for. lbconfig gives it at once (no check of its own yet).
const CheckServices = "services"

// LBService is a Service of type LoadBalancer of our class as the nodes
// that announce its addresses see it.
type LBService struct {
	Namespace, Name string
	// Addrs are its load-balancer IPs (status.loadBalancer.ingress),
	// unmapped, sorted, each once.
	Addrs []netip.Addr
	// Local: externalTrafficPolicy Local. Only a node with a ready endpoint
	// of the Service may announce it: kube-proxy drops what reaches a node
	// without one, and the client's source address is kept.
	Local bool
	// Nodes are the nodes with a ready endpoint, sorted (read for Local).
	Nodes []string
	// RouterID is the VRRP router ID of a Local Service's own group, 0 when
	// it has none yet. One writer gives it (AllocateLocalIDs) and it is
	// carried on the Service, so every node reads the same ID and a
	// Service keeps its ID across restarts and other Services' changes.
	RouterID uint8
}

// Key is the Service's "namespace/name".
func (s LBService) Key() string { return s.Namespace + "/" + s.Name }

// AnnouncedBy says whether node may announce s: every node for the policy
// Cluster (kube-proxy forwards to an endpoint anywhere), only a node with a
// ready endpoint for Local.
func (s LBService) AnnouncedBy(node string) bool {
	return !s.Local || slices.Contains(s.Nodes, node)
}

// ServiceVIPs are the addresses node announces for svcs, sorted, each once:
// none while the node is excluded from load balancers (an administrator
// draining it). Two Services sharing an address (a sharing key, disjoint
// ports) have the same policy, so the address goes with either.
func ServiceVIPs(svcs []LBService, node string, excluded bool) []netip.Addr {
	if excluded {
		return nil
	}
	var out []netip.Addr
	for _, s := range svcs {
		if s.AnnouncedBy(node) {
			out = append(out, s.Addrs...)
		}
	}
	return SortedAddrs(out)
}

// EveryNode is Announcers for a Service of the policy Cluster.
const EveryNode = "every node"

// Announcers says who announces s's addresses over BGP, as `infradns
// status` and the Service's events put it: EveryNode for the policy
// Cluster, the nodes with a ready endpoint for Local, nil when no node may
// (Local with no ready endpoint). A node drained or unhealthy is not seen
// from here: it is the nodes' own decision.
func (s LBService) Announcers() []string {
	switch {
	case !s.Local:
		return []string{EveryNode}
	case len(s.Nodes) == 0:
		return nil
	}
	return slices.Clone(s.Nodes)
}
