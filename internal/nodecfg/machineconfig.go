package nodecfg

import (
	"encoding/base64"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// OpenShift delivers node files with MachineConfigs: the Machine Config
// Operator writes them through Ignition and keeps them as written. What
// render-node writes under / becomes one MachineConfig (or its Butane
// source) per pool, so an OpenShift administrator installs infradns the way
// every node file is installed there.
//
// A MachineConfig applies to every node of its pool, so it must hold
// nothing that is one node's: PoolWide refuses what would be (a node name,
// a node's address, a BGP router ID or per-node BGP settings), and each
// node learns who it is when its pods start: lbconfig takes its Node name
// from the host name (cluster.HostNodeName, as kubelet does) and its
// addresses from the cluster interface, which give its VRRP priority, its
// keepalived router_id and its status Leases; mdns-publisher announces the
// host name and the interface's addresses; the dispatcher script reads the
// interface's addresses at every network event. The credentials the pods
// read (the kubeconfig and dnsKubeconfig files) are never in it: only their
// paths are, and each node gets the files by other means (see the operator
// guide's OpenShift section).

// Formats of render-node's output besides the file tree.
const (
	FormatFiles         = "files"
	FormatMachineConfig = "machineconfig"
	FormatButane        = "butane"
)

// IgnitionVersion is the Ignition spec the MachineConfigs carry (OpenShift
// 4.8 and later accept it).
const IgnitionVersion = "3.2.0"

// ButaneVersion is the Butane openshift variant's version used.
const ButaneVersion = "4.14.0"

// MachineConfig is the part of machineconfiguration.openshift.io/v1
// MachineConfig this output fills.
type MachineConfig struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   ObjectMeta `json:"metadata"`
	Spec       struct {
		Config Ignition `json:"config"`
	} `json:"spec"`
}

// ObjectMeta is the name and labels of a MachineConfig or Butane config.
type ObjectMeta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

// Ignition is the part of an Ignition config the files need.
type Ignition struct {
	Ignition struct {
		Version string `json:"version"`
	} `json:"ignition"`
	Storage struct {
		Files []IgnitionFile `json:"files"`
	} `json:"storage"`
}

// IgnitionFile is one file: its contents as a data URL, its mode in decimal.
type IgnitionFile struct {
	Path      string `json:"path"`
	Mode      int    `json:"mode"`
	Overwrite bool   `json:"overwrite"`
	Contents  struct {
		Source string `json:"source"`
	} `json:"contents"`
}

// Butane is an openshift-variant Butane config with the same files inline.
type Butane struct {
	Variant  string     `json:"variant"`
	Version  string     `json:"version"`
	Metadata ObjectMeta `json:"metadata"`
	Storage  struct {
		Files []ButaneFile `json:"files"`
	} `json:"storage"`
}

// ButaneFile is one file of a Butane config.
type ButaneFile struct {
	Path      string `json:"path"`
	Mode      int    `json:"mode"`
	Overwrite bool   `json:"overwrite"`
	Contents  struct {
		Inline string `json:"inline"`
	} `json:"contents"`
}

// Pool is the MachineConfigPool of a role: master for the control plane,
// worker for workers. A bootstrap node has none (the installer's Ignition
// sets it up and it is gone once the cluster runs).
func Pool(role string) (string, error) {
	switch role {
	case ControlPlane:
		return "master", nil
	case Worker:
		return "worker", nil
	}
	return "", fmt.Errorf("role %s has no MachineConfigPool: only %s (master) and %s (worker) nodes get MachineConfigs", role, ControlPlane, Worker)
}

// MachineConfigName is the name of a pool's MachineConfig: 50- orders it
// after OpenShift's own on-prem files (00-, 01-) so ours win a clash.
func MachineConfigName(pool string) string { return "50-" + pool + "-infradns" }

// mcFiles are the files a MachineConfig may own: everything but the seeds
// (forward.conf), which the dispatcher script rewrites at every network
// change; the Machine Config Operator would report that as drift and
// degrade the pool.
func mcFiles(outs []Output) []Output {
	var out []Output
	for _, o := range outs {
		if !o.Seed {
			out = append(out, o)
		}
	}
	return out
}

// RenderMachineConfig is role's files as a MachineConfig, in YAML.
func RenderMachineConfig(role string, outs []Output) ([]byte, error) {
	pool, err := Pool(role)
	if err != nil {
		return nil, err
	}
	mc := MachineConfig{APIVersion: "machineconfiguration.openshift.io/v1", Kind: "MachineConfig",
		Metadata: ObjectMeta{Name: MachineConfigName(pool), Labels: map[string]string{"machineconfiguration.openshift.io/role": pool}}}
	mc.Spec.Config.Ignition.Version = IgnitionVersion
	for _, o := range mcFiles(outs) {
		f := IgnitionFile{Path: o.Path, Mode: int(o.Mode.Perm()), Overwrite: true}
		f.Contents.Source = "data:text/plain;charset=utf-8;base64," + base64.StdEncoding.EncodeToString(o.Data)
		mc.Spec.Config.Storage.Files = append(mc.Spec.Config.Storage.Files, f)
	}
	return yaml.Marshal(mc)
}

// RenderButane is role's files as a Butane config (`butane` turns it into
// the MachineConfig; the files stay readable in review).
func RenderButane(role string, outs []Output) ([]byte, error) {
	pool, err := Pool(role)
	if err != nil {
		return nil, err
	}
	b := Butane{Variant: "openshift", Version: ButaneVersion,
		Metadata: ObjectMeta{Name: MachineConfigName(pool), Labels: map[string]string{"machineconfiguration.openshift.io/role": pool}}}
	for _, o := range mcFiles(outs) {
		f := ButaneFile{Path: o.Path, Mode: int(o.Mode.Perm()), Overwrite: true}
		f.Contents.Inline = string(o.Data)
		b.Storage.Files = append(b.Storage.Files, f)
	}
	return yaml.Marshal(b)
}

// PoolWide checks that f holds nothing that is one node's, so that what it
// renders may go to every node of a pool. Each error names the key (or
// -node) and says what to do instead.
func (f File) PoolWide() error {
	if f.Node != "" {
		// Refused rather than ignored with a warning: nothing in a pool's
		// MachineConfig may depend on it, so refusing costs one retry,
		// while a warning is lost when the output is piped into `oc apply`,
		// and whoever passed -node (or kept a per-node cluster file)
		// expects that node's configuration, which a pool's MachineConfig
		// cannot be.
		const why = "a MachineConfig applies to every node of its pool, and every one of them would act as this node " +
			"(lbconfig's Node name, VRRP priority, router_id and status Leases): leave it out; each node's lbconfig takes its Node name from its host name when it starts, as kubelet does"
		if f.Has("node") {
			return f.errorf([]string{"node"}, "%q (this key, or -node): %s", f.Node, why)
		}
		return fmt.Errorf("-node %s: %s", f.Node, why)
	}
	vips := append(slices.Clone(f.APIVIPs), f.IngressVIPs...)
	for _, l := range f.Listen {
		a, err := netip.ParseAddr(l)
		if err != nil || a.IsLoopback() || a.IsUnspecified() || slices.Contains(vips, a) {
			continue // an interface name, or an address every node has
		}
		return f.errorf([]string{"listen"}, "%s is one node's address: the MachineConfig would make every node of the pool bind it; name the interface (%s) instead", l, f.Interface)
	}
	if a := f.MetricsAddress; a.IsValid() && !a.IsLoopback() && !a.IsUnspecified() {
		return f.errorf([]string{"metricsAddress"}, "%s is one node's address: the MachineConfig would make every node of the pool listen there; leave it out (loopback) or use 0.0.0.0", a)
	}
	if f.BGP.RouterID.IsValid() {
		return f.errorf([]string{"bgp"}, "routerID %s: a BGP router ID is one node's, and the MachineConfig would give it to every node of the pool: leave it out, and each node's lbconfig uses its own address towards its first peer", f.BGP.RouterID)
	}
	if len(f.BGP.Nodes) > 0 {
		return f.errorf([]string{"bgp"}, "nodes (%s): per-node settings cannot be in a MachineConfig, which every node of the pool gets alike: "+
			"put the nodes that need other settings in a MachineConfigPool of their own, with a cluster file whose shared settings are theirs",
			strings.Join(slices.Sorted(maps.Keys(f.BGP.Nodes)), ", "))
	}
	return nil
}

// PoolOutput is a pool's MachineConfig (or Butane config), rendered.
type PoolOutput struct {
	Pool, Name string
	// Files are the paths it carries, in order.
	Files []string
	Data  []byte
}

// PoolConfig renders the MachineConfig (format FormatMachineConfig) or
// Butane config (FormatButane) of f's role's pool from the cluster file
// alone: f must be pool-wide (PoolWide), so two nodes of a pool get the
// same bytes. Pure: it reads and writes nothing.
func PoolConfig(f File, format string) (PoolOutput, error) {
	render := RenderMachineConfig
	switch format {
	case FormatMachineConfig:
	case FormatButane:
		render = RenderButane
	default:
		return PoolOutput{}, fmt.Errorf("format %q: want %s or %s", format, FormatMachineConfig, FormatButane)
	}
	v, err := f.Values()
	if err != nil {
		return PoolOutput{}, err
	}
	pool, err := Pool(f.Role)
	if err != nil {
		return PoolOutput{}, err
	}
	if err := f.PoolWide(); err != nil {
		return PoolOutput{}, err
	}
	if v.Resolved {
		// Ignition writes unit files but does not enable them this way,
		// and OpenShift's nodes run NetworkManager.
		return PoolOutput{}, fmt.Errorf("format %s: OpenShift nodes run NetworkManager: use resolver: %s", format, ResolverNetworkManager)
	}
	outs, err := Render(v)
	if err != nil {
		return PoolOutput{}, err
	}
	b, err := render(f.Role, outs)
	if err != nil {
		return PoolOutput{}, err
	}
	p := PoolOutput{Pool: pool, Name: MachineConfigName(pool), Data: b}
	for _, o := range mcFiles(outs) {
		p.Files = append(p.Files, o.Path)
	}
	return p, nil
}
