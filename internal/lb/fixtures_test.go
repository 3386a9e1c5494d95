package lb

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/infradns/infradns/internal/cluster"
)

type (
	Snapshot = cluster.Snapshot
	Node     = cluster.Node
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

// snap returns n control-plane nodes (dual-stack addresses when v6),
// their ready apiservers, and routers on the first two.
func snap(n int, v6 bool) Snapshot {
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

// spec is cluster ocp4 on master-0, eth0, one API and one ingress VIP per
// family asked for.
func spec(v6 bool) cluster.Spec {
	s := cluster.Spec{Name: "ocp4", Node: "master-0", Interface: "eth0",
		APIVIPs: ips("192.0.2.5"), IngressVIPs: ips("192.0.2.10")}
	if v6 {
		s.APIVIPs = append(s.APIVIPs, ip("2001:db8::5"))
		s.IngressVIPs = append(s.IngressVIPs, ip("2001:db8::10"))
	}
	return s
}

func mustModel(s cluster.Spec) *cluster.Model {
	m, err := cluster.New(s)
	if err != nil {
		panic(err)
	}
	return m
}

// config is the model of spec(v6).
func config(v6 bool) *cluster.Model { return mustModel(spec(v6)) }

// goldenCases are the plans the golden files and the real-tool checks cover.
func goldenCases() []struct {
	name string
	s    Snapshot
	c    *cluster.Model
} {
	unicast := spec(false)
	unicast.VRRP.Unicast = true
	v2 := spec(false)
	v2.VRRP.Version = 2
	v2.VRRP.AdvertInterval = time.Second
	boot := spec(false)
	boot.Node = "bootstrap"
	boot.StaticBackends = []netip.AddrPort{ap("198.51.100.10:6443"), netip.AddrPortFrom(ip("198.51.100.11"), 0)}
	worker := spec(false)
	worker.Node = "worker-0"
	ws := snap(3, false)
	ws.Nodes = append(ws.Nodes, Node{Name: "worker-0", Addresses: ips("198.51.100.21")})
	ws.IngressNodes = []string{"worker-0"}
	// Three ingress VIPs per family over three routers (master-1, master-2,
	// worker-0), seen from master-2: home of the second, first backup of
	// the third, and in unicast mode to show the peers of each.
	three := spec(true)
	three.Node = "master-2"
	three.IngressVIPs = ips("192.0.2.10", "192.0.2.11", "192.0.2.12", "2001:db8::10", "2001:db8::11", "2001:db8::12")
	three.VRRP.Unicast = true
	ts := snap(3, true)
	ts.Nodes = append(ts.Nodes, Node{Name: "worker-0", Addresses: ips("198.51.100.21", "2001:db8:1::21")})
	ts.IngressNodes = []string{"master-1", "master-2", "worker-0"}
	// The Services held over VRRP, dual-stack and unicast, seen from
	// master-1 (svcSnap).
	svc := spec(true)
	svc.Node = "master-1"
	svc.VRRP.Unicast = true
	svc.Services = &cluster.ServicesVRRP{Groups: 2, LocalIDs: []uint8{10, 11}}
	ss := snap(3, true)
	ss.Services = svcServices()
	return []struct {
		name string
		s    Snapshot
		c    *cluster.Model
	}{
		{"three-nodes", snap(3, false), config(false)},
		{"dual-stack", snap(3, true), config(true)},
		{"unicast", snap(3, false), mustModel(unicast)},
		{"bootstrap", Snapshot{}, mustModel(boot)},
		{"vrrp-v2", snap(3, false), mustModel(v2)},
		{"worker-router", ws, mustModel(worker)},
		{"three-ingress-vips", ts, mustModel(three)},
		{"services", ss, mustModel(svc)},
	}
}

func clusterService(key string, addrs ...string) cluster.LBService {
	ns, name, _ := strings.Cut(key, "/")
	return cluster.LBService{Namespace: ns, Name: name, Addrs: cluster.SortedAddrs(ips(addrs...))}
}

func localService(key string, id uint8, nodes []string, addrs ...string) cluster.LBService {
	s := clusterService(key, addrs...)
	s.Local, s.RouterID, s.Nodes = true, id, nodes
	return s
}

// svcServices are five Cluster Services and a Local one. With two shared
// groups (FNV-1a of the lowest address mod 2: 203.0.113.1 and .3 → 0,
// .2 and .4 → 1): "services" holds shop/web and shop/web-udp (sharing
// 203.0.113.1) and the dual-stack shop/dual (203.0.113.3, 2001:db8:5::1),
// "services-2" bank/api and ops/dns; shop/db is Local on ID 10 with its
// endpoints on master-1 and master-2.
func svcServices() []cluster.LBService {
	return []cluster.LBService{
		clusterService("shop/web", "203.0.113.1"),
		clusterService("shop/web-udp", "203.0.113.1"),
		clusterService("bank/api", "203.0.113.2"),
		clusterService("shop/dual", "2001:db8:5::1", "203.0.113.3"),
		clusterService("ops/dns", "203.0.113.4"),
		localService("shop/db", 10, []string{"master-2", "master-1"}, "203.0.113.9"),
	}
}
