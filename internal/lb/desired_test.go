package lb

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
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
