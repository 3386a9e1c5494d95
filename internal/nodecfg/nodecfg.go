// Package nodecfg turns the cluster file into everything a node installs:
// the static pod manifests, the Corefile, the resolver wiring's settings.
// file.go reads the file (YAML, line-numbered errors), values.go checks it
// for one node (the cluster model's rules, internal/cluster, then what the
// pods need), nodecfg.go renders and validates the files, install.go plans
// and carries out their installation (what changed, what to remove, what to
// leave to the dispatcher script). Only Install writes.
package nodecfg

import (
	"bytes"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"text/template"

	"github.com/infradns/infradns/deploy"

	"github.com/coredns/caddy/caddyfile"
)

// Host paths. The pods mount each at the same path, so a path in the
// Corefile or a command line reads the same on the host and in a container.
const (
	ManifestDir    = "/etc/kubernetes/manifests"
	ConfigDir      = "/etc/infradns"
	LBDir          = ConfigDir + "/lb"
	RunDir         = "/run/infradns"
	Corefile       = ConfigDir + "/Corefile"
	LBCorefile     = ConfigDir + "/lbconfig.Corefile"
	ResolvEnv      = ConfigDir + "/resolv.env"
	ForwardConf    = ConfigDir + "/forward.conf"
	DispatcherPath = "/etc/NetworkManager/dispatcher.d/30-infradns-resolv-prepender"
)

// The run directories. Each pod mounts only those it needs, never RunDir:
// keepalived writes KeepalivedRunDir and reads TrackDir, haproxy writes
// HAProxyRunDir, lbconfig writes TrackDir and reads the other two (a pid
// file to signal, a socket to connect to). The haproxy pod runs as root:
// with one shared directory it could write keepalived's pid file, which
// lbconfig signals, and the track files that move the VIPs.
const (
	KeepalivedRunDir = RunDir + "/keepalived"
	HAProxyRunDir    = RunDir + "/haproxy"
	TrackDir         = RunDir + "/track"
)

// The resolver wiring in systemd-resolved mode. The node's address is only
// known at boot (DHCP, or one cluster file for every node), so render-node
// installs the script and two units, and the script writes the files that
// name the address: KubeletResolv, ResolvedDropIn and forward.conf.
const (
	// ResolverScript is the dispatcher script, installed where a unit
	// runs it rather than where NetworkManager does.
	ResolverScript = "/usr/local/libexec/infradns-resolv-prepender"
	// ResolverService runs it once; ResolverPath runs it again whenever
	// systemd-resolved rewrites ResolvedUpstreams or render-node resolv.env.
	ResolverService = "/etc/systemd/system/infradns-resolver.service"
	ResolverPath    = "/etc/systemd/system/infradns-resolver.path"
	// What `systemctl enable` makes of their [Install] sections: uninstall
	// removes them with the units.
	ResolverServiceWant = "/etc/systemd/system/multi-user.target.wants/infradns-resolver.service"
	ResolverPathWant    = "/etc/systemd/system/paths.target.wants/infradns-resolver.path"
	// KubeletResolv is kubelet's resolvConf: this node's CoreDNS first.
	KubeletResolv = ConfigDir + "/kubelet-resolv.conf"
	// ResolvedDropIn routes the cluster domain to this node's CoreDNS. It
	// is in /run: it holds the address the node has now, and a reboot or
	// an uninstall leaves no stale one behind.
	ResolvedDropIn = "/run/systemd/resolved.conf.d/infradns.conf"
	// ResolvedUpstreams is systemd-resolved's list of the links' real
	// servers (never its own stub): forward.conf's source.
	ResolvedUpstreams = "/run/systemd/resolve/resolv.conf"
)

// Roles a node can have.
const (
	ControlPlane = "control-plane"
	Worker       = "worker"
	// Bootstrap is a node running a temporary apiserver before the cluster
	// exists: control-plane pods, static backends, no API to watch.
	Bootstrap = "bootstrap"
)

// Fixed ports of the pods; the probes in the manifests use the same. The
// lbconfig pod's are on loopback only.
const (
	healthPort           = 18080
	readyPort            = 18181
	metricsPort          = 9153
	publisherMetricsPort = 9154
	lbDNSPort            = 18053
	lbHealthPort         = 18082
	lbReadyPort          = 18183
	lbMetricsPort        = 9155
)

// Output is one file to install, at its absolute path on the node.
type Output struct {
	Path string
	Mode fs.FileMode
	Data []byte
	// From, when set, stands for Data: the file is a copy of this one,
	// compared and copied by streaming. It is for install's copy of its
	// own executable, tens of MB that holding in memory (twice, with the
	// installed copy) on every install would cost for nothing.
	From string
	// Seed: written only when the node has none (forward.conf, which the
	// dispatcher script owns once the node has booted).
	Seed bool
}

// Pods are the manifests a role runs, by template name.
func (v Values) pods() []string {
	p := []string{"coredns", "lbconfig", "mdns-publisher"}
	if v.LB {
		p = append(p, "keepalived")
	}
	if v.HAProxy {
		p = append(p, "haproxy")
	}
	slices.Sort(p)
	return p
}

var templates = template.Must(template.New("").Option("missingkey=error").Funcs(template.FuncMap{
	"join": func(s []string) string { return strings.Join(s, " ") },
}).ParseFS(deploy.Templates, "static-pods/*.tmpl"))

// Render fills in every template for the node and validates the result.
func Render(v Values) ([]Output, error) {
	var out []Output
	add := func(tmpl, dst string, mode fs.FileMode) error {
		var b bytes.Buffer
		if err := templates.ExecuteTemplate(&b, tmpl, v); err != nil {
			return fmt.Errorf("render %s: %w", tmpl, err)
		}
		out = append(out, Output{Path: dst, Mode: mode, Data: b.Bytes()})
		return nil
	}
	for _, p := range v.pods() {
		if err := add(p+".yaml.tmpl", ManifestDir+"/infradns-"+p+".yaml", 0o644); err != nil {
			return nil, err
		}
	}
	if err := add("Corefile.tmpl", Corefile, 0o644); err != nil {
		return nil, err
	}
	if err := add("lbconfig.Corefile.tmpl", LBCorefile, 0o644); err != nil {
		return nil, err
	}
	if err := add("resolv.env.tmpl", ResolvEnv, 0o644); err != nil {
		return nil, err
	}
	if len(v.Upstreams) > 0 {
		if err := add("forward.conf.tmpl", ForwardConf, 0o644); err != nil {
			return nil, err
		}
		out[len(out)-1].Seed = true
	}
	if v.Resolved {
		out = append(out, Output{Path: ResolverScript, Mode: 0o755, Data: deploy.Dispatcher})
		if err := add("infradns-resolver.service.tmpl", ResolverService, 0o644); err != nil {
			return nil, err
		}
		if err := add("infradns-resolver.path.tmpl", ResolverPath, 0o644); err != nil {
			return nil, err
		}
	} else {
		out = append(out, Output{Path: DispatcherPath, Mode: 0o755, Data: deploy.Dispatcher})
	}
	if err := Validate(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Validate judges rendered files the way their readers would: every
// manifest decodes strictly into a Pod that kubelet can run, the Corefile
// parses as a Corefile.
func Validate(outs []Output) error {
	for _, o := range outs {
		var err error
		switch {
		case strings.HasPrefix(o.Path, ManifestDir+"/"):
			_, err = DecodePod(o.Data)
		case o.Path == Corefile:
			err = checkCorefile(o.Data, "apiint", "appswildcard", "mdnsnodes", "health", "ready")
		case o.Path == LBCorefile:
			err = checkCorefile(o.Data, "lbconfig", "health", "ready")
		}
		if err != nil {
			return fmt.Errorf("%s: %w", o.Path, err)
		}
	}
	return nil
}

func checkCorefile(b []byte, directives ...string) error {
	// The import names the node's files, not the renderer's: parse without it.
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "import ") {
			lines = append(lines, l)
		}
	}
	blocks, err := caddyfile.Parse(Corefile, strings.NewReader(strings.Join(lines, "\n")), nil)
	if err != nil {
		return err
	}
	if len(blocks) != 1 {
		return fmt.Errorf("want one server block, got %d", len(blocks))
	}
	for _, d := range directives {
		if _, ok := blocks[0].Tokens[d]; !ok {
			return fmt.Errorf("no %s directive", d)
		}
	}
	return nil
}
