package lb

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/vrrp"
)

// Plan is what the two files must say, already decided: the templates only
// lay it out. Every list is sorted, so equal inputs give equal bytes.
type Plan struct {
	Cluster   string
	NodeName  string
	Interface string
	// VRRPVersion and AdvertInt (seconds, as keepalived writes them).
	VRRPVersion int
	AdvertInt   string
	TrackFiles  []TrackFile
	// Instances are this node's VRRP instances; a node not eligible for a
	// VIP has none for it (a worker has no API instance).
	Instances []Instance
	// Groups are the VIP groups this node may hold or announce now (Assign),
	// in the model's order, then the Services' groups it may hold
	// (AssignServices); in BGP mode there are no Instances, and these say
	// what to announce once their checks pass.
	Groups  []HeldGroup
	HAProxy HAProxy
	// NodeIPs are this node's addresses (the spec's, or its Node's).
	NodeIPs []netip.Addr
}

// HeldGroup is a VIP group this node is eligible for.
type HeldGroup struct {
	Name  string
	Check string
	// VRID is the group's VRRP router ID (in BGP mode too, unused there).
	VRID uint8
	// VIPs are every address this node's instances of the group hold
	// (IPv4 first); Advertised the part their adverts carry.
	VIPs []netip.Addr
	// Peers are the addresses of the group's other eligible nodes: whose
	// claim to a VIP the split-brain check may settle.
	Peers []netip.Addr
}

// TrackFile is a keepalived vrrp_track_file: one per VIP group.
type TrackFile struct {
	Name string
	Path string
	// Hold: the group is spread and this node is not its home, so it waits
	// ClaimDelay before it may take it (see ClaimGate).
	Hold bool
	// Split: the group's split-brain file (SplitPath), 0 unless lbconfig
	// steps the group down; keepalived resets it to 0 when it starts, so a
	// step-down never outlives the lbconfig that decided it.
	Split bool
	// Boost: the group's holder boost (BoostPath), vrrp.BoostValue while
	// lbconfig boosts the holder's priority (vrrp.HolderBoost), 0 otherwise;
	// reset to 0 whenever keepalived starts.
	Boost bool
}

// Instance is one keepalived vrrp_instance: one VIP group, one family.
type Instance struct {
	Name string
	VRID uint8
	// Priority ranks the group's nodes (RankPriority); every instance is
	// nopreempt: a node that comes back takes nothing back (no second move,
	// no preemption storm when a node flaps).
	Priority int
	// VIPs are written with their host prefix (/32, /128): the addresses
	// the instance's adverts carry (virtual_ipaddress), one per instance.
	VIPs []string
	// Excluded are more addresses the instance holds, written the same
	// way, that its adverts leave out (virtual_ipaddress_excluded): a
	// Services group's past the first of the family (see addServices).
	Excluded []string
	// Track names the TrackFile that puts this instance in FAULT, Split the
	// one lbconfig's split-brain check uses to step it down.
	Track string
	Split string
	// Boost names the TrackFile whose value is added to Priority (weight 1).
	Boost string
	// AuthPass is set for VRRP version 2 only (v3 has no authentication).
	AuthPass string
	// SrcIP and Peers are set in unicast mode.
	SrcIP string
	Peers []string
}

// HAProxy is the API load balancer.
type HAProxy struct {
	Name       string
	LBPort     uint16
	HealthPort uint16
	Backends   []Backend
}

// Backend is one apiserver.
type Backend struct {
	Name string
	// Address is host:port, with brackets for IPv6.
	Address string
}

// RankPriority is the VRRP priority of a group's node of rank r (see
// cluster.Assignment): 250 for rank 0, 40 less per rank, at least 1. Every
// group's instances are nopreempt, so the backup whose timer fires first
// keeps the VIP: the ranks must fire in order, and a backup's wait grows by
// (256-priority)/256 of an advert interval. With equal priorities (as
// before) two backups timed out in the same millisecond and both claimed the
// VIP; the one that yielded could have sent the last gratuitous ARPs, and
// clients followed it for up to 1.3 s (lab). One apart (0.4 ms at 100 ms
// adverts) lost to timer jitter in the lab (the third in line took the VIP
// in 2 of 24 moves); 40 apart is 15.6 ms, and the first backup waits 43 ms
// less than at the old equal priority 100. Health still acts through FAULT
// (track_file weight 0), not weights: a priority race on a failed check
// cost 3.5 s in the lab.
func RankPriority(rank int) int { return max(1, 250-40*rank) }

// MasterDown is how long the first backup (rank 1) waits without adverts
// before it takes a VIP (RFC 5798: three intervals and its skew): a holder
// stopped or paused for longer loses it. 191 ms at the default 60 ms.
func MasterDown(advert time.Duration) time.Duration {
	return 3*advert + time.Duration(256-RankPriority(1))*advert/256
}

// Errors for a snapshot that must not be rendered: the caller keeps the
// last good files. An empty backend or peer list almost always means the API
// could not be read, and rendering it would take the VIP or the API down.
var (
	ErrNoNodes    = cluster.ErrNoNodes
	ErrNoBackends = errors.New("no ready apiserver endpoints and no static backends")
	ErrNoPeers    = errors.New("unicast peer list is empty")
)

// Desired computes the configuration for this node: the groups Assign lets
// it hold become VRRP instances, the ready apiservers haproxy's backends.
// When the model holds the Services over VRRP (Spec.Services), their
// groups (cluster.ServiceGroups, AssignServices) follow the API and
// ingress groups. It never returns a result with an empty backend list
// or, in unicast mode, an empty peer list for an API or ingress group
// (ErrNoBackends, ErrNoPeers), nor one with a value a field may not hold
// (ErrUnsafe).
func Desired(s cluster.Snapshot, m *cluster.Model) (Plan, error) {
	spec := m.Spec()
	if spec.Interface == "" || spec.Interface == "auto" || spec.Node == "" {
		return Plan{}, fmt.Errorf("node name %q and interface %q must be known before a render", spec.Node, spec.Interface)
	}
	var svcs []cluster.LBService
	if spec.Services != nil {
		svcs, s = servicesOf(s, m)
	}
	assigned, err := cluster.Assign(m, s)
	if err != nil {
		return Plan{}, err
	}
	nodes := slices.Clone(s.Nodes)
	slices.SortFunc(nodes, func(a, b cluster.Node) int { return cmp.Compare(a.Name, b.Name) })
	selfIPs := spec.NodeIPs
	if self, ok := s.Node(spec.Node); ok && len(selfIPs) == 0 {
		selfIPs = self.Addresses
	}

	d := Plan{
		Cluster:     spec.Name,
		NodeName:    spec.Node,
		Interface:   spec.Interface,
		VRRPVersion: spec.VRRP.Version,
		AdvertInt:   strconv.FormatFloat(spec.VRRP.AdvertInterval.Seconds(), 'f', -1, 64),
		NodeIPs:     slices.Clone(selfIPs),
	}
	backends, err := backends(s, spec, nodes)
	if err != nil {
		return Plan{}, err
	}
	d.HAProxy = HAProxy{Name: spec.Name + "_api", LBPort: spec.LBPort, HealthPort: spec.HealthPort, Backends: backends}

	for _, a := range assigned {
		g := a.Group
		if len(g.VIPs) > 0 {
			var peers []netip.Addr
			for _, n := range a.Peers {
				peers = append(peers, n.Addresses...)
			}
			if len(s.Nodes) == 0 && g.Holders == cluster.ControlPlane {
				// Bootstrap: the static backends are the control plane.
				for _, b := range spec.StaticBackends {
					if !slices.Contains(selfIPs, b.Addr().Unmap()) {
						peers = append(peers, b.Addr())
					}
				}
			}
			d.Groups = append(d.Groups, HeldGroup{Name: g.Name, Check: g.Check, VRID: g.RouterID, VIPs: slices.Clone(g.VIPs), Peers: cluster.SortedAddrs(peers)})
		}
		if m.Mode() == cluster.ModeBGP {
			continue // no VRRP instance and no track file: announced, not held
		}
		// One instance per VIP: at most one per family.
		var sets [][]netip.Addr
		for _, vip := range g.VIPs {
			sets = append(sets, []netip.Addr{vip})
		}
		if err := d.addVRRP(m, a, sets, selfIPs); err != nil {
			return Plan{}, err
		}
	}
	if spec.Services != nil {
		if err := d.addServices(m, s, svcs, selfIPs); err != nil {
			return Plan{}, err
		}
	}
	if err := d.check(); err != nil {
		return Plan{}, err
	}
	return d, nil
}

// addVRRP adds a's group's track, split and boost files and one instance
// per address set (each of one family, its first address the one its
// adverts carry, the others Excluded). In unicast mode an instance
// without a peer is an error (ErrNoPeers), except for a Services group:
// see addServices.
func (d *Plan) addVRRP(m *cluster.Model, a cluster.Assignment, sets [][]netip.Addr, selfIPs []netip.Addr) error {
	spec, g := m.Spec(), a.Group
	track := TrackFile{Name: spec.Name + "_" + g.Name, Path: TrackPath(m, g.Name), Hold: a.Spread && !a.Home}
	split := TrackFile{Name: track.Name + "_split", Path: SplitPath(m, g.Name), Split: true}
	boost := TrackFile{Name: track.Name + "_boost", Path: BoostPath(m, g.Name), Boost: true}
	d.TrackFiles = append(d.TrackFiles, track, split, boost)
	for _, set := range sets {
		vip := set[0]
		in := Instance{
			Name:     InstanceName(spec.Name, g.Name, vip),
			VRID:     g.RouterID,
			Priority: RankPriority(a.Rank),
			VIPs:     []string{hostPrefix(vip)},
			Track:    track.Name,
			Split:    split.Name,
			Boost:    boost.Name,
		}
		for _, x := range set[1:] {
			in.Excluded = append(in.Excluded, hostPrefix(x))
		}
		if spec.VRRP.Version == 2 {
			in.AuthPass = authPass(spec.Name, g.Name)
		}
		if spec.VRRP.Unicast {
			var err error
			in.SrcIP, in.Peers, err = unicast(in.Name, spec.Node, selfIPs, a.Peers, vip.Is6())
			if err != nil && !(g.Holders == cluster.Services && errors.Is(err, ErrNoPeers)) {
				return err
			}
		}
		d.Instances = append(d.Instances, in)
	}
	return nil
}

// hostPrefix is a as keepalived is given a VIP: /32 or /128.
func hostPrefix(a netip.Addr) string { return netip.PrefixFrom(a, a.BitLen()).String() }

// servicesOf returns the Services this node's groups are laid out from and
// the snapshot to assign every group with. A Service's address that is an
// API or ingress VIP or one of this node's configured addresses is left
// out: a second instance holding it would delete it from the first (or
// from the node) when it goes BACKUP. And a Service's address is no node's
// own, whatever a Node reports (kubelet picks one off the interface that
// holds it): as a unicast peer or source it would follow the address.
func servicesOf(s cluster.Snapshot, m *cluster.Model) ([]cluster.LBService, cluster.Snapshot) {
	own := slices.Concat(m.VIPs(), m.Spec().NodeIPs)
	svcs := make([]cluster.LBService, len(s.Services))
	var addrs []netip.Addr
	for i, svc := range s.Services {
		svc.Addrs = slices.DeleteFunc(slices.Clone(svc.Addrs), func(a netip.Addr) bool { return slices.Contains(own, a.Unmap()) })
		svcs[i] = svc
		addrs = append(addrs, svc.Addrs...)
	}
	s.Nodes = withoutAddrs(s.Nodes, addrs)
	return svcs, s
}

// withoutAddrs are nodes (a copy) without the addresses in drop.
func withoutAddrs(nodes []cluster.Node, drop []netip.Addr) []cluster.Node {
	drop = cluster.SortedAddrs(drop)
	out := slices.Clone(nodes)
	for i, n := range out {
		out[i].Addresses = slices.DeleteFunc(slices.Clone(n.Addresses), func(a netip.Addr) bool {
			_, found := slices.BinarySearchFunc(drop, a.Unmap(), netip.Addr.Compare)
			return found
		})
	}
	return out
}

// addServices lays out the Services' groups (cluster.ServiceGroups) and
// adds those AssignServices lets this node hold: a HeldGroup, the group's
// track files, and one instance per family holding every address of that
// family the group has.
//
// One instance holds them all, but its adverts carry the first alone
// (virtual_ipaddress) and the rest are virtual_ipaddress_excluded:
// keepalived adds and deletes those with the instance's state (and sends
// their gratuitous ARPs and NAs) but leaves them out of its adverts, as
// keepalived.conf(5) describes it "for cases with large numbers (eg 200)
// of IPs on the same interface". With every address in virtual_ipaddress
// an advert's 8-bit count caps an instance at 255, one MTU at fewer
// (keepalived 2.2.7 moves the excess to the excluded list with a
// configuration error: 89 IPv6 addresses at MTU 1500), every advert grows
// with the Services, and, as keepalived drops an advert that does not
// list exactly its own virtual_ipaddress, any Service added or deleted
// would make the group's nodes drop each other's adverts (and claim the
// group) until all had rendered. Now that happens only when the group's
// lowest address of a family changes.
//
// In unicast mode, a Services group this node holds alone (a Local
// Service with one endpoint node, a one-node cluster) or whose other
// holders have no address of a family has no peer to advertise to: its
// instance is rendered without unicast peers (multicast, which reaches
// nobody it concerns) instead of failing the whole render as ErrNoPeers
// does for the API; and a family this node has no address of (an IPv6
// Service on an IPv4-only node) is left to the nodes that do.
func (d *Plan) addServices(m *cluster.Model, s cluster.Snapshot, svcs []cluster.LBService, selfIPs []netip.Addr) error {
	spec := m.Spec()
	groups, err := serviceGroups(spec.Name, *spec.Services, m.RouterIDsTaken(), svcs)
	if err != nil {
		return fmt.Errorf("the Services' VRRP layout: %w", err)
	}
	// The API and ingress VIPs are no node's address either (see Assign).
	for _, a := range cluster.AssignServices(spec.Node, withoutAddrs(s.Nodes, m.VIPs()), groups) {
		var sets [][]netip.Addr
		var held []netip.Addr
		for _, v6 := range []bool{false, true} {
			set := slices.DeleteFunc(slices.Clone(a.Group.VIPs), func(x netip.Addr) bool { return x.Is6() != v6 })
			if len(set) == 0 {
				continue
			}
			if _, ok := firstOfFamily(selfIPs, v6); spec.VRRP.Unicast && !ok {
				continue
			}
			sets = append(sets, set)
			held = append(held, set...)
		}
		if len(sets) == 0 {
			continue
		}
		var peers []netip.Addr
		for _, n := range a.Peers {
			peers = append(peers, n.Addresses...)
		}
		d.Groups = append(d.Groups, HeldGroup{Name: a.Group.Name, Check: a.Group.Check, VRID: a.Group.RouterID, VIPs: held, Peers: cluster.SortedAddrs(peers)})
		if err := d.addVRRP(m, a, sets, selfIPs); err != nil {
			return err
		}
	}
	return nil
}

// serviceGroups is cluster.ServiceGroups, replaced by tests: New checks
// what it would refuse (the settings, the router IDs), so a model leaves
// it nothing to fail on today; should it ever fail, the render fails and
// the last good files stay.
var serviceGroups = cluster.ServiceGroups

// InstanceName is the keepalived vrrp_instance of a group's VIP:
// CLUSTER_GROUP_v4 or CLUSTER_GROUP_v6. vrrp-scan and the guard name
// instances the same way.
func InstanceName(clusterName, group string, vip netip.Addr) string {
	return fmt.Sprintf("%s_%s_%s", clusterName, group, cluster.Family(vip))
}

// SplitPath is the file by which lbconfig's split-brain check steps a
// group down (1) or lets keepalived decide (0).
func SplitPath(m *cluster.Model, group string) string {
	return filepath.Join(m.Spec().TrackDir, m.Name()+"-"+group+".split")
}

// BoostPath is the file by which lbconfig raises the priority of a group's
// holder (vrrp.HolderBoost).
func BoostPath(m *cluster.Model, group string) string {
	return filepath.Join(m.Spec().TrackDir, m.Name()+"-"+group+".boost")
}

// TrackPath is the track file of a VIP group, the one the keepalived
// template names and lbconfig's health checks write.
func TrackPath(m *cluster.Model, group string) string {
	return filepath.Join(m.Spec().TrackDir, m.Name()+"-"+group+".health")
}

func unicast(instance, node string, selfIPs []netip.Addr, peers []cluster.Node, v6 bool) (string, []string, error) {
	src, ok := firstOfFamily(selfIPs, v6)
	if !ok {
		fam := "v4"
		if v6 {
			fam = "v6"
		}
		return "", nil, fmt.Errorf("%s: node %q has no %s address for unicast", instance, node, fam)
	}
	var addrs []netip.Addr
	for _, n := range peers {
		if a, ok := firstOfFamily(n.Addresses, v6); ok && a != src {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return "", nil, fmt.Errorf("%s: %w", instance, ErrNoPeers)
	}
	var out []string
	for _, p := range cluster.SortedAddrs(addrs) {
		out = append(out, p.String())
	}
	return src.String(), out, nil
}

// backends are the ready apiservers, or the static ones while there are
// none (bootstrap). Server names are unique by construction, as haproxy
// refuses a file with two servers of one name: NODE_FAMILY for a node's
// apiserver (master-0_v4), addr_ADDRESS_FAMILY for an address no node has,
// and NODE_ADDRESS_PORT when a node has several apiservers of a family. A
// Node name never holds '_', and the parts after it differ in shape, so no
// two backends get one name whatever the Nodes are called (with NODE-2
// suffixes a Node called master-0-2 once stopped every render).
func backends(s cluster.Snapshot, spec cluster.Spec, nodes []cluster.Node) ([]Backend, error) {
	eps := s.APIServers
	if len(eps) == 0 {
		eps = spec.StaticBackends
	}
	if len(eps) == 0 {
		return nil, ErrNoBackends
	}
	eps = slices.Clone(eps)
	for i, e := range eps {
		eps[i] = netip.AddrPortFrom(e.Addr().Unmap(), cmp.Or(e.Port(), spec.APIPort))
	}
	slices.SortFunc(eps, func(a, b netip.AddrPort) int { return a.Compare(b) })
	eps = slices.Compact(eps)
	who := make([]string, len(eps))
	count := map[string]int{}
	for i, e := range eps {
		who[i] = "addr_" + addrWord(e.Addr())
		for _, n := range nodes {
			if slices.Contains(n.Addresses, e.Addr()) {
				who[i] = n.Name
				break
			}
		}
		count[who[i]+"_"+cluster.Family(e.Addr())]++
	}
	out := make([]Backend, 0, len(eps))
	for i, e := range eps {
		name := who[i] + "_" + cluster.Family(e.Addr())
		if count[name] > 1 {
			name = fmt.Sprintf("%s_%s_%d", who[i], addrWord(e.Addr()), e.Port())
		}
		out = append(out, Backend{Name: name, Address: e.String()})
	}
	return out, nil
}

// addrWord is an address as a server name part: dots and colons as '-'.
func addrWord(a netip.Addr) string {
	return strings.NewReplacer(".", "-", ":", "-").Replace(a.String())
}

// authPass is OpenShift's "<cluster>_<group>_vip", cut to the 8 characters
// keepalived keeps (it truncates longer ones with a warning, which -t
// reports as an error).
func authPass(clusterName, group string) string {
	p := clusterName + "_" + group + "_vip"
	if len(p) > 8 {
		p = p[:8]
	}
	return p
}

func firstOfFamily(as []netip.Addr, v6 bool) (netip.Addr, bool) {
	for _, a := range cluster.SortedAddrs(as) {
		if a.Is6() == v6 {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// VRRPInstances are the plan's instances as the VRRP guard compares them
// with what it hears on the link.
// VIPs are the addresses its adverts carry, Excluded those it holds
// without advertising them.
func (p Plan) VRRPInstances() []vrrp.Instance {
	out := make([]vrrp.Instance, 0, len(p.Instances))
	for _, in := range p.Instances {
		vi := vrrp.Instance{Name: in.Name, VRID: in.VRID}
		for _, v := range in.VIPs {
			if pfx, err := netip.ParsePrefix(v); err == nil {
				vi.VIPs = append(vi.VIPs, pfx.Addr())
				vi.V6 = pfx.Addr().Is6()
			}
		}
		for _, v := range in.Excluded {
			if pfx, err := netip.ParsePrefix(v); err == nil {
				vi.Excluded = append(vi.Excluded, pfx.Addr())
			}
		}
		out = append(out, vi)
	}
	return out
}

// Advertised are the group's VIPs its instances' adverts carry: the first
// of each family (every VIP of an API or ingress group). What a peer's
// advert for the group lists, as vrrp.LinkGroup's VIPs must be.
func (g HeldGroup) Advertised() []netip.Addr {
	var out []netip.Addr
	for _, a := range g.VIPs {
		if !slices.ContainsFunc(out, func(b netip.Addr) bool { return b.Is6() == a.Is6() }) {
			out = append(out, a)
		}
	}
	return out
}

// Peers are the unicast peers of all instances (empty in multicast mode).
func (p Plan) Peers() []netip.Addr {
	var out []netip.Addr
	for _, in := range p.Instances {
		for _, s := range in.Peers {
			if a, err := netip.ParseAddr(s); err == nil {
				out = append(out, a)
			}
		}
	}
	return cluster.SortedAddrs(out)
}

// Instances are the VRRP instances of groups, as a node eligible for all of
// them runs them, one per family even where a group has no VIP of that
// family: what `infradns vrrp-scan` checks the link against. A family's
// first VIP is advertised, any others (a Services group's) Excluded.
func Instances(clusterName string, groups []cluster.Group) []vrrp.Instance {
	var out []vrrp.Instance
	for _, g := range groups {
		for _, fam := range []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()} {
			in := vrrp.Instance{Name: InstanceName(clusterName, g.Name, fam), VRID: g.RouterID, V6: fam.Is6()}
			for _, a := range g.VIPs {
				switch {
				case a.Is6() != fam.Is6():
				case len(in.VIPs) == 0:
					in.VIPs = append(in.VIPs, a)
				default:
					in.Excluded = append(in.Excluded, a)
				}
			}
			out = append(out, in)
		}
	}
	return out
}
