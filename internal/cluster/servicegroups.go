package cluster

import (
	"hash/fnv"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/infradns/infradns/internal/vrrp"
)

// The Services of type LoadBalancer over VRRP: one node at a time holds an
// address on the L2 link, as for the API and ingress VIPs. Addresses are
// gathered into groups, one VRRP router ID each, because IDs are few (255
// per link, shared with every other VRRP user on it) and Services many:
//
//   - the policy Cluster's Services share k groups ("services",
//     "services-2", ...): any node may hold them, kube-proxy forwards to an
//     endpoint anywhere. A Service goes to one by a hash of its address.
//   - a Local Service has a group of its own (it may be held only by the
//     nodes with one of its ready endpoints, which differ from Service to
//     Service), on an ID out of an operator-declared range, given by one
//     writer and carried on the Service (LBService.RouterID).
//
// Everything here is pure: the writer, the renderer and the nodes call it
// with what they read.

// Keys of the Services' VRRP settings (ServicesVRRP); KeyServices names
// them as a whole, when the link's router IDs run out.
const (
	KeyServices        = "services"
	KeyServiceGroups   = "services.groups"
	KeyServiceLocalIDs = "services.localIDs"
)

// Bounds of the Services' groups.
const (
	// DefaultServiceGroups: a shared group's holder takes all the traffic
	// to its Services' addresses (kube-proxy spreads it on from there), so
	// one group would put every Cluster Service's entry point on one node;
	// k groups spread them over up to k nodes. Each group costs a router ID
	// of the link and, from its holder, an advert per interval and family
	// (four groups dual-stack at the default 60 ms: 133 adverts/s), and
	// changing k moves most Services' addresses once (SharedGroupOf hashes
	// mod k). Four spreads the load over four nodes for 4 of the link's 255
	// IDs: a small default, meant to be set once.
	DefaultServiceGroups = 4
	// MaxServiceGroups bounds k as MaxIngressGroups bounds the ingress
	// groups: each takes a router ID out of the link's 255 and adverts.
	MaxServiceGroups = 16
	// MaxServiceHolders is how many nodes may hold one Services group: the
	// ranks lb.RankPriority tells apart (250-40*rank, at least 1: ranks 0
	// to 6 get 250 to 10, every later rank 1, and two backups of equal
	// priority time out together and both claim the VIP). It also bounds
	// each instance's unicast peers and the nodes running it on a cluster
	// of thousands of nodes, where every node may hold a Cluster group.
	MaxServiceHolders = 7
)

// ServicesVRRP: how the Services' addresses are held over VRRP.
type ServicesVRRP struct {
	// Groups is k, the groups the policy Cluster's Services share; 0 means
	// DefaultServiceGroups.
	Groups int
	// LocalIDs are the router IDs the Local Services may take, one each
	// (a range the operator declares free on the link); none: Local
	// Services are not held over VRRP.
	LocalIDs []uint8
}

// SharedGroups is k with its default.
func (c ServicesVRRP) SharedGroups() int {
	if c.Groups == 0 {
		return DefaultServiceGroups
	}
	return c.Groups
}

// Check refuses settings no link can run: k out of [1, MaxServiceGroups],
// or a LocalID that is 0 or listed twice (two groups on one ID would fight
// over each other's addresses).
func (c ServicesVRRP) Check() error {
	if c.Groups < 0 || c.Groups > MaxServiceGroups {
		return keyErr(KeyServiceGroups, "%d: want 1 to %d (0: %d)", c.Groups, MaxServiceGroups, DefaultServiceGroups)
	}
	seen := map[uint8]bool{}
	for _, id := range c.LocalIDs {
		switch {
		case id == 0:
			return keyErr(KeyServiceLocalIDs, "0 is no VRRP router ID (1 to 255)")
		case seen[id]:
			return keyErr(KeyServiceLocalIDs, "%d is listed twice: each Local Service needs an ID of its own", id)
		}
		seen[id] = true
	}
	return nil
}

// FreeRouterIDs is how many router IDs of the link a cluster leaves to
// other VRRP users: the 255 IDs less "api", the ingress groups, the k
// shared Services groups and the LocalIDs. Below 0 the cluster alone does
// not fit, and ServiceGroups fails. Other clusters and routers on the link
// take theirs from what is left (vrrp-scan lists them).
func FreeRouterIDs(ingressGroups int, cfg ServicesVRRP) int {
	return 255 - 1 - ingressGroups - cfg.SharedGroups() - len(cfg.LocalIDs)
}

// ServiceGroupIDs returns the router IDs of the k shared groups. Group i's
// is the Fletcher-8 of "CLUSTER-services" (or "-services-N") plus one, as
// RouterIDsFor computes the ingress groups', moved up past taken (the API
// and ingress IDs, the LocalIDs) and the groups before it: it depends only
// on the cluster name, taken and the groups before it, so a larger k never
// renumbers a group.
func ServiceGroupIDs(cluster string, k int, taken []uint8) ([]uint8, error) {
	if cluster == "" {
		return nil, keyErr(KeyCluster, "%v", vrrp.ErrEmptyCluster)
	}
	used := map[uint8]bool{0: true}
	for _, id := range taken {
		used[id] = true
	}
	ids := make([]uint8, 0, max(k, 0))
	for i := range max(k, 0) {
		name := GroupName(Services, i)
		id, ok := freeIDFrom(vrrp.Fletcher8(cluster+"-"+name)+1, func(id uint8) bool { return used[id] })
		if !ok {
			return nil, keyErr(KeyServices, "no free VRRP router ID left for %s: the API, ingress and Services groups and the localIDs take all 255", name)
		}
		used[id] = true
		ids = append(ids, id)
	}
	return ids, nil
}

// SharedGroupOf is the shared group (0 to k-1) of a Cluster Service with
// addrs: the FNV-1a hash of its lowest address, mod k. A dual-stack
// Service's addresses go to one group (one node holds both) whatever
// their order, and Services sharing their addresses (a sharing key) land
// in the same group.
func SharedGroupOf(addrs []netip.Addr, k int) int {
	as := SortedAddrs(addrs)
	if len(as) == 0 || k <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write(as[0].AsSlice())
	return int(h.Sum32() % uint32(k))
}

// component is a set of Services joined by shared addresses: sharing is
// per address and family, so a v6-only Service may share a dual-stack
// Service's IPv6 address alone, and a chain of them is one set. Each
// address must be held by one group (two VRRP instances on it would
// delete it from each other), so a component goes to one group whole.
type component struct {
	svcs  []LBService // by key
	addrs []netip.Addr
	// local: every Service is Local. One Cluster Service makes the whole
	// component Cluster's, as ServiceVIPs announces a shared address from
	// every node when either policy is Cluster (the allocator refuses the
	// mix; it can only come of a policy edited after allocation).
	local bool
}

// components joins svcs by shared address, each component's Services by
// key, the components by their first key. Services without an address
// have nothing to hold and are left out.
func components(svcs []LBService) []component {
	sorted := slices.Clone(svcs)
	slices.SortFunc(sorted, func(a, b LBService) int { return strings.Compare(a.Key(), b.Key()) })
	sorted = slices.DeleteFunc(sorted, func(s LBService) bool { return len(s.Addrs) == 0 })
	parent := make([]int, len(sorted))
	var root func(int) int
	root = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	owner := map[netip.Addr]int{}
	for i, s := range sorted {
		parent[i] = i
		for _, a := range s.Addrs {
			if j, ok := owner[a.Unmap()]; ok {
				if ri, rj := root(i), root(j); ri != rj {
					parent[max(ri, rj)] = min(ri, rj) // the earlier key leads
				}
			} else {
				owner[a.Unmap()] = i
			}
		}
	}
	var out []component
	at := map[int]int{} // root → index in out
	for i, s := range sorted {
		r := root(i)
		c, ok := at[r]
		if !ok {
			c, at[r] = len(out), len(out)
			out = append(out, component{local: true})
		}
		out[c].svcs = append(out[c].svcs, s)
		out[c].addrs = append(out[c].addrs, s.Addrs...)
		out[c].local = out[c].local && s.Local
	}
	for i := range out {
		out[i].addrs = SortedAddrs(out[i].addrs)
	}
	return out
}

// AllocateLocalIDs is the writer's allocation of the Local Services'
// router IDs out of ids: the ID each Local Service should carry, and the
// keys (sorted) of those left without one because ids are all in use.
// Services sharing an address are one group and get one ID. A Service
// keeps its RouterID while it is in ids and no Service before it (by key)
// kept it; the others get the lowest free ID. Cluster Services, Services
// without an address and Local Services sharing an address with a Cluster
// Service (held in its shared group) get none: they should carry 0.
func AllocateLocalIDs(ids []uint8, svcs []LBService) (map[string]uint8, []string) {
	pool := slices.Clone(ids)
	slices.Sort(pool)
	pool = slices.Compact(slices.DeleteFunc(pool, func(id uint8) bool { return id == 0 }))
	comps := components(svcs)
	got := make([]uint8, len(comps))
	used := map[uint8]bool{}
	// Kept first, Service by Service in key order: the earlier key keeps
	// an ID two Services carry.
	type member struct {
		key  string
		id   uint8
		comp int
	}
	var members []member
	for c, comp := range comps {
		if !comp.local {
			continue
		}
		for _, s := range comp.svcs {
			members = append(members, member{s.Key(), s.RouterID, c})
		}
	}
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
	for _, m := range members {
		if got[m.comp] == 0 && !used[m.id] && slices.Contains(pool, m.id) {
			got[m.comp], used[m.id] = m.id, true
		}
	}
	out := map[string]uint8{}
	var refused []string
	for c, comp := range comps {
		if !comp.local {
			continue
		}
		if id := lowestFree(pool, used); got[c] == 0 && id != 0 {
			got[c], used[id] = id, true
		}
		for _, s := range comp.svcs {
			if got[c] == 0 {
				refused = append(refused, s.Key())
			} else {
				out[s.Key()] = got[c]
			}
		}
	}
	slices.Sort(refused)
	return out, refused
}

// lowestFree is the first ID of pool (sorted) not in used, 0 when none.
func lowestFree(pool []uint8, used map[uint8]bool) uint8 {
	for _, id := range pool {
		if !used[id] {
			return id
		}
	}
	return 0
}

// ServiceGroup is a Services group: Group.Holders is Services and
// Group.Check CheckServices; its VIPs are every address of its Services
// (IPv4 first, any number per family).
type ServiceGroup struct {
	Group
	// Local: the group of a Local Service (or of Local Services sharing
	// an address), on its RouterID.
	Local bool
	// Nodes (Local) are the nodes with a ready endpoint, sorted: for
	// Services sharing an address, those with a ready endpoint of every
	// one of them (kube-proxy drops what reaches a node without one).
	Nodes []string
	// Services are the keys of the group's Services, sorted.
	Services []string
}

// ServiceGroups lays out the Services' groups: the k shared groups, always
// all of them (with or without VIPs, so their names and IDs stay put),
// then one group per Local router ID in use, by ID ("services-local-ID",
// Index its place among them). taken are the IDs of "api" and the ingress
// groups. A Local Service is held only on an ID of cfg.LocalIDs: one with
// none yet (0), or another, is left out until the writer gives it one.
// The answer does not depend on the order of svcs.
func ServiceGroups(cluster string, cfg ServicesVRRP, taken []uint8, svcs []LBService) ([]ServiceGroup, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	for _, id := range cfg.LocalIDs {
		if slices.Contains(taken, id) {
			return nil, keyErr(KeyServiceLocalIDs, "%d is the router ID of the API or an ingress group", id)
		}
	}
	k := cfg.SharedGroups()
	ids, err := ServiceGroupIDs(cluster, k, append(slices.Clone(taken), cfg.LocalIDs...))
	if err != nil {
		return nil, err
	}
	gs := make([]ServiceGroup, k)
	for i := range gs {
		gs[i].Group = Group{Name: GroupName(Services, i), Holders: Services, RouterID: ids[i], Check: CheckServices, Index: i}
	}
	local := map[uint8]*ServiceGroup{}
	for _, c := range components(svcs) {
		if !c.local {
			gs[SharedGroupOf(c.addrs, k)].add(c.svcs...)
			continue
		}
		id := componentID(c, cfg.LocalIDs)
		if id == 0 {
			continue
		}
		g, ok := local[id]
		if !ok {
			g = &ServiceGroup{Local: true, Group: Group{Name: localGroupName(id), Holders: Services, RouterID: id, Check: CheckServices}}
			local[id] = g
		}
		for _, s := range c.svcs {
			if s.RouterID == id {
				g.addLocal(s)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(local)) {
		g := local[id]
		g.Index = len(gs) - k
		gs = append(gs, *g)
	}
	for i := range gs {
		gs[i].VIPs = SortedAddrs(gs[i].VIPs) // IPv4 sorts first
		slices.Sort(gs[i].Services)
	}
	return gs, nil
}

// componentID is the ID a Local component is held on: the first (by key)
// of its Services' IDs that is in ids. Its Services carrying another ID
// (the writer has not caught up) are left out, so no address is in two
// groups.
func componentID(c component, ids []uint8) uint8 {
	for _, s := range c.svcs {
		if s.RouterID != 0 && slices.Contains(ids, s.RouterID) {
			return s.RouterID
		}
	}
	return 0
}

func (g *ServiceGroup) add(svcs ...LBService) {
	for _, s := range svcs {
		g.VIPs = append(g.VIPs, s.Addrs...)
		g.Services = append(g.Services, s.Key())
	}
}

// addLocal adds a Local Service: the group's nodes narrow to those with
// an endpoint of it too.
func (g *ServiceGroup) addLocal(s LBService) {
	nodes := slices.Compact(slices.Sorted(slices.Values(s.Nodes)))
	if len(g.Services) == 0 {
		g.Nodes = nodes
	} else {
		g.Nodes = slices.DeleteFunc(g.Nodes, func(n string) bool { return !slices.Contains(nodes, n) })
	}
	g.add(s)
}

// localGroupName names a Local group by its ID: the ID stays with the
// Services, so the name (instances, track files, Leases) does too.
func localGroupName(id uint8) string { return "services-local-" + strconv.Itoa(int(id)) }

// AssignServices decides which Services groups node may hold among nodes,
// and at which rank, by Assign's rules: a shared group may be held by any
// node, a Local group by its Nodes; a node excluded from load balancers
// gives its groups to the others but keeps one they would leave with
// nobody; ranks rotate by the group's Index (shared) or RouterID (Local),
// so groups start on different nodes. Only a group's first
// MaxServiceHolders nodes in that order hold it at all, so its unicast
// peers and adverts stay few on a cluster of thousands of nodes. Home is
// Assign's for a shared group, rank 0 for a Local one (its rotation by ID
// gives no group the next node's start); Spread says several groups of
// its kind (shared or Local) share out the nodes. A group without VIPs,
// and a node not in nodes, hold nothing.
func AssignServices(node string, nodes []Node, groups []ServiceGroup) []Assignment {
	ns := sortedNodes(nodes)
	at := make(map[string]int, len(ns))
	for i, n := range ns {
		at[n.Name] = i
	}
	if _, ok := at[node]; !ok {
		return nil
	}
	vips := map[netip.Addr]bool{}
	count := map[bool]int{}
	for _, g := range groups {
		for _, a := range g.VIPs {
			vips[a.Unmap()] = true
		}
		count[g.Local]++
	}
	var out []Assignment
	for _, g := range groups {
		if len(g.VIPs) == 0 {
			continue
		}
		el, off := ns, g.Index
		if g.Local {
			el, off = endpointNodes(ns, at, g.Nodes), int(g.RouterID)
		}
		hs := holders(el, off)
		self := slices.IndexFunc(hs, func(n Node) bool { return n.Name == node })
		if self < 0 || hs[self].Excluded && slices.ContainsFunc(hs, func(n Node) bool { return !n.Excluded }) {
			continue
		}
		a := Assignment{
			Group:  g.Group,
			Rank:   self,
			Home:   self == 0 && (g.Local || g.Index < len(el)),
			Spread: count[g.Local] > 1,
		}
		for i, n := range hs {
			if i != self {
				// A VIP is no node's own address (see Assign).
				n.Addresses = slices.DeleteFunc(slices.Clone(n.Addresses), func(a netip.Addr) bool { return vips[a.Unmap()] })
				a.Peers = append(a.Peers, n)
			}
		}
		a.Peers = sortedNodes(a.Peers)
		out = append(out, a)
	}
	return out
}

// endpointNodes are the nodes of ns (sorted) named in names.
func endpointNodes(ns []Node, at map[string]int, names []string) []Node {
	var idx []int
	for _, n := range names {
		if i, ok := at[n]; ok {
			idx = append(idx, i)
		}
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	out := make([]Node, len(idx))
	for i, j := range idx {
		out[i] = ns[j]
	}
	return out
}

// holders are a group's holders in rank order: the first
// MaxServiceHolders of el rotated by off. The others' ranks would share
// priority 1. When those are all excluded from load balancers and another
// node is not, it is added after them (rank MaxServiceHolders, the only
// one to hold the group): draining a whole rack, whose nodes are next to
// each other by name, must not leave a group nobody can take. Otherwise a
// drain changes no holder set, so no other node's peers (see Assign).
func holders(el []Node, off int) []Node {
	n := len(el)
	if n == 0 {
		return nil
	}
	off = (off%n + n) % n
	out := make([]Node, 0, MaxServiceHolders+1)
	for r := range min(n, MaxServiceHolders) {
		out = append(out, el[(r+off)%n])
	}
	if slices.ContainsFunc(out, func(n Node) bool { return !n.Excluded }) {
		return out
	}
	for r := len(out); r < n; r++ {
		if nd := el[(r+off)%n]; !nd.Excluded {
			return append(out, nd)
		}
	}
	return out
}
