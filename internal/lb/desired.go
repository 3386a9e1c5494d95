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
	// in the model's order; in BGP mode there are no Instances, and these
	// say what to announce once their checks pass.
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
	// VIPs are written with their host prefix (/32, /128).
	VIPs []string
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
// It never returns a result with an empty backend list or, in unicast mode,
// an empty peer list (ErrNoBackends, ErrNoPeers), nor one with a value a
// field may not hold (ErrUnsafe).
func Desired(s cluster.Snapshot, m *cluster.Model) (Plan, error) {
	spec := m.Spec()
	if spec.Interface == "" || spec.Interface == "auto" || spec.Node == "" {
		return Plan{}, fmt.Errorf("node name %q and interface %q must be known before a render", spec.Node, spec.Interface)
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
		track := TrackFile{Name: spec.Name + "_" + g.Name, Path: TrackPath(m, g.Name), Hold: a.Spread && !a.Home}
		split := TrackFile{Name: track.Name + "_split", Path: SplitPath(m, g.Name), Split: true}
		boost := TrackFile{Name: track.Name + "_boost", Path: BoostPath(m, g.Name), Boost: true}
		d.TrackFiles = append(d.TrackFiles, track, split, boost)
		for _, vip := range g.VIPs {
			in := Instance{
				Name:     InstanceName(spec.Name, g.Name, vip),
				VRID:     g.RouterID,
				Priority: RankPriority(a.Rank),
				VIPs:     []string{netip.PrefixFrom(vip, vip.BitLen()).String()},
				Track:    track.Name,
				Split:    split.Name,
				Boost:    boost.Name,
			}
			if spec.VRRP.Version == 2 {
				in.AuthPass = authPass(spec.Name, g.Name)
			}
			if spec.VRRP.Unicast {
				if in.SrcIP, in.Peers, err = unicast(in.Name, spec.Node, selfIPs, a.Peers, vip.Is6()); err != nil {
					return Plan{}, err
				}
			}
			d.Instances = append(d.Instances, in)
		}
	}
	if err := d.check(); err != nil {
		return Plan{}, err
	}
	return d, nil
}

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
		out = append(out, vi)
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
// family: what `infradns vrrp-scan` checks the link against.
func Instances(clusterName string, groups []cluster.Group) []vrrp.Instance {
	var out []vrrp.Instance
	for _, g := range groups {
		for _, fam := range []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()} {
			in := vrrp.Instance{Name: InstanceName(clusterName, g.Name, fam), VRID: g.RouterID, V6: fam.Is6()}
			for _, a := range g.VIPs {
				if a.Is6() == fam.Is6() {
					in.VIPs = append(in.VIPs, a)
				}
			}
			out = append(out, in)
		}
	}
	return out
}
