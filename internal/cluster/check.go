package cluster

import (
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/infradns/infradns/internal/dnsname"
)

// Keys of a Spec, as the cluster file spells them. Errors name these; a
// front end with other words (lbconfig's options) maps them.
const (
	KeyCluster        = "cluster"
	KeyDomain         = "domain"
	KeyAPIVIPs        = "apiVIPs"
	KeyIngressVIPs    = "ingressVIPs"
	KeyRouterIDs      = "routerIDs"
	KeyAPIPort        = "apiPort"
	KeyLBPort         = "lbPort"
	KeyHealthPort     = "lbHealthPort"
	KeyAPIServers     = "apiServers"
	KeyVRRPVersion    = "vrrpVersion"
	KeyAdvertInterval = "advertInterval"
	KeyFailover       = "failover"
	KeyUnicast        = "unicast"
	KeyTrackDir       = "trackDir"
	KeyIngressService = "ingressService"
	KeyHealth         = "healthChecks"
	KeyNode           = "node"
	KeyInterface      = "interface"
	KeyNodeIPs        = "nodeIPs"
)

// Error is a Spec refused: the keys at fault (the first is where a front
// end points) and why, in words that fit any front end.
type Error struct {
	Keys []string
	Msg  string
}

func (e *Error) Error() string { return strings.Join(e.Keys, ", ") + ": " + e.Msg }

func errorf(keys []string, format string, a ...any) *Error {
	return &Error{Keys: keys, Msg: fmt.Sprintf(format, a...)}
}

func keyErr(key, format string, a ...any) *Error { return errorf([]string{key}, format, a...) }

// check applies every rule to a Spec with its defaults; the first broken
// rule is returned. The order is the order of the cluster file's keys, so a
// user fixing errors one by one works down the file.
func (s Spec) check() error {
	if err := CheckClusterName(s.Name); err != nil {
		return keyErr(KeyCluster, "%v", err)
	}
	if s.Domain != "" {
		if err := CheckDomain(s.Domain); err != nil {
			return keyErr(KeyDomain, "%v", err)
		}
	}
	if err := checkVIPs(KeyAPIVIPs, s.APIVIPs, 1, 1); err != nil {
		return err
	}
	if err := checkVIPs(KeyIngressVIPs, s.IngressVIPs, 0, MaxIngressGroups); err != nil {
		return err
	}
	for _, a := range s.IngressVIPs {
		if slices.Contains(s.APIVIPs, a) {
			// Two VRRP instances on one address: the one that goes BACKUP
			// deletes the address the other one holds.
			return errorf([]string{KeyIngressVIPs, KeyAPIVIPs}, "%s is an API VIP too: each VIP must be used once", a)
		}
	}
	if err := s.checkPorts(); err != nil {
		return err
	}
	for _, b := range s.StaticBackends {
		if err := CheckUnicast(b.Addr()); err != nil {
			return keyErr(KeyAPIServers, "%s: %v", b, err)
		}
		if slices.Contains(s.VIPs(), b.Addr()) {
			return errorf([]string{KeyAPIServers, vipKey(s, b.Addr())}, "%s is a VIP: an apiserver is a node's own address", b.Addr())
		}
	}
	if s.VRRP.Failover != FailoverFast && s.VRRP.Failover != FailoverStable {
		return keyErr(KeyFailover, "%q: must be %s or %s", s.VRRP.Failover, FailoverFast, FailoverStable)
	}
	if err := CheckTiming(s.VRRP.Version, s.VRRP.AdvertInterval); err != nil {
		return errorf([]string{KeyVRRPVersion, KeyAdvertInterval}, "%v", err)
	}
	if err := s.checkBGP(); err != nil {
		return err
	}
	if err := CheckPath(s.TrackDir); err != nil {
		return keyErr(KeyTrackDir, "%v", err)
	}
	if err := CheckNamespacedName(s.IngressService); err != nil {
		return keyErr(KeyIngressService, "%v", err)
	}
	for _, c := range slices.Sorted(maps.Keys(s.Health)) {
		if err := checkHealth(c, s.Health[c]); err != nil {
			return keyErr(KeyHealth, "%v", err)
		}
	}
	if s.Node != "" {
		if err := CheckNodeName(s.Node); err != nil {
			return keyErr(KeyNode, "%v", err)
		}
	}
	if s.Interface != "" && s.Interface != "auto" {
		if err := CheckInterface(s.Interface); err != nil {
			return keyErr(KeyInterface, "%v", err)
		}
	}
	for _, a := range s.NodeIPs {
		if err := CheckUnicast(a); err != nil {
			return keyErr(KeyNodeIPs, "%s: %v", a, err)
		}
		if slices.Contains(s.VIPs(), a) {
			// keepalived would delete the node's own address when it
			// releases the VIP.
			return errorf([]string{vipKey(s, a), KeyNodeIPs}, "%s is this node's own address: a VIP must be an address no node has", a)
		}
	}
	return nil
}

// VIPs are the Spec's API and ingress addresses.
func (s Spec) VIPs() []netip.Addr { return slices.Concat(s.APIVIPs, s.IngressVIPs) }

func vipKey(s Spec, a netip.Addr) string {
	if slices.Contains(s.APIVIPs, a) {
		return KeyAPIVIPs
	}
	return KeyIngressVIPs
}

// checkVIPs: at least min addresses in all, each a host address, none
// twice, at most perFamily of each family.
func checkVIPs(key string, vips []netip.Addr, min, perFamily int) error {
	if len(vips) < min {
		return keyErr(key, "missing: give one address per family (IPv4, IPv6 or both)")
	}
	count := map[string]int{}
	for i, a := range vips {
		if err := CheckUnicast(a); err != nil {
			return keyErr(key, "%s cannot be a virtual IP: %v", a, err)
		}
		if slices.Contains(vips[:i], a) {
			return keyErr(key, "%s is listed twice", a)
		}
		f := Family(a)
		if count[f]++; count[f] > perFamily {
			if perFamily == 1 {
				return keyErr(key, "%s is a second %s address: at most one per family", a, familyWord(f))
			}
			return keyErr(key, "%s: more than %d %s addresses", a, perFamily, familyWord(f))
		}
	}
	return nil
}

func familyWord(f string) string {
	if f == "v4" {
		return "IPv4"
	}
	return "IPv6"
}

func (s Spec) checkPorts() error {
	// The zero values were replaced by defaults; a front end that lets 0
	// through (a YAML 0) meant "default" as well.
	if s.LBPort == s.HealthPort {
		return errorf([]string{KeyLBPort, KeyHealthPort}, "both are %d: haproxy needs two ports", s.LBPort)
	}
	// haproxy runs on the control-plane nodes, beside kube-apiserver: a
	// port of haproxy's that is the apiservers' would keep one of the two
	// from starting (haproxy binds every address).
	for _, k := range []struct {
		key  string
		port uint16
	}{{KeyLBPort, s.LBPort}, {KeyHealthPort, s.HealthPort}} {
		if k.port == s.APIPort {
			return errorf([]string{k.key, KeyAPIPort}, "%d is kube-apiserver's port (apiPort) on the control-plane nodes, where haproxy listens too: pick another (default %d)", k.port, defaultPort(k.key))
		}
		for _, b := range s.StaticBackends {
			if b.Port() == k.port {
				return errorf([]string{k.key, KeyAPIServers}, "%d is the port of apiserver %s, on the control-plane nodes where haproxy listens too: pick another (default %d)", k.port, b, defaultPort(k.key))
			}
		}
	}
	return nil
}

func defaultPort(key string) uint16 {
	if key == KeyHealthPort {
		return DefaultHealthPort
	}
	return DefaultLBPort
}

// CaseHint is what an error about v, none of values, adds when v is one of
// them in another case (BGP for bgp): that values are case-sensitive, and
// which was meant. "" otherwise.
func CaseHint(v string, values ...string) string {
	for _, w := range values {
		if strings.EqualFold(v, w) {
			return fmt.Sprintf(" (values are case-sensitive: did you mean %q?)", w)
		}
	}
	return ""
}

// CheckUnicast accepts an address a host can put on an interface and
// others can reach: not unspecified, loopback, multicast, link-local
// (needs a zone), broadcast or reserved, and without a zone.
func CheckUnicast(a netip.Addr) error {
	a4 := a.Unmap()
	switch {
	case !a.IsValid():
		return fmt.Errorf("not an address")
	case a.Zone() != "":
		return fmt.Errorf("a zoned address (%%%s)", a.Zone())
	case a4.IsUnspecified():
		return fmt.Errorf("the unspecified address")
	case a4.IsLoopback():
		return fmt.Errorf("a loopback address")
	case a4.IsMulticast():
		return fmt.Errorf("a multicast address")
	case a4.IsLinkLocalUnicast():
		return fmt.Errorf("a link-local address")
	case a4.Is4() && a4.As4()[0] == 0:
		return fmt.Errorf("in 0.0.0.0/8 (this network)")
	case a4.Is4() && a4.As4()[0] >= 240:
		return fmt.Errorf("in 240.0.0.0/4 (reserved, and 255.255.255.255 is the broadcast address)")
	}
	return nil
}

var (
	clusterNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,63}$`)
	// Linux interface names: at most 15 bytes, no '/', ':' or white space.
	// Only the characters real names use are taken, so a name never needs
	// quoting in keepalived.conf.
	ifaceRE = regexp.MustCompile(`^[A-Za-z0-9_.@-]{1,15}$`)
	labelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	// Paths written into keepalived.conf and shell-free commands: plain
	// characters only, so no quoting is ever needed.
	pathRE = regexp.MustCompile(`^/[A-Za-z0-9._/+@-]*$`)
)

// CheckClusterName accepts names that can name keepalived instances,
// haproxy sections, files and Leases as they are: letters, digits, '-' and
// '_', at most 63 characters.
func CheckClusterName(name string) error {
	if name == "" {
		return fmt.Errorf("missing: the cluster name")
	}
	if !clusterNameRE.MatchString(name) {
		return fmt.Errorf("%q: at most 63 letters, digits, '-' and '_'", name)
	}
	return nil
}

// CheckDomain accepts a cluster domain: host-name labels (dnsname, RFC
// 1123), at least two of them. Anything else would end up raw in a Corefile
// and in every node's resolv.conf.
func CheckDomain(d string) error {
	if strings.TrimSuffix(d, ".") == "" {
		return fmt.Errorf("missing: the cluster's DNS domain")
	}
	if err := dnsname.CheckDomain(d); err != nil {
		return fmt.Errorf("%q: %v", d, err)
	}
	if !strings.Contains(strings.TrimSuffix(d, "."), ".") {
		return fmt.Errorf("%q: a cluster domain has at least two labels (ocp4.example.com)", d)
	}
	return nil
}

// CheckNodeName accepts a Node name as Kubernetes does (a DNS subdomain of
// RFC 1123 labels, lower case): it ends up in router_id and file names.
func CheckNodeName(n string) error {
	if n == "" || len(n) > 253 {
		return fmt.Errorf("%q is not a Node name (1-253 characters)", n)
	}
	for _, l := range strings.Split(n, ".") {
		if !labelRE.MatchString(l) {
			return fmt.Errorf("%q is not a Node name: lower-case letters, digits, '-' and '.' (RFC 1123)", n)
		}
	}
	return nil
}

// CheckInterface accepts a Linux interface name that needs no quoting.
func CheckInterface(name string) error {
	if !ifaceRE.MatchString(name) {
		return fmt.Errorf("%q is not an interface name (at most 15 letters, digits, '_', '.', '@', '-')", name)
	}
	return nil
}

// CheckPath accepts a clean absolute path of plain characters.
func CheckPath(p string) error {
	if !pathRE.MatchString(p) || path.Clean(p) != p {
		return fmt.Errorf("%q must be a clean absolute path of letters, digits and ._/+@-", p)
	}
	return nil
}

// CheckLabel accepts a DNS-1123 label, as Kubernetes names many objects:
// at most 63 lower-case letters, digits and '-', a letter or digit first
// and last.
func CheckLabel(l string) error {
	if !labelRE.MatchString(l) {
		return fmt.Errorf("%q is not a DNS-1123 label: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit", l)
	}
	return nil
}

// CheckNamespace accepts a Kubernetes namespace name (a DNS-1123 label:
// lower-case letters, digits, inner '-', at most 63).
func CheckNamespace(ns string) error {
	if !labelRE.MatchString(ns) {
		return fmt.Errorf("%q is not a namespace name (a DNS label: lower-case letters, digits, inner '-')", ns)
	}
	return nil
}

// CheckNamespacedName accepts NAMESPACE/NAME of two DNS-1123 labels.
func CheckNamespacedName(s string) error {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || !labelRE.MatchString(ns) || !labelRE.MatchString(name) {
		return fmt.Errorf("%q is not NAMESPACE/NAME (two DNS labels: lower-case letters, digits, inner '-')", s)
	}
	return nil
}

// CheckHealthURL accepts an http(s) URL with a host: what a prober can ask.
func CheckHealthURL(u string) error {
	if u == HealthNone {
		return nil
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.Hostname() == "" || p.User != nil {
		return fmt.Errorf("%q is not an http(s) URL with a host, or none", u)
	}
	return nil
}

func checkHealth(check, u string) error {
	if check != CheckAPI && check != CheckIngress {
		return fmt.Errorf("unknown check %q: api or ingress", check)
	}
	if u == "" {
		return nil
	}
	if err := CheckHealthURL(u); err != nil {
		return fmt.Errorf("%s: %w", check, err)
	}
	return nil
}

// CheckTiming checks a VRRP version and advert interval pair the way
// keepalived will: v3 intervals are centiseconds (12 bits on the wire), v2
// intervals whole seconds (keepalived rounds 0.1 up to 1 s with a warning).
func CheckTiming(version int, interval time.Duration) error {
	switch version {
	case 3:
		if interval < 10*time.Millisecond || interval > 40950*time.Millisecond || interval%(10*time.Millisecond) != 0 {
			return fmt.Errorf("advert interval %s: vrrp version 3 needs a multiple of 10ms in [10ms, 40.95s]", interval)
		}
	case 2:
		if interval < time.Second || interval > 255*time.Second || interval%time.Second != 0 {
			return fmt.Errorf("advert interval %s: vrrp version 2 needs whole seconds in [1s, 255s]", interval)
		}
	default:
		return fmt.Errorf("vrrp version %d: must be 2 or 3", version)
	}
	return nil
}
