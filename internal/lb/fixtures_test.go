package lb

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/infradns/infradns/internal/vrrp"
)

func ip(s string) netip.Addr     { return netip.MustParseAddr(s) }
func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
func ips(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, x := range s {
		out[i] = ip(x)
	}
	return out
}

// cluster returns n control-plane nodes (dual-stack addresses when v6),
// their ready apiservers, and routers on the first two.
func cluster(n int, v6 bool) Snapshot {
	var s Snapshot
	for i := 0; i < n; i++ {
		node := Node{Name: fmt.Sprintf("master-%d", i), ControlPlane: true,
			Addresses: []netip.Addr{netip.AddrFrom4([4]byte{198, 51, 100 + byte(i/200), byte(11 + i%200)})}}
		if v6 {
			node.Addresses = append(node.Addresses, ip(fmt.Sprintf("2001:db8:1::%x", 0x11+i)))
		}
		s.Nodes = append(s.Nodes, node)
		for _, a := range node.Addresses {
			s.APIServers = append(s.APIServers, netip.AddrPortFrom(a, 6443))
		}
		if i < 2 {
			s.IngressNodes = append(s.IngressNodes, node.Name)
		}
	}
	return s
}

func config(v6 bool) Config {
	c := NewConfig()
	c.Cluster = "ocp4"
	c.NodeName = "master-0"
	c.Interface = "eth0"
	ids, _ := vrrp.ClusterIDs(c.Cluster)
	c.RouterIDs = ids
	c.APIVIPs = ips("192.0.2.5")
	c.IngressVIPs = ips("192.0.2.10")
	if v6 {
		c.APIVIPs = append(c.APIVIPs, ip("2001:db8::5"))
		c.IngressVIPs = append(c.IngressVIPs, ip("2001:db8::10"))
	}
	return c
}

// goldenCases are the plans the golden files and the real-tool checks cover.
func goldenCases() []struct {
	name string
	s    Snapshot
	c    Config
} {
	unicast := config(false)
	unicast.Unicast = true
	v2 := config(false)
	v2.VRRPVersion = 2
	v2.AdvertInterval = time.Second
	boot := config(false)
	boot.NodeName = "bootstrap"
	boot.StaticBackends = []netip.AddrPort{ap("198.51.100.10:6443"), netip.AddrPortFrom(ip("198.51.100.11"), 0)}
	worker := config(false)
	worker.NodeName = "worker-0"
	ws := cluster(3, false)
	ws.Nodes = append(ws.Nodes, Node{Name: "worker-0", Addresses: ips("198.51.100.21")})
	ws.IngressNodes = []string{"worker-0"}
	return []struct {
		name string
		s    Snapshot
		c    Config
	}{
		{"three-nodes", cluster(3, false), config(false)},
		{"dual-stack", cluster(3, true), config(true)},
		{"unicast", cluster(3, false), unicast},
		{"bootstrap", Snapshot{}, boot},
		{"vrrp-v2", cluster(3, false), v2},
		{"worker-router", ws, worker},
	}
}
