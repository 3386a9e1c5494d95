package cluster

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"github.com/infradns/infradns/internal/vrrp"
)

// Holders says which nodes may hold a group's VIPs.
type Holders int

const (
	// ControlPlane nodes run an apiserver (and a bootstrap node before
	// there are any).
	ControlPlane Holders = iota + 1
	// Routers are the nodes with a ready endpoint of the ingress service.
	Routers
	// Services: the groups of the Services of type LoadBalancer held over
	// VRRP (ServiceGroups): any node for the policy Cluster, the nodes with
	// a ready endpoint for Local.
	Services
)

func (h Holders) String() string {
	switch h {
	case ControlPlane:
		return "control-plane"
	case Routers:
		return "routers"
	case Services:
		return "services"
	}
	return "holders-" + strconv.Itoa(int(h))
}

// Group is a set of VIPs that moves as one, held by one node at a time
// (VRRP) or announced by its eligible nodes (BGP): at most one address per
// family for "api" and the ingress groups, any number for a Services group
// (held by one instance per family: a router ID names one instance per
// family on a link).
type Group struct {
	// Name is "api", "ingress", "ingress-2", ...: it names the VRRP
	// instances (CLUSTER_NAME_v4), track files and status Leases.
	Name    string
	Holders Holders
	// VIPs are the group's addresses, IPv4 first.
	VIPs []netip.Addr
	// RouterID is the group's VRRP router ID (the same for both families,
	// as OpenShift does: VRRP IDs are per family).
	RouterID uint8
	// Check names the health check that keeps a node eligible to hold it.
	Check string
	// Index is the group's place among the groups with the same holders
	// (0 for "api" and "ingress"); preferences are staggered by it.
	Index int
}

// GroupName is the name of group i (0-based) of holders: "ingress" for the
// first ingress group, as a cluster with one ingress VIP has always called
// it, then "ingress-2", "ingress-3", ...; "services", "services-2", ... for
// the Services' shared groups (ServiceGroups).
func GroupName(holders Holders, i int) string {
	base := "api"
	switch holders {
	case Routers:
		base = "ingress"
	case Services:
		base = "services"
	}
	if i == 0 {
		return base
	}
	return base + "-" + strconv.Itoa(i+1)
}

func buildGroups(s Spec) ([]Group, error) {
	return Layout(s.Name, s.APIVIPs, s.IngressVIPs, 0, s.RouterIDs)
}

// Layout lays out the VIP groups of a cluster: "api", then ingress group i
// with the i-th ingress VIP of each family, each with its router ID. n asks
// for at least n ingress groups (those without VIPs have none: vrrp-scan
// checks the IDs of a cluster whose VIPs it was not told). It checks no
// address; New does.
func Layout(name string, api, ingress []netip.Addr, n int, o RouterIDs) ([]Group, error) {
	n = max(n, IngressGroups(ingress))
	ids, err := RouterIDsFor(name, n, o)
	if err != nil {
		return nil, err
	}
	gs := []Group{{Name: GroupName(ControlPlane, 0), Holders: ControlPlane, VIPs: v4First(api), RouterID: ids[0], Check: CheckAPI}}
	var v4, v6 []netip.Addr
	for _, a := range ingress {
		if a.Is4() {
			v4 = append(v4, a)
		} else {
			v6 = append(v6, a)
		}
	}
	for i := range n {
		g := Group{Name: GroupName(Routers, i), Holders: Routers, RouterID: ids[1+i], Check: CheckIngress, Index: i}
		if i < len(v4) {
			g.VIPs = append(g.VIPs, v4[i])
		}
		if i < len(v6) {
			g.VIPs = append(g.VIPs, v6[i])
		}
		gs = append(gs, g)
	}
	return gs, nil
}

func v4First(as []netip.Addr) []netip.Addr {
	out := slices.Clone(as)
	slices.SortStableFunc(out, func(a, b netip.Addr) int {
		switch {
		case a.Is4() == b.Is4():
			return 0
		case a.Is4():
			return -1
		}
		return 1
	})
	return out
}

// IngressGroups is how many ingress groups a list of ingress VIPs makes:
// the larger of its IPv4 and IPv6 counts.
func IngressGroups(vips []netip.Addr) int {
	var n4, n6 int
	for _, a := range vips {
		if a.Unmap().Is4() {
			n4++
		} else {
			n6++
		}
	}
	return max(n4, n6)
}

// RouterIDsFor returns the router IDs of a cluster with n ingress groups:
// [api, ingress, ingress-2, ...]. The API and first ingress IDs are
// OpenShift's (baremetal-runtimecfg's Fletcher-8 of the cluster name), so a
// cluster moving from OpenShift's stack keeps them. Each further ingress
// group's ID is the Fletcher-8 of "CLUSTER-ingress-N" plus one, moved up
// past IDs already taken: it depends only on the cluster name, the
// overrides and the groups before it, so adding a VIP never renumbers the
// others. Overrides (non-zero) win and must not collide.
func RouterIDsFor(cluster string, n int, o RouterIDs) ([]uint8, error) {
	base, err := vrrp.ClusterIDs(cluster)
	if err != nil {
		return nil, keyErr(KeyCluster, "%v", err)
	}
	if len(o.Ingress) > max(n, 1) {
		return nil, keyErr(KeyRouterIDs, "%d ingress IDs for %d ingress VIPs per family", len(o.Ingress), n)
	}
	override := func(i int) uint8 { // i: 0 api, 1+ ingress groups
		if i == 0 {
			return o.API
		}
		if i-1 < len(o.Ingress) {
			return o.Ingress[i-1]
		}
		return 0
	}
	ids := make([]uint8, 1+max(n, 1))
	ids[0], ids[1] = base.API, base.Ingress
	// Explicit IDs first: a computed one steps around them, never the
	// other way.
	taken := map[uint8]string{}
	for i := range ids {
		if v := override(i); v != 0 {
			if prev, ok := taken[v]; ok {
				return nil, keyErr(KeyRouterIDs, "%s and %s are both %d", prev, idName(i), v)
			}
			taken[v] = idName(i)
			ids[i] = v
		}
	}
	for i := range ids {
		if override(i) != 0 {
			continue
		}
		if i >= 2 {
			ids[i] = vrrp.Fletcher8(fmt.Sprintf("%s-%s", cluster, GroupName(Routers, i-1))) + 1
		}
		id, ok := freeIDFrom(ids[i], func(id uint8) bool { _, t := taken[id]; return t })
		if !ok {
			return nil, keyErr(KeyRouterIDs, "no free VRRP router ID left")
		}
		ids[i] = id
		taken[id] = idName(i)
	}
	return ids[:1+n], nil
}

// freeIDFrom is the first router ID from id up (255 wraps to 1, never 0)
// that taken does not hold; false when all 255 are.
func freeIDFrom(id uint8, taken func(uint8) bool) (uint8, bool) {
	if id == 0 {
		id = 1
	}
	for start := id; taken(id); {
		id = id%255 + 1
		if id == start {
			return 0, false
		}
	}
	return id, true
}

func idName(i int) string {
	if i == 0 {
		return "api"
	}
	return GroupName(Routers, i-1)
}
