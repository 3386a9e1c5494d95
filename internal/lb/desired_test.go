package lb

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/infradns/infradns/internal/cluster"
)

// TestDesiredRefuses: snapshots that must not replace the last good files.
// What the configuration itself may not say is refused earlier, by
// cluster.New (internal/cluster's TestNewRefuses).
func TestDesiredRefuses(t *testing.T) {
	tests := []struct {
		name string
		s    func(*Snapshot)
		c    func(*cluster.Spec)
		want error  // errors.Is target, or nil to match text
		text string // substring of the error
	}{
		{name: "api lost: no nodes", s: func(s *Snapshot) { *s = Snapshot{} }, want: ErrNoNodes},
		{name: "no apiserver endpoints", s: func(s *Snapshot) { s.APIServers = nil }, want: ErrNoBackends},
		{name: "unicast, peers not listed", s: func(s *Snapshot) { s.Nodes = s.Nodes[:1] }, c: func(c *cluster.Spec) { c.VRRP.Unicast = true }, want: ErrNoPeers},
		{name: "unicast, no v6 address of our own", c: func(c *cluster.Spec) {
			c.VRRP.Unicast = true
			c.APIVIPs = ips("2001:db8::5")
			c.IngressVIPs = nil
		}, text: "no v6 address"},
		{name: "interface not resolved yet", c: func(c *cluster.Spec) { c.Interface = "auto" }, text: "interface"},
		{name: "node name not known yet", c: func(c *cluster.Spec) { c.Node = "" }, text: "node name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := desiredOf(tc.s, tc.c)
			if err == nil {
				t.Fatal("Expected an error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Err = %v, want %v", err, tc.want)
			}
			if tc.text != "" && !strings.Contains(err.Error(), tc.text) {
				t.Errorf("Err = %v, want it to mention %q", err, tc.text)
			}
		})
	}
}

func TestDesiredEligibility(t *testing.T) {
	names := func(p Plan) []string {
		var out []string
		for _, in := range p.Instances {
			out = append(out, in.Name)
		}
		return out
	}
	s := snap(3, false)
	s.Nodes = append(s.Nodes, Node{Name: "worker-0", Addresses: ips("198.51.100.21")}, Node{Name: "worker-1", Addresses: ips("198.51.100.22")})
	s.IngressNodes = []string{"master-2", "worker-0"}
	tests := []struct {
		node string
		want []string
	}{
		{"master-0", []string{"ocp4_api_v4"}},                    // control plane, no router
		{"master-2", []string{"ocp4_api_v4", "ocp4_ingress_v4"}}, // both
		{"worker-0", []string{"ocp4_ingress_v4"}},                // router only
		{"worker-1", nil},     // neither: holds no VIP
		{"unknown-node", nil}, // not registered: never fights
	}
	for _, tc := range tests {
		t.Run(tc.node, func(t *testing.T) {
			c := spec(false)
			c.Node = tc.node
			p, err := Desired(s, mustModel(c))
			if err != nil {
				t.Fatal(err)
			}
			if got := names(p); !slices.Equal(got, tc.want) {
				t.Errorf("Instances = %v, want %v", got, tc.want)
			}
		})
	}

	// Unicast: the ingress peers are the other router nodes only, never a
	// node serving another shard or no router at all.
	c := spec(false)
	c.Node = "worker-0"
	c.VRRP.Unicast = true
	p, err := Desired(s, mustModel(c))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Instances) != 1 || !slices.Equal(p.Instances[0].Peers, []string{"198.51.100.13"}) || p.Instances[0].SrcIP != "198.51.100.21" {
		t.Errorf("Ingress unicast instance = %+v", p.Instances)
	}
}

func TestDesiredBackends(t *testing.T) {
	s := snap(2, true)
	s.APIServers = append(s.APIServers, ap("198.51.100.11:6443"), ap("[::ffff:198.51.100.99]:6443"))
	p, err := Desired(s, config(true))
	if err != nil {
		t.Fatal(err)
	}
	want := []Backend{
		{"master-0_v4", "198.51.100.11:6443"},
		{"master-1_v4", "198.51.100.12:6443"},
		{"addr_198-51-100-99_v4", "198.51.100.99:6443"},
		{"master-0_v6", "[2001:db8:1::11]:6443"},
		{"master-1_v6", "[2001:db8:1::12]:6443"},
	}
	if !slices.Equal(p.HAProxy.Backends, want) {
		t.Errorf("Backends = %v, want %v", p.HAProxy.Backends, want)
	}

	// Names are unique whatever the Nodes are called and however many
	// apiservers a node has (the defect: a Node named master-0-2 collided
	// with master-0's second server, and haproxy -c refused every render).
	s = Snapshot{Nodes: []Node{
		{Name: "master-0", ControlPlane: true, Addresses: ips("198.51.100.11", "198.51.100.21", "2001:db8:1::11")},
		{Name: "master-0-2", ControlPlane: true, Addresses: ips("198.51.100.12")},
		{Name: "master-0_v4", ControlPlane: true, Addresses: ips("198.51.100.13")}, // not a Node name, but still unique
		{Name: "addr", ControlPlane: true, Addresses: ips("198.51.100.14")},
	}, APIServers: []netip.AddrPort{ap("198.51.100.11:6443"), ap("198.51.100.11:6444"), ap("198.51.100.21:6443"),
		ap("[2001:db8:1::11]:6443"), ap("198.51.100.12:6443"), ap("198.51.100.13:6443"), ap("198.51.100.14:6443"),
		ap("198.51.100.99:6443"), ap("198.51.100.99:6444")}}
	p, err = Desired(s, config(true))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, b := range p.HAProxy.Backends {
		if prev, dup := seen[b.Name]; dup {
			t.Errorf("server name %s for %s and %s", b.Name, prev, b.Address)
		}
		seen[b.Name] = b.Address
	}
	if len(seen) != len(s.APIServers) {
		t.Errorf("%d names for %d apiservers: %v", len(seen), len(s.APIServers), p.HAProxy.Backends)
	}
	if h, err := RenderHAProxy(p); err != nil || !bytes.Contains(h, []byte("server master-0_198-51-100-11_6444 198.51.100.11:6444")) {
		t.Errorf("haproxy.cfg (%v):\n%s", err, h)
	}

	// Endpoints win over static backends once the API lists them.
	c := spec(false)
	c.StaticBackends = []netip.AddrPort{ap("198.51.100.10:6443")}
	p, err = Desired(snap(1, false), mustModel(c))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.HAProxy.Backends) != 1 || p.HAProxy.Backends[0].Address != "198.51.100.11:6443" {
		t.Errorf("Backends = %v, want the endpoint, not the static backend", p.HAProxy.Backends)
	}
}

// TestDesiredRefusesUnsafe: values that should never get past the API watch
// (internal/kube drops them) refuse the whole snapshot if they reach the
// render anyway; nothing a parser would act on reaches the text.
func TestDesiredRefusesUnsafe(t *testing.T) {
	zoned := netip.MustParseAddr("fd00::3%eth0}\n notify_master \"/bin/sh\"\n{")
	tests := []struct {
		name string
		s    func(*Snapshot)
		c    func(*cluster.Spec)
	}{
		{name: "node name in a server name", s: func(s *Snapshot) { s.Nodes[1].Name = "master-1\n}\nglobal" }},
		{name: "zoned peer", s: func(s *Snapshot) { s.Nodes[1].Addresses = []netip.Addr{zoned} }, c: func(c *cluster.Spec) {
			c.APIVIPs, c.IngressVIPs, c.VRRP.Unicast = ips("2001:db8::5"), nil, true
			c.NodeIPs = ips("2001:db8:1::11")
		}},
		{name: "zoned apiserver", s: func(s *Snapshot) { s.APIServers = append(s.APIServers, netip.AddrPortFrom(zoned, 6443)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := desiredOf(tc.s, tc.c)
			if !errors.Is(err, ErrUnsafe) {
				k, _ := RenderKeepalived(p)
				h, _ := RenderHAProxy(p)
				t.Fatalf("Err = %v, want ErrUnsafe; rendered:\n%s\n%s", err, k, h)
			}
		})
	}
}

// desiredOf is Desired of the three-node snapshot and the spec, each
// changed by its func when one is given.
func desiredOf(sf func(*Snapshot), cf func(*cluster.Spec)) (Plan, error) {
	s, c := snap(3, false), spec(false)
	if sf != nil {
		sf(&s)
	}
	if cf != nil {
		cf(&c)
	}
	return Desired(s, mustModel(c))
}

// TestDesiredBGP: in BGP mode a plan has no VRRP instance or track file,
// and its groups are the ones this node may announce: the API group on
// every control-plane node, an ingress group on every router node (all of
// them at once: ECMP), none on a drained node.
func TestDesiredBGP(t *testing.T) {
	bgpMode := func(c *cluster.Spec) {
		c.Mode = cluster.ModeBGP
		c.BGP = cluster.BGP{ASN: 64513, Peers: []cluster.BGPPeer{{Address: ip("198.51.100.1"), ASN: 64512}}}
	}
	groups := func(p Plan) string {
		var out []string
		for _, g := range p.Groups {
			out = append(out, fmt.Sprintf("%s(%s)%v", g.Name, g.Check, g.VIPs))
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		node  string
		snap  func(*Snapshot)
		wants string
	}{
		{"master-0", nil, "api(api)[192.0.2.5] ingress(ingress)[192.0.2.10]"},
		{"master-1", nil, "api(api)[192.0.2.5] ingress(ingress)[192.0.2.10]"},
		{"master-2", nil, "api(api)[192.0.2.5]"},
		{"master-1", func(s *Snapshot) { s.Nodes[1].Excluded = true }, ""},
	} {
		p, err := desiredOf(tc.snap, func(c *cluster.Spec) { bgpMode(c); c.Node = tc.node })
		if err != nil {
			t.Fatal(err)
		}
		if got := groups(p); got != tc.wants || len(p.Instances) != 0 || len(p.TrackFiles) != 0 {
			t.Errorf("%s: groups %q, %d instances, %d track files; want %q and none", tc.node, got, len(p.Instances), len(p.TrackFiles), tc.wants)
		}
	}
}

// TestDesiredSplitFiles: every VRRP group gets a split-brain file beside
// its track file, tracked by each of its instances, and the plan names the
// group's peers (from the Nodes, or the static backends before the API)
// whose claim to a VIP the split-brain check may settle.
func TestDesiredSplitFiles(t *testing.T) {
	boot := spec(false)
	boot.StaticBackends = []netip.AddrPort{netip.MustParseAddrPort("198.51.100.11:6443"), netip.MustParseAddrPort("198.51.100.12:6443"), netip.MustParseAddrPort("198.51.100.13:6443")}
	boot.NodeIPs = ips("198.51.100.11")
	tests := []struct {
		name  string
		s     Snapshot
		c     cluster.Spec
		peers map[string][]netip.Addr
	}{
		{"from the nodes", snap(3, true), spec(true), map[string][]netip.Addr{
			"api":     ips("198.51.100.12", "198.51.100.13", "2001:db8:1::12", "2001:db8:1::13"),
			"ingress": ips("198.51.100.12", "2001:db8:1::12"),
		}},
		{"bootstrap: the static backends", Snapshot{}, boot, map[string][]netip.Addr{
			"api": ips("198.51.100.12", "198.51.100.13"),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := mustModel(tc.c)
			p, err := Desired(tc.s, m)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]netip.Addr{}
			for _, g := range p.Groups {
				got[g.Name] = g.Peers
				var split *TrackFile
				for i, tf := range p.TrackFiles {
					if tf.Split && tf.Path == SplitPath(m, g.Name) {
						split = &p.TrackFiles[i]
					}
				}
				if split == nil {
					t.Fatalf("group %s: no split file in %+v", g.Name, p.TrackFiles)
				}
				for _, in := range p.Instances {
					if strings.HasPrefix(in.Name, "ocp4_"+g.Name+"_") && in.Split != split.Name {
						t.Errorf("instance %s tracks split file %q, want %q", in.Name, in.Split, split.Name)
					}
				}
			}
			for name, want := range tc.peers {
				if !slices.Equal(got[name], want) {
					t.Errorf("group %s: peers %v, want %v", name, got[name], want)
				}
			}
			if len(got) != len(tc.peers) {
				t.Errorf("groups %v, want %d", got, len(tc.peers))
			}
		})
	}
}

// withServices is the model of c with the Services held over VRRP.
func withServices(c cluster.Spec, cfg cluster.ServicesVRRP) *cluster.Model {
	c.Services = &cfg
	return mustModel(c)
}

// TestDesiredServicesNone: with the Services held over VRRP but none to
// hold (none at all; a Local one without an ID yet, one without an
// address, one whose only address is an API VIP), every plan is the one
// rendered without Services.
func TestDesiredServicesNone(t *testing.T) {
	idle := []cluster.LBService{
		localService("a/new", 0, []string{"master-0"}, "203.0.113.20"),
		localService("a/odd", 99, []string{"master-0"}, "203.0.113.21"),
		clusterService("a/pending"),
		clusterService("a/api", "192.0.2.5"),
	}
	for _, tc := range goldenCases() {
		if tc.c.Services() != nil {
			continue
		}
		want, err := Desired(tc.s, tc.c)
		if err != nil {
			t.Fatal(err)
		}
		for _, svcs := range [][]cluster.LBService{nil, idle} {
			s := tc.s
			s.Services = svcs
			for _, cfg := range []cluster.ServicesVRRP{{}, {Groups: 3, LocalIDs: []uint8{10, 11}}} {
				got, err := Desired(s, withServices(tc.c.Spec(), cfg))
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s, %d Services, %+v: plan\n%+v\nwant\n%+v", tc.name, len(svcs), cfg, got, want)
				}
			}
		}
	}
}

func describeInstances(p Plan) []string {
	var out []string
	for _, in := range p.Instances {
		out = append(out, fmt.Sprintf("%s vrid=%d prio=%d %v excluded=%v", in.Name, in.VRID, in.Priority, in.VIPs, in.Excluded))
	}
	return out
}

// TestDesiredServices: three nodes, two shared groups, five Cluster
// Services (one dual-stack, two sharing an address) and a Local one on ID
// 10 with endpoints on master-1 and master-2 (svcServices). Each group
// is one instance per family, holding all of its addresses of that
// family, the first in its adverts; ranks, and so priorities, rotate by
// group; the Local group is on its endpoints' nodes only.
func TestDesiredServices(t *testing.T) {
	api := map[string]string{
		"master-0": "ocp4_api_v4 vrid=222 prio=250 [192.0.2.5/32] excluded=[]",
		"master-1": "ocp4_api_v4 vrid=222 prio=210 [192.0.2.5/32] excluded=[]",
		"master-2": "ocp4_api_v4 vrid=222 prio=170 [192.0.2.5/32] excluded=[]",
	}
	for _, tc := range []struct {
		node string
		want []string
		// holds: the groups' track files that wait (Hold), by group.
		hold map[string]bool
	}{
		{"master-0", []string{
			api["master-0"],
			"ocp4_ingress_v4 vrid=61 prio=250 [192.0.2.10/32] excluded=[]",
			"ocp4_services_v4 vrid=141 prio=250 [203.0.113.1/32] excluded=[203.0.113.3/32]",
			"ocp4_services_v6 vrid=141 prio=250 [2001:db8:5::1/128] excluded=[]",
			"ocp4_services-2_v4 vrid=115 prio=170 [203.0.113.2/32] excluded=[203.0.113.4/32]",
		}, map[string]bool{"api": false, "ingress": false, "services": false, "services-2": true}},
		{"master-1", []string{
			api["master-1"],
			"ocp4_ingress_v4 vrid=61 prio=210 [192.0.2.10/32] excluded=[]",
			"ocp4_services_v4 vrid=141 prio=210 [203.0.113.1/32] excluded=[203.0.113.3/32]",
			"ocp4_services_v6 vrid=141 prio=210 [2001:db8:5::1/128] excluded=[]",
			"ocp4_services-2_v4 vrid=115 prio=250 [203.0.113.2/32] excluded=[203.0.113.4/32]",
			"ocp4_services-local-10_v4 vrid=10 prio=250 [203.0.113.9/32] excluded=[]",
		}, map[string]bool{"api": false, "ingress": false, "services": true, "services-2": false, "services-local-10": false}},
		{"master-2", []string{
			api["master-2"],
			"ocp4_services_v4 vrid=141 prio=170 [203.0.113.1/32] excluded=[203.0.113.3/32]",
			"ocp4_services_v6 vrid=141 prio=170 [2001:db8:5::1/128] excluded=[]",
			"ocp4_services-2_v4 vrid=115 prio=210 [203.0.113.2/32] excluded=[203.0.113.4/32]",
			"ocp4_services-local-10_v4 vrid=10 prio=210 [203.0.113.9/32] excluded=[]",
		}, map[string]bool{"api": false, "services": true, "services-2": true, "services-local-10": false}},
	} {
		t.Run(tc.node, func(t *testing.T) {
			c := spec(false)
			c.Node = tc.node
			m := withServices(c, cluster.ServicesVRRP{Groups: 2, LocalIDs: []uint8{10}})
			s := snap(3, false)
			s.Services = svcServices()
			p, err := Desired(s, m)
			if err != nil {
				t.Fatal(err)
			}
			if got := describeInstances(p); !slices.Equal(got, tc.want) {
				t.Errorf("Instances =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			// Every held group has its three files, tracked by each of
			// its instances, and waits (Hold) where it is not home.
			var groups []string
			for _, g := range p.Groups {
				groups = append(groups, g.Name)
				files := map[string]TrackFile{}
				for _, tf := range p.TrackFiles {
					switch tf.Path {
					case TrackPath(m, g.Name):
						files["track"] = tf
					case SplitPath(m, g.Name):
						files["split"] = tf
					case BoostPath(m, g.Name):
						files["boost"] = tf
					}
				}
				if len(files) != 3 || !files["split"].Split || !files["boost"].Boost {
					t.Fatalf("group %s: track files %+v", g.Name, files)
				}
				if hold, ok := tc.hold[g.Name]; !ok || files["track"].Hold != hold {
					t.Errorf("group %s: Hold %v, want %v", g.Name, files["track"].Hold, hold)
				}
				n := 0
				for _, in := range p.Instances {
					if in.VRID != g.VRID {
						continue
					}
					n++
					if in.Track != files["track"].Name || in.Split != files["split"].Name || in.Boost != files["boost"].Name {
						t.Errorf("instance %s tracks %s %s %s", in.Name, in.Track, in.Split, in.Boost)
					}
				}
				if n == 0 {
					t.Errorf("group %s: no instance", g.Name)
				}
			}
			if len(groups) != len(tc.hold) {
				t.Errorf("held groups %v, want those of %v", groups, tc.hold)
			}
			if i := slices.IndexFunc(p.Groups, func(g HeldGroup) bool { return g.Name == "services" }); i < 0 ||
				!slices.Equal(p.Groups[i].VIPs, ips("203.0.113.1", "203.0.113.3", "2001:db8:5::1")) ||
				!slices.Equal(p.Groups[i].Advertised(), ips("203.0.113.1", "2001:db8:5::1")) ||
				p.Groups[i].Check != cluster.CheckServices {
				t.Errorf("held group services: %+v", p.Groups)
			}
			// The guard expects the advertised address alone, and knows
			// the others as held.
			for _, vi := range p.VRRPInstances() {
				if vi.Name == "ocp4_services_v4" && (!slices.Equal(vi.VIPs, ips("203.0.113.1")) || !slices.Equal(vi.Excluded, ips("203.0.113.3")) || vi.V6) {
					t.Errorf("guard's instance %+v", vi)
				}
			}
			if _, err := RenderKeepalived(p); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestDesiredServicesUnicast: in unicast mode a Services group this node
// holds alone has no peer to advertise to: its instance has none
// (multicast) instead of failing the render as an API group without peers
// does; a family this node has no address of is left to those that do,
// its peers are the group's other holders, and a Service address a Node
// reports as its own is neither a peer nor the source.
func TestDesiredServicesUnicast(t *testing.T) {
	c := spec(false)
	c.Node = "master-1"
	c.VRRP.Unicast = true
	m := withServices(c, cluster.ServicesVRRP{Groups: 1, LocalIDs: []uint8{10}})
	s := snap(3, false)
	// kubelet reported a Service's address (below the nodes' own, so the
	// first of the family) as this node's and another's.
	s.Nodes[1].Addresses = append(s.Nodes[1].Addresses, ip("192.0.2.77"))
	s.Nodes[2].Addresses = append(ips("192.0.2.77"), s.Nodes[2].Addresses...)
	s.Services = []cluster.LBService{
		clusterService("shop/dual", "192.0.2.77", "2001:db8:5::1"),
		localService("shop/db", 10, []string{"master-1"}, "203.0.113.9"),
	}
	p, err := Desired(s, m)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range p.Instances {
		got = append(got, fmt.Sprintf("%s src=%q peers=%v", in.Name, in.SrcIP, in.Peers))
	}
	want := []string{
		`ocp4_api_v4 src="198.51.100.12" peers=[198.51.100.11 198.51.100.13]`,
		`ocp4_ingress_v4 src="198.51.100.12" peers=[198.51.100.11]`,
		`ocp4_services_v4 src="198.51.100.12" peers=[198.51.100.11 198.51.100.13]`,
		`ocp4_services-local-10_v4 src="" peers=[]`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("Instances =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for _, g := range p.Groups {
		if g.Name == "services" && (!slices.Equal(g.VIPs, ips("192.0.2.77")) || !slices.Equal(g.Peers, ips("198.51.100.11", "198.51.100.13"))) {
			t.Errorf("held group %+v: want the IPv4 address alone, peers master-0 and master-2", g)
		}
	}
	k, err := RenderKeepalived(p)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(k, []byte("unicast_peer {\n    }")) {
		t.Errorf("an empty unicast_peer block (keepalived falls back to multicast with a warning):\n%s", k)
	}
}

// TestDesiredServicesLayoutError: a layout the Services' groups cannot
// have fails the whole render (the caller keeps the last good files).
func TestDesiredServicesLayoutError(t *testing.T) {
	refused := &cluster.Error{Keys: []string{cluster.KeyServices}, Msg: "no free VRRP router ID left"}
	old := serviceGroups
	serviceGroups = func(string, cluster.ServicesVRRP, []uint8, []cluster.LBService) ([]cluster.ServiceGroup, error) {
		return nil, refused
	}
	t.Cleanup(func() { serviceGroups = old })
	s := snap(3, false)
	s.Services = svcServices()
	p, err := Desired(s, withServices(spec(false), cluster.ServicesVRRP{}))
	var ce *cluster.Error
	if !errors.As(err, &ce) || ce != refused || !strings.Contains(err.Error(), "the Services' VRRP layout: services: no free") {
		t.Errorf("Desired = %v (%d instances), want the layout's error", err, len(p.Instances))
	}
	// Without Services held over VRRP the layout is never asked for.
	if _, err := Desired(s, config(false)); err != nil {
		t.Errorf("Desired without Services: %v", err)
	}
}

// TestPlanCheckAddresses: an instance's adverts carry at most what fits
// one at the smallest IPv6 MTU (maxAdvertAddrs); what it holds beside
// them is not bounded, but checked like its VIPs.
func TestPlanCheckAddresses(t *testing.T) {
	hosts := func(n int, v6 bool) []string {
		var out []string
		for i := range n {
			if v6 {
				out = append(out, fmt.Sprintf("2001:db8:5::%x/128", i+1))
			} else {
				out = append(out, fmt.Sprintf("203.0.%d.%d/32", 113+i/250, i%250+1))
			}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		vips     []string
		excluded []string
		ok       bool
	}{
		{"76 IPv6 addresses advertised", hosts(76, true), nil, true},
		{"77 IPv6 addresses advertised", hosts(77, true), nil, false},
		{"255 IPv4 addresses advertised", hosts(255, false), nil, true},
		{"256 IPv4 addresses advertised", hosts(256, false), nil, false},
		{"one advertised, 1000 held", hosts(1, false), hosts(1000, false)[1:], true},
		{"a held address with a command", hosts(1, false), []string{"203.0.113.2/32\n notify_master /bin/sh"}, false},
		{"a held loopback address", hosts(1, false), []string{"127.0.0.1/32"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Desired(snap(3, false), config(false))
			if err != nil {
				t.Fatal(err)
			}
			p.Instances[0].VIPs, p.Instances[0].Excluded = tc.vips, tc.excluded
			if err := p.check(); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrUnsafe)) {
				t.Errorf("check = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// TestInstancesServices: vrrp-scan's instances of a Services group
// advertise its first address of each family and hold the rest.
func TestInstancesServices(t *testing.T) {
	g := cluster.Group{Name: "services", Holders: cluster.Services, RouterID: 141, VIPs: ips("203.0.113.1", "203.0.113.3", "2001:db8:5::1")}
	got := Instances("ocp4", []cluster.Group{g})
	if len(got) != 2 || got[0].Name != "ocp4_services_v4" || !slices.Equal(got[0].VIPs, ips("203.0.113.1")) || !slices.Equal(got[0].Excluded, ips("203.0.113.3")) ||
		got[1].Name != "ocp4_services_v6" || !slices.Equal(got[1].VIPs, ips("2001:db8:5::1")) || len(got[1].Excluded) != 0 {
		t.Errorf("Instances = %+v", got)
	}
	api := Instances("ocp4", config(true).Groups()[:1])
	if !slices.Equal(api[0].VIPs, ips("192.0.2.5")) || api[0].Excluded != nil || !slices.Equal(api[1].VIPs, ips("2001:db8::5")) {
		t.Errorf("API group's instances = %+v", api)
	}
}
