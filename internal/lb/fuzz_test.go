package lb

import (
	"context"
	"net/netip"
	"testing"

	"github.com/infradns/infradns/internal/cluster"
)

// FuzzRender drives the render input path with arbitrary node names,
// addresses and ports (what the API could send, unchecked: internal/kube's
// checks are not in the way here): Desired must either refuse the snapshot
// or produce files that the real keepalived -t and haproxy -c accept.
//
//	go test -run '^$' -fuzz FuzzRender -parallel 1 ./internal/lb/
func FuzzRender(f *testing.F) {
	f.Add("master-1", "198.51.100.12", uint16(6443), "master-1", true)
	f.Add("master-1", "fd00::3%eth0}\n notify_master \"/bin/sh\"\n{", uint16(6443), "master-1", true)
	f.Add("master-1\n}\nglobal_defs {", "198.51.100.12", uint16(6443), "master-1", false)
	f.Add("master-0-2", "2001:db8:1::12", uint16(0), "master-0-2", true)
	f.Add("a b}", "0.0.0.0", uint16(65535), "a b}", false)
	f.Add("x", "::ffff:198.51.100.12", uint16(1), "x", true)
	tools := labTools(f)
	f.Fuzz(func(t *testing.T, name, addr string, port uint16, router string, unicast bool) {
		a, err := netip.ParseAddr(addr)
		if err != nil {
			return // only parsed addresses reach a snapshot
		}
		s := snap(2, true)
		s.Nodes = append(s.Nodes, Node{Name: name, ControlPlane: true, Addresses: []netip.Addr{a}})
		s.APIServers = append(s.APIServers, netip.AddrPortFrom(a, port))
		s.IngressNodes = append(s.IngressNodes, router)
		c := spec(true)
		c.VRRP.Unicast = unicast
		c.IngressVIPs = ips("192.0.2.10", "192.0.2.11", "2001:db8::10")
		m, err := cluster.New(c)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Desired(s, m)
		if err != nil {
			return // refused: the last good files stay
		}
		k, err := RenderKeepalived(p)
		if err != nil {
			t.Fatal(err)
		}
		h, err := RenderHAProxy(p)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := tools.Validate(ctx, Keepalived, k); err != nil {
			t.Fatalf("accepted a plan keepalived refuses: %v\n%s", err, k)
		}
		if err := tools.Validate(ctx, HAProxyCfg, h); err != nil {
			t.Fatalf("accepted a plan haproxy refuses: %v\n%s", err, h)
		}
	})
}
