package cluster

import (
	"net/netip"
	"slices"
	"testing"
)

func TestServiceVIPs(t *testing.T) {
	a := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, x := range s {
			out = append(out, netip.MustParseAddr(x))
		}
		return out
	}
	svcs := []LBService{
		{Namespace: "shop", Name: "web", Addrs: a("192.0.2.10", "2001:db8::10")},
		{Namespace: "shop", Name: "db", Addrs: a("192.0.2.11"), Local: true, Nodes: []string{"worker-1", "worker-2"}},
		{Namespace: "bank", Name: "api", Addrs: a("192.0.2.12"), Local: true},
		// Shares web's address on other ports: the same policy.
		{Namespace: "shop", Name: "web-udp", Addrs: a("192.0.2.10")},
	}
	for _, tc := range []struct {
		name     string
		node     string
		excluded bool
		want     []netip.Addr
	}{
		{"a node with an endpoint of the Local Service", "worker-1", false, a("192.0.2.10", "192.0.2.11", "2001:db8::10")},
		{"a node without one: the Cluster Services only", "cp-0", false, a("192.0.2.10", "2001:db8::10")},
		{"a Local Service without a ready endpoint: nowhere", "worker-3", false, a("192.0.2.10", "2001:db8::10")},
		{"excluded from load balancers: nothing", "worker-1", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ServiceVIPs(svcs, tc.node, tc.excluded); !slices.Equal(got, tc.want) {
				t.Errorf("ServiceVIPs(%s) = %v, want %v", tc.node, got, tc.want)
			}
		})
	}
	if got := ServiceVIPs(nil, "cp-0", false); len(got) != 0 {
		t.Errorf("no Services: %v", got)
	}
}

func TestAnnouncers(t *testing.T) {
	for _, tc := range []struct {
		name string
		svc  LBService
		want []string
	}{
		{"Cluster: every node, whatever its endpoints", LBService{Nodes: []string{"w-1"}}, []string{EveryNode}},
		{"Local: the nodes with a ready endpoint", LBService{Local: true, Nodes: []string{"w-1", "w-2"}}, []string{"w-1", "w-2"}},
		{"Local without a ready endpoint: nobody", LBService{Local: true}, nil},
	} {
		if got := tc.svc.Announcers(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
