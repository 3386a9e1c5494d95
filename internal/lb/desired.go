package lb

import (
	"cmp"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

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
	HAProxy   HAProxy
}

// TrackFile is a keepalived vrrp_track_file.
type TrackFile struct {
	Name string
	Path string
}

// Instance is one keepalived vrrp_instance: one VIP kind, one family.
type Instance struct {
	Name     string
	VRID     uint8
	Priority int
	// VIPs are written with their host prefix (/32, /128).
	VIPs []string
	// Track names the TrackFile that puts this instance in FAULT.
	Track string
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

// Desired computes the configuration for this node. It never returns a
// result with an empty backend list or, in unicast mode, an empty peer list:
// see ErrNoBackends and ErrNoPeers.
func Desired(s Snapshot, c Config) (Plan, error) {
	if err := c.check(); err != nil {
		return Plan{}, err
	}
	bootstrap := len(s.Nodes) == 0 && len(c.StaticBackends) > 0
	if len(s.Nodes) == 0 && !bootstrap {
		return Plan{}, ErrNoNodes
	}
	nodes := slices.Clone(s.Nodes)
	slices.SortFunc(nodes, func(a, b Node) int { return cmp.Compare(a.Name, b.Name) })
	var self *Node
	for i := range nodes {
		if nodes[i].Name == c.NodeName {
			self = &nodes[i]
		}
	}
	selfIPs := c.NodeIPs
	if len(selfIPs) == 0 && self != nil {
		selfIPs = self.Addresses
	}

	d := Plan{
		Cluster:     c.Cluster,
		NodeName:    c.NodeName,
		Interface:   c.Interface,
		VRRPVersion: c.VRRPVersion,
		AdvertInt:   strconv.FormatFloat(c.AdvertInterval.Seconds(), 'f', -1, 64),
	}

	backends, err := backends(s, c, nodes)
	if err != nil {
		return Plan{}, err
	}
	d.HAProxy = HAProxy{Name: c.Cluster + "_api", LBPort: c.LBPort, HealthPort: c.HealthPort, Backends: backends}

	routers := make(map[string]bool, len(s.IngressNodes))
	for _, n := range s.IngressNodes {
		routers[n] = true
	}
	kinds := []struct {
		kind     string
		vips     []netip.Addr
		vrid     uint8
		eligible bool
		peers    func(Node) bool
	}{
		{"api", c.APIVIPs, c.RouterIDs.API, bootstrap || (self != nil && self.ControlPlane),
			func(n Node) bool { return n.ControlPlane }},
		{"ingress", c.IngressVIPs, c.RouterIDs.Ingress, self != nil && routers[self.Name],
			func(n Node) bool { return routers[n.Name] }},
	}
	for _, k := range kinds {
		if !k.eligible || len(k.vips) == 0 {
			continue
		}
		track := TrackFile{Name: c.Cluster + "_" + k.kind, Path: TrackPath(c, k.kind)}
		d.TrackFiles = append(d.TrackFiles, track)
		for _, vip := range sortedAddrs(k.vips) {
			in := Instance{
				Name:     fmt.Sprintf("%s_%s_%s", c.Cluster, k.kind, family(vip)),
				VRID:     k.vrid,
				Priority: Priority,
				VIPs:     []string{netip.PrefixFrom(vip, vip.BitLen()).String()},
				Track:    track.Name,
			}
			if c.VRRPVersion == 2 {
				in.AuthPass = authPass(c.Cluster, k.kind)
			}
			if c.Unicast {
				src, ok := firstOfFamily(selfIPs, vip.Is6())
				if !ok {
					return Plan{}, fmt.Errorf("%s: node %q has no %s address for unicast", in.Name, c.NodeName, family(vip))
				}
				in.SrcIP = src.String()
				var peers []netip.Addr
				for _, n := range nodes {
					if n.Name == c.NodeName || !k.peers(n) {
						continue
					}
					if a, ok := firstOfFamily(n.Addresses, vip.Is6()); ok && a != src {
						peers = append(peers, a)
					}
				}
				if len(peers) == 0 {
					return Plan{}, fmt.Errorf("%s: %w", in.Name, ErrNoPeers)
				}
				for _, p := range sortedAddrs(peers) {
					in.Peers = append(in.Peers, p.String())
				}
			}
			d.Instances = append(d.Instances, in)
		}
	}
	return d, nil
}

func (c Config) check() error {
	switch {
	case CheckClusterName(c.Cluster) != nil:
		return CheckClusterName(c.Cluster)
	case c.Interface == "" || strings.ContainsAny(c.Interface, " \t\n\"{}"):
		return fmt.Errorf("invalid interface name %q", c.Interface)
	case len(c.APIVIPs) == 0:
		return fmt.Errorf("no api vip")
	case c.RouterIDs.API == 0 || (len(c.IngressVIPs) > 0 && c.RouterIDs.Ingress == 0):
		return fmt.Errorf("router ids not set")
	case c.RouterIDs.API == c.RouterIDs.Ingress && len(c.IngressVIPs) > 0:
		return fmt.Errorf("api and ingress router ids are both %d", c.RouterIDs.API)
	case c.LBPort == 0 || c.HealthPort == 0 || c.LBPort == c.HealthPort:
		return fmt.Errorf("lb port %d and health port %d must be set and differ", c.LBPort, c.HealthPort)
	case !filepath.IsAbs(c.TrackDir) || strings.ContainsAny(c.TrackDir, "\"\n"):
		return fmt.Errorf("track directory %q must be an absolute path", c.TrackDir)
	}
	for _, vips := range [][]netip.Addr{c.APIVIPs, c.IngressVIPs} {
		if len(vips) > 2 || (len(vips) == 2 && vips[0].Unmap().Is4() == vips[1].Unmap().Is4()) {
			return fmt.Errorf("vips %v: at most one address per family", vips)
		}
	}
	return CheckTiming(c.VRRPVersion, c.AdvertInterval)
}

// CheckClusterName accepts names that can name keepalived instances,
// haproxy sections and files as they are: letters, digits, '-' and '_', at
// most 63 characters.
func CheckClusterName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("cluster name is empty")
	case len(name) > 63 || strings.ContainsFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}):
		return fmt.Errorf("cluster name %q: at most 63 letters, digits, '-' and '_'", name)
	}
	return nil
}

// CheckTiming checks a VRRP version and advert interval pair the way
// keepalived will: v3 intervals are centiseconds (12 bits on the wire), v2
// intervals whole seconds (keepalived rounds 0.1 up to 1 s with a warning).
func CheckTiming(version int, interval time.Duration) error {
	switch version {
	case 3:
		// keepalived stores v3 intervals in centiseconds, 12 bits on the wire.
		if interval < 10*time.Millisecond || interval > 40950*time.Millisecond || interval%(10*time.Millisecond) != 0 {
			return fmt.Errorf("advert interval %s: vrrp version 3 needs a multiple of 10ms in [10ms, 40.95s]", interval)
		}
	case 2:
		if interval < time.Second || interval > 255*time.Second || interval%time.Second != 0 {
			return fmt.Errorf("advert interval %s: vrrp version 2 needs whole seconds in [1s, 255s]", interval)
		}
	default:
		return fmt.Errorf("vrrp version %d: must be 2 or 3", version)
	}
	return nil
}

// backends are the ready apiservers, or the static ones while there are
// none (bootstrap), named after their node where one has the address.
func backends(s Snapshot, c Config, nodes []Node) ([]Backend, error) {
	eps := s.APIServers
	if len(eps) == 0 {
		eps = c.StaticBackends
	}
	if len(eps) == 0 {
		return nil, ErrNoBackends
	}
	eps = slices.Clone(eps)
	for i, e := range eps {
		eps[i] = netip.AddrPortFrom(e.Addr().Unmap(), cmp.Or(e.Port(), c.APIPort))
	}
	slices.SortFunc(eps, func(a, b netip.AddrPort) int { return a.Compare(b) })
	eps = slices.Compact(eps)
	used := map[string]int{}
	out := make([]Backend, 0, len(eps))
	for _, e := range eps {
		name := "api-" + strings.NewReplacer(".", "-", ":", "-").Replace(e.Addr().String())
		for _, n := range nodes {
			if slices.Contains(n.Addresses, e.Addr()) {
				name = n.Name
				break
			}
		}
		// A node with an apiserver per family, or on two ports, still needs
		// unique server names.
		if used[name]++; used[name] > 1 {
			name = fmt.Sprintf("%s-%d", name, used[name])
		}
		out = append(out, Backend{Name: name, Address: e.String()})
	}
	return out, nil
}

// authPass is OpenShift's "<cluster>_<kind>_vip", cut to the 8 characters
// keepalived keeps (it truncates longer ones with a warning, which -t
// reports as an error).
func authPass(cluster, kind string) string {
	p := cluster + "_" + kind + "_vip"
	if len(p) > 8 {
		p = p[:8]
	}
	return p
}

func family(a netip.Addr) string {
	if a.Unmap().Is4() {
		return "v4"
	}
	return "v6"
}

func firstOfFamily(as []netip.Addr, v6 bool) (netip.Addr, bool) {
	for _, a := range sortedAddrs(as) {
		if a.Is6() == v6 {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func sortedAddrs(as []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, len(as))
	for i, a := range as {
		out[i] = a.Unmap()
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(out)
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
	return sortedAddrs(out)
}
