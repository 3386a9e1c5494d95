package nodecfg

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lb"
)

// Values is what the templates are given: checked, defaulted, formatted.
type Values struct {
	Cluster, Domain, Role, Node, Interface, Image, Namespace string
	APIVIPs, IngressVIPs, VIPs                               []string
	APIServers, Upstreams, Listen                            []string
	Kubeconfig, KubeconfigDir, MDNSKey                       string
	// DNSKubeconfig and DNSKubeconfigDir are the DNS pod's: the cluster
	// file's dnsKubeconfig, or lbconfig's kubeconfig when it has none.
	DNSKubeconfig, DNSKubeconfigDir                        string
	StatusLease, IngressService, AdvertInterval, RouterIDs string
	Failover                                               string
	IngressHealthURL                                       string
	NodesService                                           string
	// LBServiceNames renders lbservices (with DNSKubeconfig).
	LBServiceNames bool
	// LBPools renders lbpools in lbconfig's Corefile (control-plane nodes,
	// with Kubeconfig); LBPoolsDefault adds its default option.
	LBPools, LBPoolsDefault bool
	// LBServices: lbconfig announces the Services' addresses (lbPools in
	// BGP mode, every node with Kubeconfig; deploy/lb-services.yaml).
	LBServices bool
	// LBServicesHealthURL gates them (health-check services).
	LBServicesHealthURL           string
	ReverseZones                  []string // CIDRs
	Unicast                       bool
	VRRPVersion                   int
	APIPort, LBPort, HAHealthPort uint16
	// LB: this node runs keepalived; HAProxy: and the API load balancer.
	LB, HAProxy bool
	// BGP: the VIPs are announced over BGP (no keepalived); BGPOptions
	// are lbconfig's Corefile lines for it.
	BGP        bool
	BGPOptions []string
	// BGPPasswordFiles are the node's password files, which only the
	// lbconfig pod mounts (each file, read-only).
	BGPPasswordFiles []string
	// Spread: several ingress VIPs per family, answered shuffled.
	Spread bool
	// Resolver is ResolverNetworkManager or ResolverSystemdResolved;
	// Resolved is true for the latter.
	Resolver string
	Resolved bool

	ConfigDir, LBDir, Corefile, ForwardGlob string
	// Run directories, one per writer so no daemon can write what another
	// trusts: keepalived's pid files, haproxy's master socket, lbconfig's
	// track files (keepalived reads them). lbconfig reads the first two.
	KeepalivedRunDir, HAProxyRunDir, TrackDir string
	// The resolver wiring's paths (systemd-resolved mode): the script,
	// what it writes, and what makes systemd run it again.
	ResolverScript, ResolvEnv, ForwardConf, KubeletResolv string
	ResolvedDropIn, ResolvedUpstreams                     string
	LBCorefile                                            string
	KeepalivedConf, KeepalivedPid, VRRPPid                string
	HAProxyConf, HAProxySocket                            string
	// HAProxyStopping: the file haproxy's pod creates when it is stopped,
	// which lbconfig's API check reads (lb.HAProxyStopping).
	HAProxyStopping                                          string
	HealthPort, ReadyPort, MetricsPort, PublisherMetricsPort int
	LBDNSPort, LBHealthPort, LBReadyPort, LBMetricsPort      int
	// Metrics, LBMetrics, PublisherMetrics are ADDRESS:PORT of the three
	// metrics endpoints: on metricsAddress, loopback unless the file says.
	Metrics, LBMetrics, PublisherMetrics string
	// MetricsProbeHost is where kubelet reaches them: the address, or
	// loopback when they listen on every address.
	MetricsProbeHost string
}

var (
	imageRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@-]*$`)
)

// Spec is the cluster model's part of the file. The track directory is
// the one the pods mount, not a key.
func (f File) Spec() cluster.Spec {
	return cluster.Spec{
		Name: f.Cluster, Domain: f.Domain,
		APIVIPs: f.APIVIPs, IngressVIPs: f.IngressVIPs, RouterIDs: f.RouterIDs,
		APIPort: f.APIPort, LBPort: f.LBPort, HealthPort: f.HealthPort,
		StaticBackends: f.APIServers,
		VRRP:           cluster.VRRP{Version: f.VRRPVersion, Failover: f.Failover, AdvertInterval: f.AdvertInterval, Unicast: f.Unicast},
		TrackDir:       TrackDir,
		IngressService: f.IngressService,
		Health:         f.health(),
		Node:           f.Node,
		Interface:      f.Interface,
		Mode:           f.VIPMode,
		BGP:            f.BGP.For(f.Node),
	}
}

// health is the checks the file sets: only the ingress one is a key (the
// API VIP follows the node's own haproxy).
func (f File) health() map[string]string {
	if f.IngressHealthURL == "" {
		return nil
	}
	return map[string]string{cluster.CheckIngress: f.IngressHealthURL}
}

// Model checks the file's cluster model, the same check lbconfig runs on its
// Corefile options. Errors name the file, the line and the key.
func (f File) Model() (*cluster.Model, error) {
	switch f.VIPMode {
	case "", cluster.ModeVRRP, cluster.ModeBGP:
	default:
		// Before bgp's own check, which would say vipMode is not bgp.
		return nil, f.errorf([]string{"vipMode"}, "%q: want %s or %s%s", f.VIPMode, cluster.ModeVRRP, cluster.ModeBGP, cluster.CaseHint(f.VIPMode, cluster.ModeVRRP, cluster.ModeBGP))
	}
	if f.VIPMode != cluster.ModeBGP && f.Has("bgp") {
		return nil, f.errorf([]string{"bgp"}, "set, but vipMode is not bgp")
	}
	for _, k := range []string{"cluster", "domain", "apiVIPs", "interface"} {
		if !f.Has(k) {
			return nil, f.errorf([]string{k}, "missing (see deploy/cluster.example.yaml)")
		}
	}
	if err := checkClusterName(f.Cluster); err != nil {
		return nil, f.errorf([]string{"cluster"}, "%v", err)
	}
	if f.Interface == "auto" {
		return nil, f.errorf([]string{"interface"}, "%q: name the interface; the same on every node", f.Interface)
	}
	m, err := cluster.New(f.Spec())
	var e *cluster.Error
	if errors.As(err, &e) {
		keys := slices.Clone(e.Keys)
		msg := e.Msg
		for i, k := range keys {
			switch {
			case k == cluster.KeyHealth:
				keys[i] = "ingressHealthURL" // the file's only health key
			case strings.HasPrefix(k, "bgp."):
				// The section's line; the key within it in the message.
				keys[i] = "bgp"
				if i == 0 {
					msg = strings.TrimPrefix(k, "bgp.") + ": " + msg
				}
			}
		}
		keys = slices.Compact(keys)
		return nil, f.errorf(keys, "%s", msg)
	}
	return m, err
}

// checkClusterName holds a new cluster's name to Kubernetes' rules, which
// the cluster model (lbconfig's, which must keep reading the Corefiles of
// clusters already running) does not: the status Leases are named after
// it, and OpenShift's router IDs are computed from its bytes, so OCP4 gets
// other IDs than ocp4.
func checkClusterName(name string) error {
	err := cluster.CheckLabel(name)
	if err == nil {
		return nil
	}
	hint := ""
	if l := strings.ToLower(name); l != name && cluster.CheckLabel(l) == nil {
		hint = fmt.Sprintf(" (did you mean %q?)", l)
	}
	return fmt.Errorf("%v: the status Leases are named after it, and the router IDs computed from it%s", err, hint)
}

// Values checks the file for one node (Role and Node set) and fills in the
// defaults. Every error names the file, the line and the key.
func (f File) Values() (Values, error) {
	m, err := f.Model()
	if err != nil {
		return Values{}, err
	}
	v := f.fixed()
	if err := f.role(&v); err != nil {
		return Values{}, err
	}
	spec := m.Spec()
	v.Domain, v.Node = spec.Domain, spec.Node
	v.LBPort, v.HAHealthPort = spec.LBPort, spec.HealthPort
	for _, a := range spec.APIVIPs {
		v.APIVIPs = append(v.APIVIPs, a.String())
	}
	for _, a := range spec.IngressVIPs {
		v.IngressVIPs = append(v.IngressVIPs, a.String())
	}
	v.VIPs = append(slices.Clone(v.APIVIPs), v.IngressVIPs...)
	for _, p := range f.ReverseZones {
		v.ReverseZones = append(v.ReverseZones, p.String())
	}
	v.Spread = cluster.IngressGroups(spec.IngressVIPs) > 1
	if spec.Mode == cluster.ModeBGP {
		v.BGP = true
		// The API VIP, every node's second nameserver, is held once this
		// node's own resolver answers (lbconfig's resolver-ready).
		v.BGPOptions = append(bgpOptions(spec.BGP), fmt.Sprintf("resolver-ready http://127.0.0.1:%d/ready", readyPort))
	}
	if v.HAProxy {
		for _, ap := range f.APIServers {
			if ap.Port() == 0 {
				v.APIServers = append(v.APIServers, ap.Addr().String())
			} else {
				v.APIServers = append(v.APIServers, ap.String())
			}
		}
	}
	if f.Has("routerIDs") {
		ids := []string{strconv.Itoa(int(f.RouterIDs.API))}
		for _, id := range f.RouterIDs.Ingress {
			ids = append(ids, strconv.Itoa(int(id)))
		}
		if len(ids) == 1 {
			ids = append(ids, "0")
		}
		v.RouterIDs = strings.Join(ids, " ")
	}
	if f.AdvertInterval != 0 {
		v.AdvertInterval = f.AdvertInterval.String()
	}
	v.Failover = f.Failover
	for _, check := range []func(*Values) error{f.image, f.apiAccess, f.bgpPasswordFiles, f.mdnsKey, f.upstreams, f.listen, f.resolver, f.namespaces, f.ports, f.metrics} {
		if err := check(&v); err != nil {
			return Values{}, err
		}
	}
	return v, nil
}

// fixed are the values every node gets as they are: the file's own, and
// the paths and ports the pods agree on.
func (f File) fixed() Values {
	return Values{
		Cluster: f.Cluster, Role: f.Role, Interface: f.Interface, Image: f.Image,
		Kubeconfig: f.Kubeconfig, MDNSKey: f.MDNSKey, StatusLease: f.StatusLease,
		IngressService: f.IngressService, IngressHealthURL: f.IngressHealthURL, NodesService: f.NodesService, LBServiceNames: f.LBServiceNames, Unicast: f.Unicast, VRRPVersion: f.VRRPVersion,
		APIPort: f.APIPort, LBPort: f.LBPort, HAHealthPort: f.HealthPort, Listen: f.Listen,

		ConfigDir: ConfigDir, LBDir: LBDir,
		KeepalivedRunDir: KeepalivedRunDir, HAProxyRunDir: HAProxyRunDir, TrackDir: TrackDir,
		Corefile: Corefile, ForwardGlob: ConfigDir + "/forward*.conf",
		ResolverScript: ResolverScript, ResolvEnv: ResolvEnv, ForwardConf: ForwardConf, KubeletResolv: KubeletResolv,
		ResolvedDropIn: ResolvedDropIn, ResolvedUpstreams: ResolvedUpstreams,
		KeepalivedConf: LBDir + "/keepalived.conf", KeepalivedPid: KeepalivedRunDir + "/keepalived.pid",
		VRRPPid: KeepalivedRunDir + "/vrrp.pid", HAProxyConf: LBDir + "/haproxy.cfg",
		HAProxySocket: HAProxyRunDir + "/master.sock", HAProxyStopping: HAProxyRunDir + "/" + lb.HAProxyStopping,
		HealthPort: healthPort, ReadyPort: readyPort, MetricsPort: metricsPort,
		PublisherMetricsPort: publisherMetricsPort, LBCorefile: LBCorefile,
		LBDNSPort: lbDNSPort, LBHealthPort: lbHealthPort, LBReadyPort: lbReadyPort, LBMetricsPort: lbMetricsPort,
	}
}

// role decides what the node runs: every role keepalived (but in BGP
// mode, where lbconfig announces the VIPs), control-plane and bootstrap
// nodes haproxy too.
func (f File) role(v *Values) error {
	switch f.Role {
	case ControlPlane, Bootstrap:
		v.LB, v.HAProxy = true, true
	case Worker:
		v.LB = true
	case "":
		return f.errorf([]string{"role"}, "missing: %s, %s or %s (or -role)", ControlPlane, Worker, Bootstrap)
	default:
		return f.errorf([]string{"role"}, "%q is not %s, %s or %s%s", f.Role, ControlPlane, Worker, Bootstrap, cluster.CaseHint(f.Role, ControlPlane, Worker, Bootstrap))
	}
	if f.VIPMode == cluster.ModeBGP {
		v.LB = false
	}
	return f.CheckAPIServers()
}

// CheckAPIServers refuses a node whose haproxy would start with no
// apiserver: a bootstrap node, which has no API to list them, and a
// control-plane node, whose haproxy serves the API VIP before the API
// lists its endpoints (the first kubeadm init waits on that VIP). render
// and render-node refuse the same. A worker has no haproxy.
func (f File) CheckAPIServers() error {
	if len(f.APIServers) > 0 || f.Role == Worker {
		return nil
	}
	if f.Role == Bootstrap {
		return f.errorf([]string{"apiServers"}, "a bootstrap node has no API to list them: give at least one")
	}
	return f.errorf([]string{"apiServers"}, "missing: a control-plane node's haproxy serves the API VIP before the API lists any apiserver "+
		"(the first kubeadm init waits on it): list the control-plane nodes' addresses")
}

func (f File) image(*Values) error {
	if f.Image == "" || !imageRE.MatchString(f.Image) {
		return f.errorf([]string{"image"}, "%q is not an image reference", f.Image)
	}
	return nil
}

// KubeconfigDirName is the name the kubeconfig's directory must have,
// DNSKubeconfigDirName the DNS pod's.
// The DNS and lbconfig pods mount that directory, not the file: a file
// mount keeps the inode it started with, so a kubeconfig or certificate
// replaced by a rename (kubectl, kubeadm, cp over a new file, any
// configuration management) would stay old in the pods until they
// restart, and a missing file would stop kubelet starting the DNS pod,
// which must run before the API. A directory is only safe to mount if it
// is infradns's own: /etc/kubernetes (admin.conf) holds pki/ca.key,
// /var/lib/kubelet every pod's volumes. Its name says it is. Two names,
// so the DNS pod, which parses whatever the link sends, never mounts the
// credentials lbconfig writes the status Leases with.
const (
	KubeconfigDirName    = "infradns"
	DNSKubeconfigDirName = "infradns-dns"
)

// apiAccess checks the kubeconfigs: every node but a bootstrap one follows
// the API, and each kubeconfig's directory, infradns's own, is mounted
// into the pod that reads it.
func (f File) apiAccess(v *Values) error {
	if f.Kubeconfig == "" {
		if f.Role != Bootstrap {
			return f.errorf([]string{"kubeconfig"}, "missing: a %s node follows the API", f.Role)
		}
		if f.DNSKubeconfig != "" {
			return f.errorf([]string{"dnsKubeconfig"}, "set without kubeconfig: the DNS pod's identity is the read-only half of one")
		}
		return nil
	}
	if f.Role == Bootstrap {
		v.Kubeconfig, v.DNSKubeconfig = "", "" // the bootstrap node has no API of its own to follow
		return nil
	}
	dir, err := f.kubeconfigDir("kubeconfig", f.Kubeconfig, KubeconfigDirName)
	if err != nil {
		return err
	}
	v.KubeconfigDir = dir
	v.DNSKubeconfig, v.DNSKubeconfigDir = f.Kubeconfig, dir
	if f.DNSKubeconfig == "" {
		return nil
	}
	if dir, err = f.kubeconfigDir("dnsKubeconfig", f.DNSKubeconfig, DNSKubeconfigDirName); err != nil {
		return err
	}
	v.DNSKubeconfig, v.DNSKubeconfigDir = f.DNSKubeconfig, dir
	return nil
}

// kubeconfigDir checks one kubeconfig path (the cluster file's key) and
// returns the directory the pod mounts, which must be named name.
func (f File) kubeconfigDir(key, p, name string) (string, error) {
	if err := cluster.CheckPath(p); err != nil {
		return "", f.errorf([]string{key}, "%v", err)
	}
	dir := path.Dir(p)
	for _, d := range []string{ConfigDir, RunDir} {
		if dir == "/" || within(dir, d) || within(d, dir) {
			return "", f.errorf([]string{key}, "%q: its directory is mounted into the pods and must not be / or hold or be in %s", p, d)
		}
	}
	if path.Base(dir) != name {
		return "", f.errorf([]string{key}, "%q: the pods mount the kubeconfig's directory, and %s is not infradns's own (it may hold other credentials): "+
			"put the kubeconfig (and any certificate file it names) in a directory named %s that holds nothing else, such as /etc/kubernetes/%s/kubeconfig",
			p, dir, name, name)
	}
	return dir, nil
}

// bgpPasswordFiles checks where the node's BGP password files are: the
// lbconfig pod mounts each, and no other pod may see them, so none is in a
// directory another pod mounts (the configuration, the run directories,
// the kubeconfig's, which the DNS pod reads) or in kubelet's manifests.
// render-node never reads them: they are on the node, not where it runs.
func (f File) bgpPasswordFiles(v *Values) error {
	if !v.BGP {
		return nil
	}
	for _, p := range f.BGP.For(f.Node).Peers {
		if p.PasswordFile == "" {
			continue
		}
		for _, d := range []string{ConfigDir, RunDir, ManifestDir, v.KubeconfigDir, v.DNSKubeconfigDir} {
			if d != "" && within(p.PasswordFile, d) {
				return f.errorf([]string{"bgp"}, "peer %s: passwordFile %q is in %s, which other pods mount (or kubelet reads): keep it where only the lbconfig pod mounts it, such as /etc/infradns-bgp/", p.Address, p.PasswordFile, d)
			}
		}
		if !slices.Contains(v.BGPPasswordFiles, p.PasswordFile) {
			v.BGPPasswordFiles = append(v.BGPPasswordFiles, p.PasswordFile)
		}
	}
	slices.Sort(v.BGPPasswordFiles)
	return nil
}

// within: p is dir or below it.
func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func (f File) mdnsKey(*Values) error {
	if f.MDNSKey == "" {
		return nil
	}
	if err := cluster.CheckPath(f.MDNSKey); err != nil {
		return f.errorf([]string{"mdnsKey"}, "%v", err)
	}
	if path.Dir(f.MDNSKey) != ConfigDir {
		return f.errorf([]string{"mdnsKey"}, "%q must be in %s (the directory the pods mount)", f.MDNSKey, ConfigDir)
	}
	return nil
}

// upstreams refuses the forwarding loop: CoreDNS asking itself (or
// systemd-resolved's stub, which asks CoreDNS).
func (f File) upstreams(v *Values) error {
	vips := append(slices.Clone(f.APIVIPs), f.IngressVIPs...)
	for _, a := range f.Upstreams {
		if a.IsLoopback() || a.IsUnspecified() || slices.Contains(vips, a) {
			return f.errorf([]string{"upstreams"}, "%s would loop back to this node", a)
		}
		if err := cluster.CheckUnicast(a); err != nil {
			return f.errorf([]string{"upstreams"}, "%s: %v", a, err)
		}
		v.Upstreams = append(v.Upstreams, a.String())
	}
	return nil
}

func (f File) listen(*Values) error {
	for _, l := range f.Listen {
		if a, err := netip.ParseAddr(l); err == nil {
			if a.Zone() != "" {
				return f.errorf([]string{"listen"}, "%q: a zoned address", l)
			}
			continue
		}
		if cluster.CheckInterface(l) != nil {
			return f.errorf([]string{"listen"}, "%q is neither an address nor an interface name", l)
		}
	}
	return nil
}

// ListenAhead are the API VIPs the Corefile's bind names beside listen's
// addresses and interfaces (those listen names already left out): every
// node's second nameserver is the API VIP, and the bind plugin binds an
// address named there ahead of keepalived adding it, so the node that
// takes the VIP answers on it at once, not when it sees the address event.
func (v Values) ListenAhead() []string {
	var out []string
	for _, s := range v.APIVIPs {
		vip, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		if !slices.ContainsFunc(v.Listen, func(l string) bool { a, err := netip.ParseAddr(l); return err == nil && a == vip }) {
			out = append(out, vip.String())
		}
	}
	return out
}

// Resolver modes: how the node's own resolver reaches CoreDNS.
const (
	// ResolverNetworkManager: the dispatcher script writes
	// /etc/resolv.conf (this node first) and forward.conf on every
	// NetworkManager event.
	ResolverNetworkManager = "networkmanager"
	// ResolverSystemdResolved: systemd-resolved keeps /etc/resolv.conf
	// (its 127.0.0.53 stub) and routes the cluster domain to this node's
	// CoreDNS; a systemd unit runs the same script, which writes
	// forward.conf, kubelet's resolv.conf and resolved's route. It works
	// whoever configures the links (systemd-networkd under netplan, or
	// NetworkManager), as long as they hand DNS to systemd-resolved.
	ResolverSystemdResolved = "systemd-resolved"
)

// resolver checks the resolver mode. systemd-resolved's stub holds
// 127.0.0.53:53 and 127.0.0.54:53: a CoreDNS bound to the wildcard address
// would not start beside it, so this mode needs listen, and none of its
// addresses may be the wildcard or the stub's.
func (f File) resolver(v *Values) error {
	switch f.Resolver {
	case "", ResolverNetworkManager:
		v.Resolver = ResolverNetworkManager
		return nil
	case ResolverSystemdResolved:
		v.Resolver, v.Resolved = ResolverSystemdResolved, true
	default:
		return f.errorf([]string{"resolver"}, "%q is not %s or %s%s", f.Resolver, ResolverNetworkManager, ResolverSystemdResolved, cluster.CaseHint(f.Resolver, ResolverNetworkManager, ResolverSystemdResolved))
	}
	if len(f.Listen) == 0 {
		return f.errorf([]string{"resolver", "listen"}, "systemd-resolved holds 127.0.0.53:53: set listen (e.g. [%s, lo]) so CoreDNS binds only those", cmp.Or(f.Interface, "ens3"))
	}
	for _, l := range f.Listen {
		a, err := netip.ParseAddr(l)
		if err != nil {
			continue // an interface: its addresses
		}
		if a.IsUnspecified() || a == stubV4 || a == stubProxyV4 {
			return f.errorf([]string{"resolver", "listen"}, "%s: systemd-resolved's stub holds port 53 there", l)
		}
	}
	return nil
}

// systemd-resolved's stub listeners.
var (
	stubV4      = netip.AddrFrom4([4]byte{127, 0, 0, 53})
	stubProxyV4 = netip.AddrFrom4([4]byte{127, 0, 0, 54})
)

// DefaultStatusLeaseNamespace is where the status Leases go unless the
// cluster file says otherwise: the namespace deploy/rbac.yaml creates.
const DefaultStatusLeaseNamespace = "infradns"

func (f File) namespaces(v *Values) error {
	v.Namespace = f.Namespace
	if v.Namespace == "" {
		v.Namespace = "kube-system"
	}
	if err := cluster.CheckNamespace(v.Namespace); err != nil {
		return f.errorf([]string{"namespace"}, "%v", err)
	}
	switch {
	case f.NoStatusLeases && f.StatusLease != "":
		return f.errorf([]string{"statusLeaseNamespace"}, "set, but statusLeases is false")
	case f.NoStatusLeases:
		v.StatusLease = ""
	case f.StatusLease == "":
		// On by default: `infradns status` and the alerts read them.
		v.StatusLease = DefaultStatusLeaseNamespace
	default:
		if err := cluster.CheckNamespace(f.StatusLease); err != nil {
			return f.errorf([]string{"statusLeaseNamespace"}, "%v", err)
		}
	}
	if f.NodesService != "" {
		if err := cluster.CheckNamespacedName(f.NodesService); err != nil {
			return f.errorf([]string{"nodesService"}, "%v", err)
		}
		if f.Kubeconfig == "" && f.Role != Bootstrap {
			return f.errorf([]string{"nodesService"}, "needs kubeconfig: it is a Service of the API")
		}
	}
	if f.LBServiceNames && f.Kubeconfig == "" && f.Role != Bootstrap {
		return f.errorf([]string{"lbServiceNames"}, "needs kubeconfig: the names come from the Services of the API")
	}
	switch f.LBPools {
	case "", "false":
	case "class", "default":
		if f.Kubeconfig == "" && f.Role != Bootstrap {
			return f.errorf([]string{"lbPools"}, "needs kubeconfig: the pools and Services are read, and the addresses written, through the API")
		}
		// The control-plane nodes' lbconfig pods elect one writer;
		// workers and the bootstrap node have no part in it.
		v.LBPools = f.Role == ControlPlane && v.Kubeconfig != ""
		v.LBPoolsDefault = f.LBPools == "default"
		// Announced by every node over BGP; the VRRP mode does not
		// announce Services yet.
		v.LBServices = v.BGP && v.Kubeconfig != ""
		if v.LBServices {
			v.LBServicesHealthURL = f.LBServicesHealthURL
		}
	default:
		return f.errorf([]string{"lbPools"}, "%q: want class (Services of class %s), default (and those with no class) or false", f.LBPools, cluster.LoadBalancerClass)
	}
	if u := f.LBServicesHealthURL; u != "" {
		if err := cluster.CheckHealthURL(u); err != nil {
			return f.errorf([]string{"lbServicesHealthURL"}, "%v", err)
		}
		if f.VIPMode != cluster.ModeBGP || f.LBPools == "" || f.LBPools == "false" {
			return f.errorf([]string{"lbServicesHealthURL"}, "gates the Services' routes, which only lbPools in vipMode bgp announces")
		}
	}
	return nil
}

// ports keeps haproxy off the ports of the CoreDNS and publisher pods.
func (f File) ports(*Values) error {
	for _, k := range []struct {
		key  string
		port uint16
	}{{"lbPort", cmp.Or(f.LBPort, cluster.DefaultLBPort)}, {"lbHealthPort", cmp.Or(f.HealthPort, cluster.DefaultHealthPort)}} {
		switch k.port {
		case healthPort, readyPort, metricsPort, publisherMetricsPort, lbDNSPort, lbHealthPort, lbReadyPort, lbMetricsPort, 53:
			return f.errorf([]string{k.key}, "%d is taken by CoreDNS, lbconfig or mdns-publisher", k.port)
		}
	}
	return nil
}

// metrics puts the three metrics endpoints on metricsAddress: loopback by
// default, so a node does not export its state to every network it is on
// (set the node's address, or 0.0.0.0, for a scraper elsewhere).
func (f File) metrics(v *Values) error {
	a := f.MetricsAddress
	if !a.IsValid() {
		a = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	if a.Zone() != "" || a.IsMulticast() || a.IsLinkLocalUnicast() {
		return f.errorf([]string{"metricsAddress"}, "%s: an address to listen on (loopback, the node's, or 0.0.0.0)", a)
	}
	v.Metrics = netip.AddrPortFrom(a, metricsPort).String()
	v.LBMetrics = netip.AddrPortFrom(a, lbMetricsPort).String()
	v.PublisherMetrics = netip.AddrPortFrom(a, publisherMetricsPort).String()
	v.MetricsProbeHost = a.String()
	if a.IsUnspecified() {
		v.MetricsProbeHost = "127.0.0.1"
		if a.Is6() {
			v.MetricsProbeHost = "::1"
		}
	}
	return nil
}
