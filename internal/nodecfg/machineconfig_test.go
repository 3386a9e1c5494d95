package nodecfg

import (
	"bytes"
	"encoding/base64"
	"net/netip"
	"strings"
	"testing"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lb"

	"sigs.k8s.io/yaml"
)

// TestMachineConfig decodes the MachineConfig and Butane outputs strictly
// and checks they carry exactly the file tree render-node writes (bytes and
// modes), but the seed forward.conf, for the right pool.
func TestMachineConfig(t *testing.T) {
	for _, tc := range []struct{ role, pool string }{{ControlPlane, "master"}, {Worker, "worker"}} {
		t.Run(tc.role, func(t *testing.T) {
			f := exampleFile(t)
			f.Role = tc.role
			v, err := f.Values()
			if err != nil {
				t.Fatal(err)
			}
			outs, err := Render(v)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]Output{}
			for _, o := range outs {
				if !o.Seed {
					want[o.Path] = o
				}
			}
			if len(want) == len(outs) || len(want) < 6 {
				t.Fatalf("%d files of %d managed: want every file but the seed", len(want), len(outs))
			}

			b, err := RenderMachineConfig(tc.role, outs)
			if err != nil {
				t.Fatal(err)
			}
			var mc MachineConfig
			if err := yaml.UnmarshalStrict(b, &mc); err != nil {
				t.Fatalf("strict decode: %v\n%s", err, b)
			}
			if mc.APIVersion != "machineconfiguration.openshift.io/v1" || mc.Kind != "MachineConfig" ||
				mc.Metadata.Name != "50-"+tc.pool+"-infradns" || mc.Metadata.Labels["machineconfiguration.openshift.io/role"] != tc.pool ||
				mc.Spec.Config.Ignition.Version != IgnitionVersion {
				t.Errorf("header %+v", mc.Metadata)
			}
			got := map[string]bool{}
			for _, file := range mc.Spec.Config.Storage.Files {
				o, ok := want[file.Path]
				data, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(file.Contents.Source, "data:text/plain;charset=utf-8;base64,"))
				if !ok || err != nil || string(data) != string(o.Data) || file.Mode != int(o.Mode.Perm()) || !file.Overwrite {
					t.Errorf("MachineConfig file %s (mode %o) differs from the file tree's (%v)", file.Path, file.Mode, err)
				}
				got[file.Path] = true
			}

			b, err = RenderButane(tc.role, outs)
			if err != nil {
				t.Fatal(err)
			}
			var bu Butane
			if err := yaml.UnmarshalStrict(b, &bu); err != nil {
				t.Fatalf("strict decode: %v\n%s", err, b)
			}
			if bu.Variant != "openshift" || bu.Metadata.Name != mc.Metadata.Name || bu.Metadata.Labels["machineconfiguration.openshift.io/role"] != tc.pool {
				t.Errorf("butane header %+v %+v", bu.Variant, bu.Metadata)
			}
			for _, file := range bu.Storage.Files {
				if o, ok := want[file.Path]; !ok || file.Contents.Inline != string(o.Data) || file.Mode != int(o.Mode.Perm()) {
					t.Errorf("Butane file %s differs from the file tree's", file.Path)
				}
			}
			if len(got) != len(want) || len(bu.Storage.Files) != len(want) {
				t.Errorf("MachineConfig has %d files, Butane %d, the tree %d", len(got), len(bu.Storage.Files), len(want))
			}
		})
	}
	if _, err := RenderMachineConfig(Bootstrap, nil); err == nil {
		t.Error("a bootstrap MachineConfig: no error")
	}
}

// mcFileContents decodes a MachineConfig's files: path to contents.
func mcFileContents(t *testing.T, b []byte) map[string]string {
	t.Helper()
	var mc MachineConfig
	if err := yaml.UnmarshalStrict(b, &mc); err != nil {
		t.Fatalf("strict decode: %v\n%s", err, b)
	}
	out := map[string]string{}
	for _, f := range mc.Spec.Config.Storage.Files {
		data, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(f.Contents.Source, "data:text/plain;charset=utf-8;base64,"))
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		out[f.Path] = string(data)
	}
	return out
}

// TestPoolConfigIsPoolWide: the master pool's MachineConfig names no node
// and no node's address, so every master gets the same bytes. A node's own
// render (-node, the file tree) does name it: the MachineConfig would have
// made every master act as master-0, its name in lbconfig's Corefile
// (router_id, VRRP priority, status Leases).
func TestPoolConfigIsPoolWide(t *testing.T) {
	f := exampleFile(t)
	f.Role = ControlPlane
	if f.Node != "" {
		t.Fatalf("the example names node %q", f.Node)
	}
	for _, node := range []string{"master-0", "master-1"} {
		g := f
		g.Node = node
		if core := render(t, g)[LBCorefile].Data; !bytes.Contains(core, []byte("node "+node+"\n")) {
			t.Fatalf("%s's own lbconfig.Corefile does not name it:\n%s", node, core)
		}
		if _, err := PoolConfig(g, FormatMachineConfig); err == nil || !strings.Contains(err.Error(), "-node "+node+": a MachineConfig applies to every node of its pool") {
			t.Errorf("-node %s: %v, want it refused", node, err)
		}
	}

	p, err := PoolConfig(f, FormatMachineConfig)
	if err != nil {
		t.Fatal(err)
	}
	if p.Pool != "master" || p.Name != "50-master-infradns" || len(p.Files) < 6 {
		t.Errorf("pool %s, name %s, files %v", p.Pool, p.Name, p.Files)
	}
	again, err := PoolConfig(f, FormatMachineConfig)
	if err != nil || !bytes.Equal(again.Data, p.Data) {
		t.Errorf("two renders for the pool differ (%v)", err)
	}
	files := mcFileContents(t, p.Data)
	for path, data := range files {
		for _, node := range []string{"master-0", "master-1", "master-2"} {
			if strings.Contains(data, node) {
				t.Errorf("%s names %s", path, node)
			}
		}
		for _, l := range strings.Split(data, "\n") {
			if fs := strings.Fields(l); len(fs) > 0 && (fs[0] == "node" || fs[0] == "bind" && path == Corefile || fs[0] == "bgp-router-id") {
				t.Errorf("%s: %q is one node's", path, l)
			}
		}
	}
	// The metrics endpoints on loopback, not on some node's address.
	for _, want := range []string{"prometheus 127.0.0.1:9155"} {
		if !strings.Contains(files[LBCorefile], want) {
			t.Errorf("lbconfig.Corefile lacks %q", want)
		}
	}
	if files[Corefile] == "" || files[LBCorefile] == "" || files[ManifestDir+"/infradns-lbconfig.yaml"] == "" {
		t.Errorf("the MachineConfig lacks a Corefile or the lbconfig pod: %v", p.Files)
	}

	b, err := PoolConfig(f, FormatButane)
	if err != nil || !bytes.Contains(b.Data, []byte("variant: openshift")) || bytes.Contains(b.Data, []byte("\n        node ")) {
		t.Errorf("butane: %v\n%s", err, b.Data)
	}
	if _, err := PoolConfig(f, "ignition"); err == nil {
		t.Error("format ignition: no error")
	}
}

// TestPoolNodeIdentityAtRunTime: what the master pool's MachineConfig
// gives lbconfig (the cluster model without a node) becomes each node's own
// at run time, from its host name and its addresses on the interface:
// Node name (kubelet's: lower case), and before the API lists the Nodes a
// VRRP priority by its rank among apiServers, so two masters with the same
// MachineConfig neither share a name nor a priority.
func TestPoolNodeIdentityAtRunTime(t *testing.T) {
	f := exampleFile(t)
	f.Role = ControlPlane
	m, err := f.Model()
	if err != nil {
		t.Fatal(err)
	}
	if m.NodeName() != "" {
		t.Fatalf("the pool's model names node %q", m.NodeName())
	}
	for _, tc := range []struct {
		host     string
		addrs    []netip.Addr
		node     string
		priority int
	}{
		{"Master-0", ips("198.51.100.11", "2001:db8:1::11"), "master-0", lb.RankPriority(0)},
		{"master-1", ips("198.51.100.12"), "master-1", lb.RankPriority(1)},
		{"master-2.ocp4.example.com\n", ips("198.51.100.13"), "master-2.ocp4.example.com", lb.RankPriority(2)},
	} {
		node, err := cluster.HostNodeName(tc.host)
		if err != nil || node != tc.node {
			t.Fatalf("host %q: node %q, %v; want %q", tc.host, node, err, tc.node)
		}
		mn, err := m.WithNode(node, f.Interface, tc.addrs)
		if err != nil {
			t.Fatal(err)
		}
		p, err := lb.Desired(cluster.Snapshot{}, mn)
		if err != nil {
			t.Fatal(err)
		}
		if p.NodeName != tc.node || len(p.Instances) == 0 {
			t.Fatalf("host %q: plan for %q, %d instances", tc.host, p.NodeName, len(p.Instances))
		}
		for _, in := range p.Instances {
			if in.Priority != tc.priority {
				t.Errorf("host %q: instance %s priority %d, want %d", tc.host, in.Name, in.Priority, tc.priority)
			}
		}
	}
	if _, err := cluster.HostNodeName("Master_0"); err == nil {
		t.Error("a host name that is no Node name was accepted")
	}
}

// TestPoolWideRefuses: every value that is one node's is refused for a
// MachineConfig, naming its key and line.
func TestPoolWideRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  []string
		want string
	}{
		{"node key", []string{"node: master-0"}, `c.yaml:11: node: "master-0" (this key, or -node): a MachineConfig applies to every node of its pool`},
		{"listen address", []string{"listen: [ens3, 127.0.0.1, 198.51.100.11]"}, "c.yaml:11: listen: 198.51.100.11 is one node's address: the MachineConfig would make every node of the pool bind it; name the interface (ens3) instead"},
		{"metrics address", []string{"metricsAddress: 198.51.100.11"}, "c.yaml:11: metricsAddress: 198.51.100.11 is one node's address"},
		{"bgp router ID", []string{"vipMode: bgp", "bgp:", "  asn: 64513", "  routerID: 198.51.100.11", "  peers: [{address: 192.0.2.1, asn: 64512}, {address: \"2001:db8::1\", asn: 64512}]"},
			"c.yaml:12: bgp: routerID 198.51.100.11: a BGP router ID is one node's"},
		{"node key and bgp nodes", append([]string{"node: master-0"}, strings.Split(bgpExample, "\n")...), "c.yaml:11: node:"},
		{"bgp nodes", strings.Split(bgpExample, "\n"), "c.yaml:12: bgp: nodes (worker-7, worker-8): per-node settings cannot be in a MachineConfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("c.yaml", []byte(edit(nil, tc.add...)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = PoolConfig(f, FormatMachineConfig)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("got %v\nwant %s...", err, tc.want)
			}
		})
	}
	// What every node has is no node's: an interface, loopback, every
	// address, a shared BGP section.
	for _, add := range [][]string{
		{"listen: [ens3, lo, 127.0.0.1, \"::1\"]", "metricsAddress: 0.0.0.0"},
		{"vipMode: bgp", "bgp:", "  asn: 64513", "  peers: [{address: 192.0.2.1, asn: 64512}, {address: \"2001:db8::1\", asn: 64512}]"},
	} {
		f, err := Parse("c.yaml", []byte(edit(nil, add...)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := PoolConfig(f, FormatMachineConfig); err != nil {
			t.Errorf("%v: %v", add, err)
		}
	}
}
