package cluster

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// snapshot: three control-plane nodes and two workers; routers on
// master-2, worker-0 and worker-1.
func snapshot() Snapshot {
	s := Snapshot{IngressNodes: []string{"worker-1", "master-2", "worker-0"}}
	for i, n := range []string{"worker-1", "master-0", "worker-0", "master-2", "master-1"} {
		s.Nodes = append(s.Nodes, Node{Name: n, ControlPlane: strings.HasPrefix(n, "master"),
			Addresses: []netip.Addr{netip.AddrFrom4([4]byte{198, 51, 100, byte(11 + i)})}})
	}
	return s
}

func model(t *testing.T, node string, ingress ...string) *Model {
	t.Helper()
	s := spec()
	s.Node = node
	s.IngressVIPs = ips(ingress...)
	m, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func exclude(s *Snapshot, names ...string) {
	for i := range s.Nodes {
		if slices.Contains(names, s.Nodes[i].Name) {
			s.Nodes[i].Excluded = true
		}
	}
}

func describe(as []Assignment) []string {
	var out []string
	for _, a := range as {
		var peers []string
		for _, p := range a.Peers {
			peers = append(peers, p.Name)
		}
		out = append(out, fmt.Sprintf("%s rank=%d home=%v spread=%v peers=%v", a.Group.Name, a.Rank, a.Home, a.Spread, peers))
	}
	return out
}

// TestAssignDrainTouchesNoOtherNode: labelling one node changes no other
// node's assignments (ranks, home, peers), whichever node is drained: only
// the drained node's keepalived reloads.
func TestAssignDrainTouchesNoOtherNode(t *testing.T) {
	three := []string{"192.0.2.10", "192.0.2.11", "192.0.2.12"}
	for _, drained := range snapshot().Nodes {
		for _, other := range snapshot().Nodes {
			if other.Name == drained.Name {
				continue
			}
			before, err := Assign(model(t, other.Name, three...), snapshot())
			if err != nil {
				t.Fatal(err)
			}
			s := snapshot()
			exclude(&s, drained.Name)
			after, err := Assign(model(t, other.Name, three...), s)
			if err != nil {
				t.Fatal(err)
			}
			if b, a := describe(before), describe(after); !slices.Equal(b, a) {
				t.Errorf("%s drained: %s's assignments changed from\n  %s\nto\n  %s", drained.Name, other.Name, strings.Join(b, "\n  "), strings.Join(a, "\n  "))
			}
		}
		s := snapshot()
		exclude(&s, drained.Name)
		if as, err := Assign(model(t, drained.Name, three...), s); err != nil || len(as) != 0 {
			t.Errorf("%s drained still holds %v (%v)", drained.Name, describe(as), err)
		}
	}
}

func TestAssign(t *testing.T) {
	three := []string{"192.0.2.10", "192.0.2.11", "192.0.2.12", "2001:db8::10", "2001:db8::11", "2001:db8::12"}
	tests := []struct {
		name    string
		node    string
		ingress []string
		snap    func(*Snapshot)
		want    []string
	}{
		{name: "control plane without a router", node: "master-0", ingress: []string{"192.0.2.10"},
			want: []string{"api rank=0 home=true spread=false peers=[master-1 master-2]"}},
		{name: "control plane with a router", node: "master-2", ingress: []string{"192.0.2.10"},
			want: []string{
				"api rank=2 home=false spread=false peers=[master-0 master-1]",
				"ingress rank=0 home=true spread=false peers=[worker-0 worker-1]",
			}},
		{name: "router only", node: "worker-1", ingress: []string{"192.0.2.10"},
			want: []string{"ingress rank=2 home=false spread=false peers=[master-2 worker-0]"}},
		{name: "unknown node holds nothing", node: "stranger", ingress: []string{"192.0.2.10"}},
		// exclude-from-external-load-balancers: the drained node gives its
		// groups to the others, whose ranks and peers stay as they were (a
		// drain changes no other node's keepalived.conf).
		{name: "drained control-plane node holds nothing", node: "master-0", ingress: []string{"192.0.2.10"},
			snap: func(s *Snapshot) { exclude(s, "master-0") }},
		{name: "the others keep their ranks when a node is drained", node: "master-1", ingress: []string{"192.0.2.10"},
			snap: func(s *Snapshot) { exclude(s, "master-0") },
			want: []string{"api rank=1 home=false spread=false peers=[master-0 master-2]"}},
		{name: "a drained node gives up every group another node can hold", node: "master-2", ingress: []string{"192.0.2.10"},
			snap: func(s *Snapshot) { exclude(s, "master-2") }},
		{name: "a group no one else can hold stays", node: "master-2", ingress: []string{"192.0.2.10"},
			snap: func(s *Snapshot) {
				exclude(s, "master-0", "master-1", "master-2")
				s.IngressNodes = []string{"master-2"}
			},
			want: []string{"api rank=2 home=false spread=false peers=[master-0 master-1]", "ingress rank=0 home=true spread=false peers=[]"}},
		{name: "worker without a router holds nothing", node: "worker-0", ingress: []string{"192.0.2.10"},
			snap: func(s *Snapshot) { s.IngressNodes = []string{"master-2"} }},
		// Three groups over the routers master-2, worker-0, worker-1: each
		// is home to one, and the next in line backs it up.
		{name: "three groups, first router", node: "master-2", ingress: three,
			want: []string{
				"api rank=2 home=false spread=false peers=[master-0 master-1]",
				"ingress rank=0 home=true spread=true peers=[worker-0 worker-1]",
				"ingress-2 rank=2 home=false spread=true peers=[worker-0 worker-1]",
				"ingress-3 rank=1 home=false spread=true peers=[worker-0 worker-1]",
			}},
		{name: "three groups, second router", node: "worker-0", ingress: three,
			want: []string{
				"ingress rank=1 home=false spread=true peers=[master-2 worker-1]",
				"ingress-2 rank=0 home=true spread=true peers=[master-2 worker-1]",
				"ingress-3 rank=2 home=false spread=true peers=[master-2 worker-1]",
			}},
		// More groups than routers: master-2 ranks first for ingress and
		// ingress-3, but only the first is its home.
		{name: "three groups over two routers", node: "master-2", ingress: three,
			snap: func(s *Snapshot) { s.IngressNodes = []string{"master-2", "worker-0"} },
			want: []string{
				"api rank=2 home=false spread=false peers=[master-0 master-1]",
				"ingress rank=0 home=true spread=true peers=[worker-0]",
				"ingress-2 rank=1 home=false spread=true peers=[worker-0]",
				"ingress-3 rank=0 home=false spread=true peers=[worker-0]",
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := snapshot()
			if tc.snap != nil {
				tc.snap(&s)
			}
			as, err := Assign(model(t, tc.node, tc.ingress...), s)
			if err != nil {
				t.Fatal(err)
			}
			if got := describe(as); !slices.Equal(got, tc.want) {
				t.Errorf("Assign =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// TestAssignSpreads: with N routers and N groups every router is home to
// exactly one group and every group has exactly one home, for any N.
func TestAssignSpreads(t *testing.T) {
	for n := 1; n <= 6; n++ {
		var vips []string
		s := Snapshot{}
		for i := range n {
			vips = append(vips, fmt.Sprintf("192.0.2.%d", 10+i))
			name := fmt.Sprintf("router-%d", i)
			s.Nodes = append(s.Nodes, Node{Name: name, Addresses: []netip.Addr{netip.AddrFrom4([4]byte{198, 51, 100, byte(11 + i)})}})
			s.IngressNodes = append(s.IngressNodes, name)
		}
		homes := map[string]string{}
		for _, node := range s.IngressNodes {
			as, err := Assign(model(t, node, vips...), s)
			if err != nil {
				t.Fatal(err)
			}
			if len(as) != n {
				t.Fatalf("n=%d: %s may hold %d groups, want all %d", n, node, len(as), n)
			}
			for _, a := range as {
				if !a.Home {
					continue
				}
				if prev, ok := homes[a.Group.Name]; ok {
					t.Errorf("n=%d: %s is home on %s and %s", n, a.Group.Name, prev, node)
				}
				homes[a.Group.Name] = node
			}
		}
		if len(homes) != n {
			t.Errorf("n=%d: homes %v, want one per group", n, homes)
		}
	}
}

func TestAssignBootstrap(t *testing.T) {
	// Before the API a node ranks by its address among the static backends
	// (distinct priorities for the control plane); an address that is none
	// of them ranks 0.
	backends := func(as ...string) []netip.AddrPort {
		var out []netip.AddrPort
		for _, a := range as {
			out = append(out, netip.MustParseAddrPort(a+":6443"))
		}
		return out
	}
	three := backends("198.51.100.12", "198.51.100.10", "198.51.100.11")
	for _, tc := range []struct {
		name     string
		ip       string
		backends []netip.AddrPort
		want     string
	}{
		{"one bootstrap node", "198.51.100.10", backends("198.51.100.10"), "api rank=0 home=true spread=false peers=[]"},
		{"first of three", "198.51.100.10", three, "api rank=0 home=true spread=false peers=[]"},
		{"second of three", "198.51.100.11", three, "api rank=1 home=false spread=false peers=[]"},
		{"third of three", "198.51.100.12", three, "api rank=2 home=false spread=false peers=[]"},
		{"not a backend", "198.51.100.99", three, "api rank=0 home=true spread=false peers=[]"},
	} {
		s := spec()
		s.Node, s.NodeIPs, s.StaticBackends = "bootstrap", ips(tc.ip), tc.backends
		m, err := New(s)
		if err != nil {
			t.Fatal(err)
		}
		as, err := Assign(m, Snapshot{})
		if err != nil {
			t.Fatal(err)
		}
		if got := describe(as); !slices.Equal(got, []string{tc.want}) {
			t.Errorf("%s: assignment = %v, want %s", tc.name, got, tc.want)
		}
	}
	// Without static backends an empty snapshot is an API not read.
	if _, err := Assign(model(t, "master-0", "192.0.2.10"), Snapshot{}); !errors.Is(err, ErrNoNodes) {
		t.Errorf("Err = %v, want ErrNoNodes", err)
	}
}

// TestAssignDropsVIPsFromNodes: a Node that lists a VIP among its addresses
// (kubelet picked it from the interface holding it) does not make the VIP a
// unicast peer.
func TestAssignDropsVIPsFromNodes(t *testing.T) {
	s := snapshot()
	for i := range s.Nodes {
		if s.Nodes[i].Name == "master-1" {
			s.Nodes[i].Addresses = append(s.Nodes[i].Addresses, netip.MustParseAddr("192.0.2.5"))
		}
	}
	as, err := Assign(model(t, "master-0", "192.0.2.10"), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range as[0].Peers {
		if slices.Contains(p.Addresses, netip.MustParseAddr("192.0.2.5")) {
			t.Errorf("peer %s keeps the API VIP: %v", p.Name, p.Addresses)
		}
	}
	if n, _ := s.Node("master-1"); len(n.Addresses) != 2 {
		t.Errorf("Assign changed the caller's snapshot: %v", n.Addresses)
	}
}
