// Package nodecfg turns one small cluster file into everything a node
// installs: the static pod manifests, the Corefile, the resolver wiring's
// settings. It is pure: Render returns files and Validate judges them; the
// caller (infradns render-node) writes them.
package nodecfg

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/infradns/infradns/deploy"
	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/vrrp"

	"github.com/coredns/caddy/caddyfile"
	"github.com/miekg/dns"
	"sigs.k8s.io/yaml"
)

// Host paths. The pods mount each at the same path, so a path in the
// Corefile or a command line reads the same on the host and in a container.
const (
	ManifestDir    = "/etc/kubernetes/manifests"
	ConfigDir      = "/etc/infradns"
	LBDir          = ConfigDir + "/lb"
	RunDir         = "/run/infradns"
	Corefile       = ConfigDir + "/Corefile"
	ResolvEnv      = ConfigDir + "/resolv.env"
	ForwardConf    = ConfigDir + "/forward.conf"
	DispatcherPath = "/etc/NetworkManager/dispatcher.d/30-infradns-resolv-prepender"
)

// Roles a node can have.
const (
	ControlPlane = "control-plane"
	Worker       = "worker"
	// Bootstrap is a node running a temporary apiserver before the cluster
	// exists: control-plane pods, static backends, no API to watch.
	Bootstrap = "bootstrap"
)

// Fixed ports of the CoreDNS pod; the probes in the manifest use the same.
const (
	healthPort           = 18080
	readyPort            = 18181
	metricsPort          = 9153
	publisherMetricsPort = 9154
)

// File is the cluster file, YAML. One file serves a whole cluster; role and
// node may be given per node on the command line instead.
type File struct {
	Cluster     string   `json:"cluster"`
	Domain      string   `json:"domain"`
	APIVIPs     []string `json:"apiVIPs"`
	IngressVIPs []string `json:"ingressVIPs"`
	Interface   string   `json:"interface"`
	Role        string   `json:"role,omitempty"`
	Node        string   `json:"node,omitempty"`
	Image       string   `json:"image"`
	Namespace   string   `json:"namespace,omitempty"`
	// Kubeconfig is how lbconfig and mdnsnodes reach the API. On
	// control-plane nodes it should name the local apiserver, not the VIP
	// that haproxy behind it provides.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// APIServers are static haproxy backends until the API lists its own
	// (required on a bootstrap node; on control-plane nodes they let the
	// VIP come up before the API answers).
	APIServers []string `json:"apiServers,omitempty"`
	// Upstreams seed forward.conf until the dispatcher script rewrites it.
	Upstreams []string `json:"upstreams,omitempty"`
	// MDNSKey is a key file for signed mDNS announcements.
	MDNSKey string `json:"mdnsKey,omitempty"`
	// Listen restricts CoreDNS to these addresses or interfaces (the bind
	// plugin); needed where systemd-resolved holds 127.0.0.53:53.
	Listen         []string             `json:"listen,omitempty"`
	StatusLease    string               `json:"statusLeaseNamespace,omitempty"`
	Unicast        bool                 `json:"unicast,omitempty"`
	VRRPVersion    int                  `json:"vrrpVersion,omitempty"`
	AdvertInterval string               `json:"advertInterval,omitempty"`
	RouterIDs      *lb.RouterIDOverride `json:"routerIDs,omitempty"`
	APIPort        uint16               `json:"apiPort,omitempty"`
	LBPort         uint16               `json:"lbPort,omitempty"`
	HealthPort     uint16               `json:"lbHealthPort,omitempty"`
	IngressService string               `json:"ingressService,omitempty"`
}

// Parse reads a cluster file. Unknown keys are errors: a misspelt option
// must not silently vanish.
func Parse(b []byte) (File, error) {
	var f File
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return File{}, fmt.Errorf("cluster file: %w", err)
	}
	return f, nil
}

// Values is what the templates are given: checked, defaulted, formatted.
type Values struct {
	Cluster, Domain, Role, Node, Interface, Image, Namespace string
	APIVIPs, IngressVIPs, VIPs                               []string
	APIServers, Upstreams, Listen                            []string
	Kubeconfig, KubeconfigDir, MDNSKey                       string
	StatusLease, IngressService, AdvertInterval, RouterIDs   string
	Unicast                                                  bool
	VRRPVersion                                              int
	APIPort, LBPort, HAHealthPort                            uint16
	// LB: this node runs keepalived; HAProxy: and the API load balancer.
	LB, HAProxy bool

	ConfigDir, LBDir, RunDir, TrackDir, Corefile, ForwardGlob string
	KeepalivedConf, KeepalivedPid, VRRPPid                    string
	HAProxyConf, HAProxySocket                                string
	HealthPort, ReadyPort, MetricsPort, PublisherMetricsPort  int
}

var (
	labelRE   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	ifaceRE   = regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,15}$`)
	imageRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@-]*$`)
	svcNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// Values checks the file for one node and fills in the defaults. Every
// error names the key.
func (f File) Values() (Values, error) {
	v := Values{
		Cluster: f.Cluster, Role: f.Role, Node: strings.ToLower(f.Node), Interface: f.Interface,
		Image: f.Image, Namespace: f.Namespace, Kubeconfig: f.Kubeconfig, MDNSKey: f.MDNSKey,
		StatusLease: f.StatusLease, IngressService: f.IngressService, Unicast: f.Unicast,
		VRRPVersion: f.VRRPVersion, AdvertInterval: f.AdvertInterval,
		APIPort: f.APIPort, LBPort: f.LBPort, HAHealthPort: f.HealthPort,

		ConfigDir: ConfigDir, LBDir: LBDir, RunDir: RunDir, TrackDir: RunDir + "/track",
		Corefile: Corefile, ForwardGlob: ConfigDir + "/forward*.conf",
		KeepalivedConf: LBDir + "/keepalived.conf", KeepalivedPid: RunDir + "/keepalived.pid",
		VRRPPid: RunDir + "/vrrp.pid", HAProxyConf: LBDir + "/haproxy.cfg",
		HAProxySocket: RunDir + "/haproxy-master.sock",
		HealthPort:    healthPort, ReadyPort: readyPort, MetricsPort: metricsPort,
		PublisherMetricsPort: publisherMetricsPort,
	}
	if err := lb.CheckClusterName(f.Cluster); err != nil {
		return Values{}, fmt.Errorf("cluster: %w", err)
	}
	ids, err := vrrp.ClusterIDs(f.Cluster)
	if err != nil {
		return Values{}, fmt.Errorf("cluster: %w", err)
	}
	d := strings.ToLower(strings.TrimSuffix(f.Domain, "."))
	if _, ok := dns.IsDomainName(d); !ok || !strings.Contains(d, ".") || strings.ContainsAny(d, " {}\"*") {
		return Values{}, fmt.Errorf("domain: %q is not a DNS domain with at least two labels", f.Domain)
	}
	v.Domain = d
	if v.APIVIPs, err = vips("apiVIPs", f.APIVIPs); err != nil {
		return Values{}, err
	}
	if v.IngressVIPs, err = vips("ingressVIPs", f.IngressVIPs); err != nil {
		return Values{}, err
	}
	v.VIPs = append(slices.Clone(v.APIVIPs), v.IngressVIPs...)
	if !ifaceRE.MatchString(f.Interface) {
		return Values{}, fmt.Errorf("interface: %q is not an interface name", f.Interface)
	}
	switch f.Role {
	case ControlPlane, Bootstrap:
		v.LB, v.HAProxy = true, true
	case Worker:
		v.LB = true
	case "":
		return Values{}, fmt.Errorf("role: missing: %s, %s or %s", ControlPlane, Worker, Bootstrap)
	default:
		return Values{}, fmt.Errorf("role: %q is not %s, %s or %s", f.Role, ControlPlane, Worker, Bootstrap)
	}
	if v.Node != "" && !labelRE.MatchString(strings.ReplaceAll(v.Node, ".", "-")) {
		return Values{}, fmt.Errorf("node: %q is not a Node name", f.Node)
	}
	if f.Image == "" || !imageRE.MatchString(f.Image) {
		return Values{}, fmt.Errorf("image: %q is not an image reference", f.Image)
	}
	if v.Namespace == "" {
		v.Namespace = "kube-system"
	}
	if !labelRE.MatchString(v.Namespace) {
		return Values{}, fmt.Errorf("namespace: %q is not a namespace name", f.Namespace)
	}
	if f.Kubeconfig == "" && f.Role != Bootstrap {
		return Values{}, fmt.Errorf("kubeconfig: missing: a %s node follows the API", f.Role)
	}
	if f.Kubeconfig != "" {
		if err := absPath("kubeconfig", f.Kubeconfig); err != nil {
			return Values{}, err
		}
		v.KubeconfigDir = path.Dir(f.Kubeconfig)
		if v.KubeconfigDir == "/" || strings.HasPrefix(ConfigDir+"/", v.KubeconfigDir+"/") || strings.HasPrefix(v.KubeconfigDir+"/", ConfigDir+"/") {
			return Values{}, fmt.Errorf("kubeconfig: %q: its directory is mounted into the pod and must not be / or hold %s", f.Kubeconfig, ConfigDir)
		}
	}
	if f.MDNSKey != "" {
		if err := absPath("mdnsKey", f.MDNSKey); err != nil {
			return Values{}, err
		}
		if path.Dir(f.MDNSKey) != ConfigDir {
			return Values{}, fmt.Errorf("mdnsKey: %q must be in %s (the directory the pods mount)", f.MDNSKey, ConfigDir)
		}
	}
	for _, s := range f.APIServers {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			a, err2 := netip.ParseAddr(s)
			if err2 != nil || a.Zone() != "" {
				return Values{}, fmt.Errorf("apiServers: %q is not ADDRESS or ADDRESS:PORT", s)
			}
			ap = netip.AddrPortFrom(a.Unmap(), 0)
		}
		if ap.Port() == 0 {
			v.APIServers = append(v.APIServers, ap.Addr().String())
		} else {
			v.APIServers = append(v.APIServers, ap.String())
		}
	}
	if f.Role == Bootstrap && len(v.APIServers) == 0 {
		return Values{}, fmt.Errorf("apiServers: a bootstrap node has no API to list them: give at least one")
	}
	if f.Role == Worker && len(v.APIServers) > 0 {
		return Values{}, fmt.Errorf("apiServers: a worker runs no haproxy")
	}
	for _, s := range f.Upstreams {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return Values{}, fmt.Errorf("upstreams: %q is not an address", s)
		}
		a = a.Unmap()
		if a.IsLoopback() || a.IsUnspecified() || slices.Contains(v.VIPs, a.String()) {
			// The forwarding loop: CoreDNS asking itself (or systemd-resolved's
			// stub, which asks CoreDNS).
			return Values{}, fmt.Errorf("upstreams: %s would loop back to this node", a)
		}
		v.Upstreams = append(v.Upstreams, a.String())
	}
	for _, l := range f.Listen {
		if _, err := netip.ParseAddr(l); err != nil && !ifaceRE.MatchString(l) {
			return Values{}, fmt.Errorf("listen: %q is neither an address nor an interface name", l)
		}
	}
	v.Listen = f.Listen
	if f.StatusLease != "" && !labelRE.MatchString(f.StatusLease) {
		return Values{}, fmt.Errorf("statusLeaseNamespace: %q is not a namespace name", f.StatusLease)
	}
	if f.IngressService != "" && !svcNameRE.MatchString(f.IngressService) {
		return Values{}, fmt.Errorf("ingressService: %q is not NAMESPACE/NAME", f.IngressService)
	}
	version, interval := lb.DefaultVRRPVersion, lb.DefaultAdvertInterval
	if f.VRRPVersion != 0 {
		version = f.VRRPVersion
	}
	if f.AdvertInterval != "" {
		if interval, err = time.ParseDuration(f.AdvertInterval); err != nil {
			return Values{}, fmt.Errorf("advertInterval: %w", err)
		}
	}
	if err := lb.CheckTiming(version, interval); err != nil {
		return Values{}, fmt.Errorf("vrrpVersion/advertInterval: %w", err)
	}
	if f.RouterIDs != nil {
		if _, err := ids.Override(f.RouterIDs.API, f.RouterIDs.Ingress); err != nil {
			return Values{}, fmt.Errorf("routerIDs: %w", err)
		}
		v.RouterIDs = fmt.Sprintf("%d %d", f.RouterIDs.API, f.RouterIDs.Ingress)
	}
	lbPort, hPort := cmpOr(f.LBPort, lb.DefaultLBPort), cmpOr(f.HealthPort, lb.DefaultHealthPort)
	if lbPort == hPort {
		return Values{}, fmt.Errorf("lbPort and lbHealthPort are both %d", lbPort)
	}
	for _, p := range []uint16{lbPort, hPort} {
		if p == healthPort || p == readyPort || p == metricsPort || p == publisherMetricsPort || p == 53 {
			return Values{}, fmt.Errorf("lbPort/lbHealthPort: %d is taken by CoreDNS or mdns-publisher", p)
		}
	}
	v.LBPort, v.HAHealthPort = lbPort, hPort
	return v, nil
}

func cmpOr(a, b uint16) uint16 {
	if a != 0 {
		return a
	}
	return b
}

func vips(key string, in []string) ([]string, error) {
	if len(in) == 0 || len(in) > 2 {
		return nil, fmt.Errorf("%s: one or two addresses (one per family), got %d", key, len(in))
	}
	var out []string
	fam := map[bool]bool{}
	for _, s := range in {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%s: %q is not an address", key, s)
		}
		a = a.Unmap()
		if a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() || a.IsLinkLocalUnicast() {
			return nil, fmt.Errorf("%s: %s cannot be a virtual IP", key, a)
		}
		if fam[a.Is4()] {
			return nil, fmt.Errorf("%s: two addresses of one family", key)
		}
		fam[a.Is4()] = true
		out = append(out, a.String())
	}
	return out, nil
}

func absPath(key, p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p || strings.ContainsAny(p, " \t\n\"{}") {
		return fmt.Errorf("%s: %q must be a clean absolute path without spaces", key, p)
	}
	return nil
}

// Output is one file to install, at its absolute path on the node.
type Output struct {
	Path string
	Mode fs.FileMode
	Data []byte
}

// Pods are the manifests a role runs, by template name.
func (v Values) pods() []string {
	p := []string{"coredns", "keepalived", "mdns-publisher"}
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
	if err := add("resolv.env.tmpl", ResolvEnv, 0o644); err != nil {
		return nil, err
	}
	if len(v.Upstreams) > 0 {
		if err := add("forward.conf.tmpl", ForwardConf, 0o644); err != nil {
			return nil, err
		}
	}
	out = append(out, Output{Path: DispatcherPath, Mode: 0o755, Data: deploy.Dispatcher})
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
			err = checkCorefile(o.Data)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", o.Path, err)
		}
	}
	return nil
}

func checkCorefile(b []byte) error {
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
	for _, d := range []string{"apiint", "appswildcard", "mdnsnodes", "health", "ready"} {
		if _, ok := blocks[0].Tokens[d]; !ok {
			return fmt.Errorf("no %s directive", d)
		}
	}
	return nil
}

// WriteTree installs outs under root (a node's / or a staging directory)
// with write (atomicfile.WriteIfChanged: atomically, and only what changed),
// creating missing directories. It returns the paths it wrote.
func WriteTree(root string, outs []Output, write func(path string, data []byte, mode fs.FileMode) (bool, error)) ([]string, error) {
	var changed []string
	for _, o := range outs {
		p := filepath.Join(root, filepath.FromSlash(o.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return changed, err
		}
		ok, err := write(p, o.Data, o.Mode)
		if err != nil {
			return changed, err
		}
		if ok {
			changed = append(changed, o.Path)
		}
	}
	return changed, nil
}
