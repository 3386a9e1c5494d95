package lb

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/infradns/infradns/internal/vrrp"

	"sigs.k8s.io/yaml"
)

// ClusterFile is the YAML a bootstrap node (or a person) renders from when
// there is no API to ask: `infradns render -f FILE`.
type ClusterFile struct {
	Cluster        string            `json:"cluster"`
	Node           string            `json:"node"`
	Interface      string            `json:"interface"`
	NodeIPs        []string          `json:"nodeIPs,omitempty"`
	APIVIPs        []string          `json:"apiVIPs"`
	IngressVIPs    []string          `json:"ingressVIPs,omitempty"`
	APIPort        uint16            `json:"apiPort,omitempty"`
	LBPort         uint16            `json:"lbPort,omitempty"`
	HealthPort     uint16            `json:"healthPort,omitempty"`
	Unicast        bool              `json:"unicast,omitempty"`
	VRRPVersion    int               `json:"vrrpVersion,omitempty"`
	AdvertInterval string            `json:"advertInterval,omitempty"`
	RouterIDs      *RouterIDOverride `json:"routerIDs,omitempty"`
	TrackDir       string            `json:"trackDir,omitempty"`
	// Backends are static apiservers (ADDRESS or ADDRESS:PORT).
	Backends []string `json:"backends,omitempty"`
	// Nodes, APIServers and IngressNodes stand in for what the API would list.
	Nodes []struct {
		Name         string   `json:"name"`
		Addresses    []string `json:"addresses"`
		ControlPlane bool     `json:"controlPlane,omitempty"`
	} `json:"nodes,omitempty"`
	APIServers   []string `json:"apiServers,omitempty"`
	IngressNodes []string `json:"ingressNodes,omitempty"`
}

// RouterIDOverride replaces the computed VRRP router IDs; 0 keeps one.
type RouterIDOverride struct {
	API     uint8 `json:"api"`
	Ingress uint8 `json:"ingress"`
}

// ParseClusterFile reads a ClusterFile into a snapshot and a configuration,
// with the defaults and the OpenShift-compatible router IDs filled in.
// Unknown keys are errors: a misspelt option must not silently vanish.
func ParseClusterFile(b []byte) (Snapshot, Config, error) {
	var f ClusterFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return Snapshot{}, Config{}, fmt.Errorf("cluster file: %w", err)
	}
	c := NewConfig()
	c.Cluster, c.NodeName, c.Interface, c.Unicast = f.Cluster, f.Node, f.Interface, f.Unicast
	var err error
	if c.NodeIPs, err = addrs("nodeIPs", f.NodeIPs); err != nil {
		return Snapshot{}, Config{}, err
	}
	if c.APIVIPs, err = addrs("apiVIPs", f.APIVIPs); err != nil {
		return Snapshot{}, Config{}, err
	}
	if c.IngressVIPs, err = addrs("ingressVIPs", f.IngressVIPs); err != nil {
		return Snapshot{}, Config{}, err
	}
	for _, p := range []struct {
		dst *uint16
		v   uint16
	}{{&c.APIPort, f.APIPort}, {&c.LBPort, f.LBPort}, {&c.HealthPort, f.HealthPort}} {
		if p.v != 0 {
			*p.dst = p.v
		}
	}
	if f.VRRPVersion != 0 {
		c.VRRPVersion = f.VRRPVersion
	}
	if f.AdvertInterval != "" {
		if c.AdvertInterval, err = time.ParseDuration(f.AdvertInterval); err != nil {
			return Snapshot{}, Config{}, fmt.Errorf("cluster file: advertInterval: %w", err)
		}
	}
	if f.TrackDir != "" {
		c.TrackDir = f.TrackDir
	}
	ids, err := vrrp.ClusterIDs(c.Cluster)
	if err != nil {
		return Snapshot{}, Config{}, fmt.Errorf("cluster file: %w", err)
	}
	if f.RouterIDs != nil {
		if ids, err = ids.Override(f.RouterIDs.API, f.RouterIDs.Ingress); err != nil {
			return Snapshot{}, Config{}, fmt.Errorf("cluster file: routerIDs: %w", err)
		}
	}
	c.RouterIDs = ids
	if c.StaticBackends, err = addrPorts("backends", f.Backends); err != nil {
		return Snapshot{}, Config{}, err
	}

	var s Snapshot
	for _, n := range f.Nodes {
		as, err := addrs("nodes["+n.Name+"].addresses", n.Addresses)
		if err != nil {
			return Snapshot{}, Config{}, err
		}
		s.Nodes = append(s.Nodes, Node{Name: n.Name, Addresses: as, ControlPlane: n.ControlPlane})
	}
	if s.APIServers, err = addrPorts("apiServers", f.APIServers); err != nil {
		return Snapshot{}, Config{}, err
	}
	for i, a := range s.APIServers {
		if a.Port() == 0 {
			s.APIServers[i] = netip.AddrPortFrom(a.Addr(), c.APIPort)
		}
	}
	s.IngressNodes = f.IngressNodes
	return s, c, nil
}

func addrs(field string, in []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range in {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("cluster file: %s: %w", field, err)
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}

func addrPorts(field string, in []string) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for _, s := range in {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			a, err2 := netip.ParseAddr(s)
			if err2 != nil {
				return nil, fmt.Errorf("cluster file: %s: %q is not ADDRESS or ADDRESS:PORT", field, s)
			}
			ap = netip.AddrPortFrom(a, 0)
		}
		out = append(out, ap)
	}
	return out, nil
}
