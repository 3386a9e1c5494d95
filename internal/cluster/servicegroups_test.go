package cluster

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestServicesVRRPCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  ServicesVRRP
		want string
	}{
		{"defaults", ServicesVRRP{}, ""},
		{"the most groups and a range", ServicesVRRP{Groups: MaxServiceGroups, LocalIDs: []uint8{1, 2, 255}}, ""},
		{"too many groups", ServicesVRRP{Groups: MaxServiceGroups + 1}, "services.groups: 17: want 1 to 16 (0: 4)"},
		{"negative groups", ServicesVRRP{Groups: -1}, "services.groups: -1: want 1 to 16 (0: 4)"},
		{"zero ID", ServicesVRRP{LocalIDs: []uint8{10, 0}}, "services.localIDs: 0 is no VRRP router ID (1 to 255)"},
		{"ID twice", ServicesVRRP{LocalIDs: []uint8{10, 11, 10}}, "services.localIDs: 10 is listed twice: each Local Service needs an ID of its own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Check()
			if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
				t.Errorf("Check() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestFreeRouterIDs(t *testing.T) {
	for _, tc := range []struct {
		ingress int
		cfg     ServicesVRRP
		want    int
	}{
		{1, ServicesVRRP{}, 249}, // 255 - api - ingress - 4 shared
		{3, ServicesVRRP{Groups: 16, LocalIDs: make([]uint8, 100)}, 135},
		{16, ServicesVRRP{Groups: 16, LocalIDs: make([]uint8, 230)}, -8},
	} {
		if got := FreeRouterIDs(tc.ingress, tc.cfg); got != tc.want {
			t.Errorf("FreeRouterIDs(%d, %d groups, %d local) = %d, want %d", tc.ingress, tc.cfg.Groups, len(tc.cfg.LocalIDs), got, tc.want)
		}
	}
}

func idRange(from, to int) []uint8 {
	var out []uint8
	for i := from; i <= to; i++ {
		out = append(out, uint8(i))
	}
	return out
}

// TestServiceGroupIDs: for ocp4 the Fletcher-8 of ocp4-services, -2, ...
// plus one are 141, 115, 132, 149, 166, 183, 200, 217, 234, 165; "api" is
// 222 and "ingress" 61.
func TestServiceGroupIDs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		k     int
		taken []uint8
		want  []uint8
	}{
		{"none", 0, []uint8{222, 61}, []uint8{}},
		{"one", 1, []uint8{222, 61}, []uint8{141}},
		{"the default four", 4, []uint8{222, 61}, []uint8{141, 115, 132, 149}},
		{"steps past a taken ID", 4, []uint8{222, 61, 141, 142, 132}, []uint8{143, 115, 133, 149}},
		// services-10 is 165 and steps to 166, services-5's: on to 167.
		{"steps past an earlier group", 10, []uint8{165}, []uint8{141, 115, 132, 149, 166, 183, 200, 217, 234, 167}},
		{"wraps from 255 to 1", 9, idRange(234, 255), []uint8{141, 115, 132, 149, 166, 183, 200, 217, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ServiceGroupIDs("ocp4", tc.k, tc.taken)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ServiceGroupIDs = %v, want %v", got, tc.want)
			}
		})
	}
	// A larger k keeps every earlier group's ID.
	taken := []uint8{222, 61, 10, 11, 12}
	prev, _ := ServiceGroupIDs("ocp4", 0, taken)
	for k := 1; k <= MaxServiceGroups; k++ {
		ids, err := ServiceGroupIDs("ocp4", k, taken)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids[:k-1], prev) || slices.Contains(taken, ids[k-1]) || slices.Contains(prev, ids[k-1]) {
			t.Errorf("k=%d: IDs %v after %v", k, ids, prev)
		}
		prev = ids
	}
	for _, tc := range []struct {
		cluster string
		k       int
		taken   []uint8
		want    string
	}{
		{"ocp4", 3, idRange(1, 253), "services: no free VRRP router ID left for services-3: the API, ingress and Services groups and the localIDs take all 255"},
		{"", 1, nil, "cluster: cluster name is empty"},
	} {
		if _, err := ServiceGroupIDs(tc.cluster, tc.k, tc.taken); fmt.Sprint(err) != tc.want {
			t.Errorf("ServiceGroupIDs(%q, %d, %d taken) = %v, want %q", tc.cluster, tc.k, len(tc.taken), err, tc.want)
		}
	}
}

// TestSharedGroupOf: FNV-1a mod 4 of 192.0.2.10 is 1, of 192.0.2.11 2, of
// 192.0.2.13 0, of 2001:db8::10 3.
func TestSharedGroupOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addrs []netip.Addr
		k     int
		want  int
	}{
		{"IPv4", ips("192.0.2.10"), 4, 1},
		{"another", ips("192.0.2.11"), 4, 2},
		{"a third", ips("192.0.2.13"), 4, 0},
		{"IPv6 alone", ips("2001:db8::10"), 4, 3},
		{"dual-stack: by its IPv4", ips("192.0.2.10", "2001:db8::10"), 4, 1},
		{"dual-stack the other way round", ips("2001:db8::10", "192.0.2.10"), 4, 1},
		{"mapped", ips("::ffff:192.0.2.10"), 4, 1},
		{"by the lowest", ips("192.0.2.13", "192.0.2.10"), 4, 1},
		{"one group", ips("192.0.2.11"), 1, 0},
		{"no address", nil, 4, 0},
	} {
		if got := SharedGroupOf(tc.addrs, tc.k); got != tc.want {
			t.Errorf("%s: SharedGroupOf(%v, %d) = %d, want %d", tc.name, tc.addrs, tc.k, got, tc.want)
		}
	}
}

func localSvc(key string, id uint8, addrs ...string) LBService {
	ns, name, _ := strings.Cut(key, "/")
	return LBService{Namespace: ns, Name: name, Local: true, RouterID: id, Addrs: ips(addrs...)}
}

func clusterSvc(key string, addrs ...string) LBService {
	s := localSvc(key, 0, addrs...)
	s.Local = false
	return s
}

func TestAllocateLocalIDs(t *testing.T) {
	ids := []uint8{10, 11, 12}
	for _, tc := range []struct {
		name    string
		ids     []uint8
		svcs    []LBService
		want    map[string]uint8
		refused []string
	}{
		{"keeps its ID, a new one takes the lowest free", ids,
			[]LBService{localSvc("a/a", 12, "192.0.2.1"), localSvc("b/b", 0, "192.0.2.2")},
			map[string]uint8{"a/a": 12, "b/b": 10}, nil},
		{"two carry one ID: the earlier key keeps it", ids,
			[]LBService{localSvc("b/b", 11, "192.0.2.2"), localSvc("a/a", 11, "192.0.2.1")},
			map[string]uint8{"a/a": 11, "b/b": 10}, nil},
		{"an ID out of the range is replaced", ids,
			[]LBService{localSvc("a/a", 99, "192.0.2.1")},
			map[string]uint8{"a/a": 10}, nil},
		{"a freed ID is given again", ids,
			[]LBService{localSvc("a/a", 11, "192.0.2.1"), localSvc("c/c", 0, "192.0.2.3")},
			map[string]uint8{"a/a": 11, "c/c": 10}, nil},
		{"refused beyond the range; kept IDs first", []uint8{10, 11},
			[]LBService{localSvc("a/a", 0, "192.0.2.1"), localSvc("b/b", 0, "192.0.2.2"), localSvc("c/c", 10, "192.0.2.3")},
			map[string]uint8{"a/a": 11, "c/c": 10}, []string{"b/b"}},
		{"Services sharing an address get one ID", ids,
			[]LBService{localSvc("a/web", 0, "192.0.2.1"), localSvc("a/web-udp", 12, "192.0.2.1")},
			map[string]uint8{"a/web": 12, "a/web-udp": 12}, nil},
		{"refused together", []uint8{10},
			[]LBService{localSvc("a/a", 10, "192.0.2.9"), localSvc("b/web", 0, "192.0.2.1"), localSvc("b/web-udp", 0, "192.0.2.1")},
			map[string]uint8{"a/a": 10}, []string{"b/web", "b/web-udp"}},
		// b shares a's IPv6 address alone, c b's IPv4: one address each,
		// one group for the three.
		{"a chain of shared addresses is one group", ids,
			[]LBService{localSvc("a/a", 0, "192.0.2.1", "2001:db8::1"), localSvc("b/b", 0, "2001:db8::1", "192.0.2.2"), localSvc("c/c", 0, "192.0.2.2")},
			map[string]uint8{"a/a": 10, "b/b": 10, "c/c": 10}, nil},
		{"Cluster Services and those sharing their address get none", ids,
			[]LBService{clusterSvc("a/a", "192.0.2.1"), localSvc("a/b", 11, "192.0.2.1"), localSvc("c/c", 0)},
			map[string]uint8{}, nil},
		{"zero and twice-listed IDs in the range are ignored", []uint8{0, 11, 11},
			[]LBService{localSvc("a/a", 0, "192.0.2.1"), localSvc("b/b", 0, "192.0.2.2")},
			map[string]uint8{"a/a": 11}, []string{"b/b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, refused := AllocateLocalIDs(tc.ids, tc.svcs)
			if !maps.Equal(got, tc.want) || !slices.Equal(refused, tc.refused) {
				t.Errorf("AllocateLocalIDs = %v, refused %v; want %v, refused %v", got, refused, tc.want, tc.refused)
			}
		})
	}
}

func describeServiceGroups(gs []ServiceGroup) []string {
	var out []string
	for _, g := range gs {
		out = append(out, fmt.Sprintf("%s/%s/%d/%s/%d local=%v vips=%v nodes=%v svcs=%v", g.Name, g.Holders, g.RouterID, g.Check, g.Index, g.Local, g.VIPs, g.Nodes, g.Services))
	}
	return out
}

func TestServiceGroups(t *testing.T) {
	withNodes := func(s LBService, nodes ...string) LBService { s.Nodes = nodes; return s }
	svcs := []LBService{
		clusterSvc("shop/web", "2001:db8::10", "192.0.2.10"),
		clusterSvc("shop/web-udp", "192.0.2.10"),
		clusterSvc("bank/api", "192.0.2.13"),
		// shop/v6 alone would go to group 0 (2001:db8::11); it shares
		// shop/dual's IPv6 address, so it goes with it (192.0.2.12: 3).
		clusterSvc("shop/v6", "2001:db8::11"),
		clusterSvc("shop/dual", "192.0.2.12", "2001:db8::11"),
		// Cluster wins a shared address: held in its shared group.
		clusterSvc("ops/mixed-a", "192.0.2.30"),
		localSvc("ops/mixed-b", 12, "192.0.2.30"),
		withNodes(localSvc("shop/db", 11, "192.0.2.20"), "w-1", "w-2", "w-3"),
		withNodes(localSvc("shop/db-udp", 11, "192.0.2.20"), "w-3", "w-2", "w-4"),
		withNodes(localSvc("bank/cache", 10, "192.0.2.21"), "w-5"),
		// Not held: no ID yet, an ID out of the range.
		localSvc("bank/new", 0, "192.0.2.22"),
		localSvc("bank/odd", 99, "192.0.2.23"),
		// shop/y carries another ID than shop/x, whose address it
		// shares: left out until the writer gives it 12, so that
		// 192.0.2.40 is in one group only.
		withNodes(localSvc("shop/x", 12, "192.0.2.40"), "w-1"),
		withNodes(localSvc("shop/y", 10, "192.0.2.40", "2001:db8::40"), "w-1"),
	}
	cfg := ServicesVRRP{LocalIDs: []uint8{10, 11, 12}}
	want := []string{
		"services/services/141/services/0 local=false vips=[192.0.2.13] nodes=[] svcs=[bank/api]",
		"services-2/services/115/services/1 local=false vips=[192.0.2.10 192.0.2.30 2001:db8::10] nodes=[] svcs=[ops/mixed-a ops/mixed-b shop/web shop/web-udp]",
		"services-3/services/132/services/2 local=false vips=[] nodes=[] svcs=[]",
		"services-4/services/149/services/3 local=false vips=[192.0.2.12 2001:db8::11] nodes=[] svcs=[shop/dual shop/v6]",
		"services-local-10/services/10/services/0 local=true vips=[192.0.2.21] nodes=[w-5] svcs=[bank/cache]",
		"services-local-11/services/11/services/1 local=true vips=[192.0.2.20] nodes=[w-2 w-3] svcs=[shop/db shop/db-udp]",
		"services-local-12/services/12/services/2 local=true vips=[192.0.2.40] nodes=[w-1] svcs=[shop/x]",
	}
	// Any order of the Services gives the same groups.
	for i := range len(svcs) {
		order := append(slices.Clone(svcs[i:]), svcs[:i]...)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		gs, err := ServiceGroups("ocp4", cfg, []uint8{222, 61}, order)
		if err != nil {
			t.Fatal(err)
		}
		if got := describeServiceGroups(gs); !slices.Equal(got, want) {
			t.Fatalf("order %d: ServiceGroups =\n  %s\nwant\n  %s", i, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
	gs, err := ServiceGroups("ocp4", ServicesVRRP{Groups: 2}, []uint8{222, 61}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// No Services: every shared group still, without VIPs.
	want = []string{
		"services/services/141/services/0 local=false vips=[] nodes=[] svcs=[]",
		"services-2/services/115/services/1 local=false vips=[] nodes=[] svcs=[]",
	}
	if got := describeServiceGroups(gs); !slices.Equal(got, want) {
		t.Errorf("no Services, k=2: ServiceGroups =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestServiceGroupsRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   ServicesVRRP
		taken []uint8
		want  string
	}{
		{"bad settings", ServicesVRRP{Groups: 17}, nil, "services.groups: 17: want 1 to 16 (0: 4)"},
		{"a LocalID is the API's", ServicesVRRP{LocalIDs: []uint8{10, 222}}, []uint8{222, 61}, "services.localIDs: 222 is the router ID of the API or an ingress group"},
		// 253 Local IDs and "api", "ingress": no ID for the shared groups.
		{"no ID left", ServicesVRRP{Groups: 1, LocalIDs: slices.DeleteFunc(idRange(1, 255), func(id uint8) bool { return id == 222 || id == 61 })}, []uint8{222, 61},
			"services: no free VRRP router ID left for services: the API, ingress and Services groups and the localIDs take all 255"},
	} {
		if _, err := ServiceGroups("ocp4", tc.cfg, tc.taken, nil); fmt.Sprint(err) != tc.want {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func names(prefix string, n int) []Node {
	var out []Node
	for i := range n {
		out = append(out, Node{Name: fmt.Sprintf("%s-%d", prefix, i), Addresses: []netip.Addr{netip.AddrFrom4([4]byte{198, 51, 100, byte(10 + i)})}})
	}
	return out
}

func excluded(ns []Node, which ...int) []Node {
	out := slices.Clone(ns)
	for _, i := range which {
		out[i].Excluded = true
	}
	return out
}

func shared(i int, vips ...string) ServiceGroup {
	return ServiceGroup{Group: Group{Name: GroupName(Services, i), Holders: Services, VIPs: ips(vips...), RouterID: uint8(141 + i), Check: CheckServices, Index: i}}
}

func localGroup(id uint8, index int, nodes ...string) ServiceGroup {
	return ServiceGroup{Local: true, Nodes: nodes, Group: Group{Name: localGroupName(id), Holders: Services, VIPs: ips("192.0.2.50"), RouterID: id, Check: CheckServices, Index: index}}
}

func TestAssignServices(t *testing.T) {
	two := []ServiceGroup{shared(0, "192.0.2.10"), shared(1, "192.0.2.11")}
	ten := names("n", 10)
	seven := "[n-0 n-1 n-2 n-3 n-4 n-5 n-6]"
	for _, tc := range []struct {
		name   string
		node   string
		nodes  []Node
		groups []ServiceGroup
		want   []string
	}{
		{"ranks rotate by Index", "n-1", names("n", 3), two, []string{
			"services rank=1 home=false spread=true peers=[n-0 n-2]",
			"services-2 rank=0 home=true spread=true peers=[n-0 n-2]",
		}},
		{"more groups than nodes: one home", "n-0", names("n", 2), append(two, shared(2, "192.0.2.12")), []string{
			"services rank=0 home=true spread=true peers=[n-1]",
			"services-2 rank=1 home=false spread=true peers=[n-1]",
			"services-3 rank=0 home=false spread=true peers=[n-1]",
		}},
		{"one group: not spread", "n-0", names("n", 2), two[:1], []string{
			"services rank=0 home=true spread=false peers=[n-1]",
		}},
		{"a group without VIPs: none", "n-0", names("n", 3), []ServiceGroup{shared(0), shared(1, "192.0.2.11")}, []string{
			"services-2 rank=2 home=false spread=true peers=[n-1 n-2]",
		}},
		{"the seventh of ten holds it", "n-6", ten, two[:1], []string{
			"services rank=6 home=false spread=false peers=[n-0 n-1 n-2 n-3 n-4 n-5]",
		}},
		{"the eighth of ten does not", "n-7", ten, two[:1], nil},
		{"rotated: the window wraps", "n-1", ten, []ServiceGroup{shared(5, "192.0.2.15")}, []string{
			"services-6 rank=6 home=false spread=false peers=[n-0 n-5 n-6 n-7 n-8 n-9]",
		}},
		{"rotated: past the window", "n-2", ten, []ServiceGroup{shared(5, "192.0.2.15")}, nil},
		{"an excluded node gives its groups up", "n-0", excluded(names("n", 3), 0), two, nil},
		{"the others keep their ranks and peers", "n-1", excluded(names("n", 3), 0), two, []string{
			"services rank=1 home=false spread=true peers=[n-0 n-2]",
			"services-2 rank=0 home=true spread=true peers=[n-0 n-2]",
		}},
		{"every node excluded: kept", "n-0", excluded(names("n", 2), 0, 1), two[:1], []string{
			"services rank=0 home=true spread=false peers=[n-1]",
		}},
		// A drained rack: the seven holders of the group are all excluded,
		// the next node takes it after them.
		{"every holder excluded: the next node holds it", "n-7", excluded(ten, 0, 1, 2, 3, 4, 5, 6), two[:1], []string{
			"services rank=7 home=false spread=false peers=" + seven,
		}},
		{"every holder excluded: they leave", "n-3", excluded(ten, 0, 1, 2, 3, 4, 5, 6), two[:1], nil},
		{"every holder excluded: one node more only", "n-8", excluded(ten, 0, 1, 2, 3, 4, 5, 6), two[:1], nil},
		// Endpoints on n-3, n-5, n-9 and a node not in the list: ID 13
		// rotates by 13 mod 3 = 1.
		{"Local: on its endpoints' nodes, rotated by ID", "n-5", ten, append(two, localGroup(13, 0, "n-3", "n-5", "n-9", "gone")), []string{
			"services rank=5 home=false spread=true peers=[n-0 n-1 n-2 n-3 n-4 n-6]",
			"services-2 rank=4 home=false spread=true peers=[n-1 n-2 n-3 n-4 n-6 n-7]",
			"services-local-13 rank=0 home=true spread=false peers=[n-3 n-9]",
		}},
		{"Local: the last in rotated order", "n-3", ten, []ServiceGroup{localGroup(13, 0, "n-3", "n-5", "n-9"), localGroup(12, 1, "n-3", "n-5")}, []string{
			"services-local-13 rank=2 home=false spread=true peers=[n-5 n-9]",
			"services-local-12 rank=0 home=true spread=true peers=[n-5]",
		}},
		{"Local: not on a node without an endpoint", "n-4", names("n", 6), []ServiceGroup{localGroup(13, 0, "n-3", "n-5")}, nil},
		{"Local: an excluded endpoint node leaves", "n-5", excluded(names("n", 6), 5), []ServiceGroup{localGroup(13, 0, "n-3", "n-5")}, nil},
		{"Local without a ready endpoint: nobody", "n-5", names("n", 6), []ServiceGroup{localGroup(13, 0)}, nil},
		{"a node not in the list holds nothing", "stranger", ten, append(two, localGroup(13, 0, "stranger")), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The order of the nodes does not matter.
			nodes := slices.Clone(tc.nodes)
			slices.Reverse(nodes)
			if got := describe(AssignServices(tc.node, nodes, tc.groups)); !slices.Equal(got, tc.want) {
				t.Errorf("AssignServices =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// TestAssignServicesPeerAddresses: a node reporting a Service VIP as its
// own address (kubelet picked it off the interface holding it) is not
// given it as a unicast peer.
func TestAssignServicesPeerAddresses(t *testing.T) {
	ns := names("n", 2)
	ns[1].Addresses = append(ns[1].Addresses, netip.MustParseAddr("192.0.2.11"))
	as := AssignServices("n-0", ns, []ServiceGroup{shared(0, "192.0.2.10"), shared(1, "192.0.2.11")})
	if len(as) != 2 {
		t.Fatalf("%d assignments, want 2", len(as))
	}
	for _, a := range as {
		if got := a.Peers[0].Addresses; !slices.Equal(got, ips("198.51.100.11")) {
			t.Errorf("%s: peer n-1's addresses %v, want [198.51.100.11]", a.Group.Name, got)
		}
	}
	if !slices.Equal(ns[1].Addresses, ips("198.51.100.11", "192.0.2.11")) {
		t.Errorf("the caller's node changed: %v", ns[1].Addresses)
	}
}
