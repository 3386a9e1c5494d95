package nodecfg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/infradns/infradns/internal/cluster"

	"go.yaml.in/yaml/v3"
)

// File is the cluster file: one YAML file for the whole cluster. Every role
// renders from it (keys a role does not use are ignored); role and node are
// given per node on the command line, or in the file for a file per node.
type File struct {
	// Name is the file's name, for errors.
	Name string

	Cluster     string
	Domain      string
	APIVIPs     []netip.Addr
	IngressVIPs []netip.Addr
	Interface   string
	Role        string
	Node        string
	Image       string
	Namespace   string
	// Kubeconfig is how lbconfig and mdnsnodes reach the API. On
	// control-plane nodes it should name the local apiserver, not the VIP
	// that haproxy behind it provides.
	Kubeconfig string
	// DNSKubeconfig is the DNS pod's (mdnsnodes: list and watch, the
	// user infradns-dns of deploy/rbac.yaml), in a directory of its own
	// named infradns-dns, so the pod that parses the link's packets holds
	// no credential that may write. Unset, the DNS pod uses Kubeconfig.
	DNSKubeconfig string
	// APIServers are static haproxy backends until the API lists its own
	// (required on a bootstrap node; on control-plane nodes they let the
	// VIP come up before the API answers; a worker has no haproxy).
	APIServers []netip.AddrPort
	// Upstreams seed forward.conf until the dispatcher script rewrites it.
	Upstreams []netip.Addr
	// MDNSKey is a key file for signed mDNS announcements.
	MDNSKey string
	// Listen restricts CoreDNS to these addresses or interfaces (the bind
	// plugin); needed where systemd-resolved holds 127.0.0.53:53.
	Listen []string
	// StatusLease is the namespace of the status Leases, "infradns"
	// unless set; NoStatusLeases (statusLeases: false) turns them off.
	StatusLease    string
	NoStatusLeases bool
	Unicast        bool
	VRRPVersion    int
	AdvertInterval time.Duration
	// Failover is the VRRP timer profile: fast (default) or stable.
	Failover       string
	RouterIDs      cluster.RouterIDs
	APIPort        uint16
	LBPort         uint16
	HealthPort     uint16
	IngressService string
	// IngressHealthURL is the ingress VIP's health check (lbconfig's
	// health-check ingress): OpenShift's router answers on :1936, an
	// ingress-nginx controller on :10254/healthz.
	IngressHealthURL string
	// ReverseZones are the networks the cluster owns: apiint's reverse
	// option, which answers their reverse zones NXDOMAIN/NODATA like the
	// cluster domain.
	ReverseZones []netip.Prefix
	// NodesService is the Service (NAMESPACE/NAME, deploy/nodes-service.yaml)
	// whose EndpointSlices give mdnsnodes every node's name instead of the
	// Nodes: what a large cluster should use.
	NodesService string
	// LBServiceNames adds lbservices to the DNS pod's Corefile:
	// SERVICE.NAMESPACE.lb.<domain> for every Service of type LoadBalancer,
	// read with the DNS pod's kubeconfig.
	LBServiceNames bool
	// LBPools runs lbpools in the control-plane nodes' lbconfig pods:
	// "class" allocates for Services of class infradns.io/lb, "default"
	// for those with no class too; "" or "false": not at all.
	LBPools string
	// LBServicesHealthURL gates the Services' routes a node announces
	// (lbPools in BGP mode): kube-proxy's /healthz, or none (default).
	LBServicesHealthURL string
	// MetricsAddress is where the metrics endpoints listen (loopback when
	// not set).
	MetricsAddress netip.Addr
	// Resolver is how the node's resolver is wired to CoreDNS:
	// networkmanager (default: the dispatcher script) or systemd-resolved
	// (a resolved route for the cluster domain, kept by a systemd unit).
	Resolver string
	// VIPMode is vrrp (default) or bgp; BGP is the bgp section.
	VIPMode string
	BGP     BGPFile

	// lines maps each key the file sets to its line.
	lines map[string]int
}

// key is one top-level key of the cluster file: how its value is read.
type key struct {
	want string // what the value must look like, for errors
	set  func(f *File, n *yaml.Node) error
}

// keys are the cluster file's keys, case-sensitive. A key not listed is an
// error: a misspelt option must not silently vanish.
var keys = map[string]key{
	"cluster":              {"a name", str(func(f *File) *string { return &f.Cluster })},
	"domain":               {"a DNS domain", str(func(f *File) *string { return &f.Domain })},
	"apiVIPs":              {"a list of addresses", addrs(func(f *File) *[]netip.Addr { return &f.APIVIPs })},
	"ingressVIPs":          {"a list of addresses", addrs(func(f *File) *[]netip.Addr { return &f.IngressVIPs })},
	"interface":            {"an interface name", str(func(f *File) *string { return &f.Interface })},
	"role":                 {"a role", str(func(f *File) *string { return &f.Role })},
	"node":                 {"a Node name", str(func(f *File) *string { return &f.Node })},
	"image":                {"an image reference", str(func(f *File) *string { return &f.Image })},
	"namespace":            {"a namespace", str(func(f *File) *string { return &f.Namespace })},
	"kubeconfig":           {"a path", str(func(f *File) *string { return &f.Kubeconfig })},
	"dnsKubeconfig":        {"a path", str(func(f *File) *string { return &f.DNSKubeconfig })},
	"apiServers":           {"a list of ADDRESS or ADDRESS:PORT", addrPorts(func(f *File) *[]netip.AddrPort { return &f.APIServers })},
	"upstreams":            {"a list of addresses", addrs(func(f *File) *[]netip.Addr { return &f.Upstreams })},
	"mdnsKey":              {"a path", str(func(f *File) *string { return &f.MDNSKey })},
	"listen":               {"a list of addresses or interface names", strs(func(f *File) *[]string { return &f.Listen })},
	"statusLeaseNamespace": {"a namespace", str(func(f *File) *string { return &f.StatusLease })},
	"statusLeases": {"true or false", func(f *File, n *yaml.Node) error {
		var on bool
		if err := boolean(func(*File) *bool { return &on })(f, n); err != nil {
			return err
		}
		f.NoStatusLeases = !on
		return nil
	}},
	"unicast":             {"true or false", boolean(func(f *File) *bool { return &f.Unicast })},
	"vrrpVersion":         {"2 or 3", integer(func(f *File) *int { return &f.VRRPVersion })},
	"advertInterval":      {"a duration such as 100ms", duration(func(f *File) *time.Duration { return &f.AdvertInterval })},
	"failover":            {"fast or stable", str(func(f *File) *string { return &f.Failover })},
	"routerIDs":           {"{api: ID, ingress: ID or [ID, ...]}", routerIDs},
	"apiPort":             {"a port", port(func(f *File) *uint16 { return &f.APIPort })},
	"lbPort":              {"a port", port(func(f *File) *uint16 { return &f.LBPort })},
	"lbHealthPort":        {"a port", port(func(f *File) *uint16 { return &f.HealthPort })},
	"ingressService":      {"NAMESPACE/NAME", str(func(f *File) *string { return &f.IngressService })},
	"ingressHealthURL":    {"an http(s) URL or none", str(func(f *File) *string { return &f.IngressHealthURL })},
	"nodesService":        {"NAMESPACE/NAME", str(func(f *File) *string { return &f.NodesService })},
	"lbServiceNames":      {"true or false", boolean(func(f *File) *bool { return &f.LBServiceNames })},
	"lbPools":             {"class, default or false", str(func(f *File) *string { return &f.LBPools })},
	"lbServicesHealthURL": {"an http(s) URL or none", str(func(f *File) *string { return &f.LBServicesHealthURL })},
	"reverseZones":        {"a list of CIDRs such as 192.0.2.0/24", prefixes(func(f *File) *[]netip.Prefix { return &f.ReverseZones })},
	"metricsAddress":      {"an address", addr(func(f *File) *netip.Addr { return &f.MetricsAddress })},
	"vipMode":             {"vrrp or bgp", str(func(f *File) *string { return &f.VIPMode })},
	"resolver":            {"networkmanager or systemd-resolved", str(func(f *File) *string { return &f.Resolver })},
	"bgp":                 {"{asn: ASN, peers: [{address: ADDRESS, asn: ASN}], ...}", bgpSection},
}

// Parse reads a cluster file. Errors say FILE:LINE: KEY: what is wrong, in
// YAML's words.
func Parse(name string, b []byte) (File, error) {
	f := File{Name: name, lines: map[string]int{}}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return File{}, fmt.Errorf("%s: empty: a cluster file is a YAML mapping (see deploy/cluster.example.yaml)", name)
		}
		return File{}, fmt.Errorf("%s:%s", name, yamlError(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return File{}, fmt.Errorf("%s:%d: a second YAML document (---): a cluster file is one mapping", name, extra.Line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return File{}, fmt.Errorf("%s:%d: a cluster file is a YAML mapping of keys (cluster: ..., apiVIPs: [...])", name, root.Line)
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return File{}, fmt.Errorf("%s:%d: keys are plain words", name, k.Line)
		}
		spec, ok := keys[k.Value]
		if !ok {
			return File{}, fmt.Errorf("%s:%d: unknown key %q%s", name, k.Line, k.Value, suggest(k.Value))
		}
		if prev, dup := f.lines[k.Value]; dup {
			return File{}, fmt.Errorf("%s:%d: %s: set again (first on line %d)", name, k.Line, k.Value, prev)
		}
		f.lines[k.Value] = k.Line
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			continue // "key:" with nothing: the default
		}
		if err := spec.set(&f, v); err != nil {
			// A section (bgp) points inside itself, a list at its item.
			var le *lineError
			if errors.As(err, &le) && len(le.path) == 0 {
				return File{}, fmt.Errorf("%s:%d: %s: %v (want %s)", name, le.line, k.Value, le.err, spec.want)
			}
			if errors.As(err, &le) {
				return File{}, fmt.Errorf("%s:%d: %s: %s: %v", name, le.line, k.Value, strings.Join(le.path, ": "), le.err)
			}
			return File{}, fmt.Errorf("%s:%d: %s: %v (want %s)", name, v.Line, k.Value, err, spec.want)
		}
	}
	return f, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError is a YAML syntax error as LINE: message. yaml.v3 reports a
// parser error at its context mark, counted from 0 where every other error
// counts from 1 ("did not find expected ',' or ']'" for a list opened on
// line 2 says line 1): it is moved to the line it means.
func yamlError(err error) string {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return " " + strings.TrimPrefix(err.Error(), "yaml: ")
	}
	line, _ := strconv.Atoi(m[1])
	if strings.HasPrefix(m[2], "did not find expected") {
		line++
	}
	return fmt.Sprintf("%d: %s", line, m[2])
}

// suggest names the known key a misspelt one was probably meant to be:
// the same but for case, or one letter swapped or missing (not added: a
// plural such as "nodes" is more often another key than a typo).
func suggest(k string) string {
	for _, known := range slices.Sorted(maps.Keys(keys)) {
		if strings.EqualFold(k, known) || (len(k) <= len(known) && editDistance1(k, known)) || transposed(k, known) {
			return fmt.Sprintf(" (did you mean %q? keys are case-sensitive)", known)
		}
	}
	return ""
}

// transposed says whether a is b with two neighbouring letters swapped.
func transposed(a, b string) bool {
	if len(a) != len(b) || a == b {
		return false
	}
	for i := 0; i+1 < len(a); i++ {
		if a[i] != b[i] {
			return a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
		}
	}
	return false
}

// editDistance1 says whether a and b differ by one insertion, deletion or
// substitution.
func editDistance1(a, b string) bool {
	if len(a) < len(b) {
		a, b = b, a
	}
	if len(a)-len(b) > 1 || a == b {
		return false
	}
	i := 0
	for i < len(b) && a[i] == b[i] {
		i++
	}
	if len(a) == len(b) {
		return a[i+1:] == b[i+1:]
	}
	return a[i+1:] == b[i:]
}

// Line is the line a key was set on, 0 when the file does not set it.
func (f File) Line(key string) int { return f.lines[key] }

// Has says whether the file sets key.
func (f File) Has(key string) bool { return f.lines[key] != 0 }

// errorf is an error about keys of the file: FILE:LINE: KEY: msg, at the
// line of the key set last (the one that broke what the others kept), or
// FILE: KEY: msg when the file sets none of them (a default broke it).
func (f File) errorf(keys []string, format string, a ...any) error {
	line := 0
	for _, k := range keys {
		line = max(line, f.lines[k])
	}
	where := f.Name
	if line > 0 {
		where += ":" + strconv.Itoa(line)
	}
	return fmt.Errorf("%s: %s: %s", where, strings.Join(keys, ", "), fmt.Sprintf(format, a...))
}

func scalar(n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("a %s", kindWord(n))
	}
	return n.Value, nil
}

func kindWord(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	case yaml.AliasNode:
		return "alias"
	}
	return "value"
}

func str(field func(*File) *string) func(*File, *yaml.Node) error {
	return func(f *File, n *yaml.Node) error {
		v, err := scalar(n)
		*field(f) = v
		return err
	}
}

// list reads a list of plain values; each calls each, and an error about
// an item is on the item's line.
func list(n *yaml.Node, each func(string) error) error {
	if n.Kind != yaml.SequenceNode {
		return fmt.Errorf("a %s, not a list", kindWord(n))
	}
	for i, item := range n.Content {
		v, err := scalar(item)
		if err != nil {
			return atLine(item.Line, fmt.Errorf("item %d: %v", i+1, err))
		}
		if err := each(v); err != nil {
			return atLine(item.Line, err)
		}
	}
	return nil
}

func strs(field func(*File) *[]string) func(*File, *yaml.Node) error {
	return func(f *File, n *yaml.Node) error {
		var out []string
		err := list(n, func(s string) error {
			out = append(out, s)
			return nil
		})
		*field(f) = out
		return err
	}
}

func addrs(field func(*File) *[]netip.Addr) func(*File, *yaml.Node) error {
	return func(f *File, n *yaml.Node) error {
		var out []netip.Addr
		err := list(n, func(s string) error {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return fmt.Errorf("%q is not an IP address", s)
			}
			out = append(out, a.Unmap())
			return nil
		})
		*field(f) = out
		return err
	}
}

// prefixes reads a list of networks: CIDRs without host bits, IPv4 ones
// written as IPv4.
func prefixes(field func(*File) *[]netip.Prefix) func(*File, *yaml.Node) error {
	return func(f *File, n *yaml.Node) error {
		var out []netip.Prefix
		err := list(n, func(s string) error {
			p, err := netip.ParsePrefix(s)
			switch {
			case err != nil:
				return fmt.Errorf("%q is not a CIDR", s)
			case p != p.Masked():
				return fmt.Errorf("%q has host bits set: the network is %s", s, p.Masked())
			case p.Addr().Is4In6():
				return fmt.Errorf("%q is an IPv4-mapped IPv6 prefix: write it as IPv4", s)
			}
			out = append(out, p)
			return nil
		})
		*field(f) = out
		return err
	}
}

func addr(field func(*File) *netip.Addr) func(*File, *yaml.Node) error {
	return func(f *File, n *yaml.Node) error {
		return scalarAddr(n, field(f))
	}
}

// scalarAddr reads one IP address into dst.
func scalarAddr(n *yaml.Node, dst *netip.Addr) error {
	v, err := scalar(n)
	if err != nil {
		return err
	}
	a, err := netip.ParseAddr(v)
	if err != nil {
		return fmt.Errorf("%q is not an IP address", v)
	}
	*dst = a.Unmap()
	return nil
}

func addrPorts(field func(*File) *[]netip.AddrPort) func(*File, *yaml.Node) error {
	return func(f *File, n *yaml.Node) error {
		var out []netip.AddrPort
		err := list(n, func(s string) error {
			ap, err := netip.ParseAddrPort(s)
			if err != nil {
				a, err2 := netip.ParseAddr(s)
				if err2 != nil {
					return fmt.Errorf("%q is not ADDRESS or ADDRESS:PORT ([ADDRESS]:PORT for IPv6)", s)
				}
				ap = netip.AddrPortFrom(a, 0)
			}
			out = append(out, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
			return nil
		})
		*field(f) = out
		return err
	}
}

func boolean(field func(*File) *bool) func(*File, *yaml.Node) error {
	return func(f *File, n *yaml.Node) error {
		v, err := scalar(n)
		if err != nil {
			return err
		}
		if n.Tag != "!!bool" {
			return fmt.Errorf("%q is not a boolean", v)
		}
		*field(f) = v == "true"
		return nil
	}
}

func integer(field func(*File) *int) func(*File, *yaml.Node) error {
	return func(f *File, n *yaml.Node) error {
		v, err := scalar(n)
		if err != nil {
			return err
		}
		i, err := strconv.Atoi(v)
		if err != nil || n.Tag != "!!int" {
			return fmt.Errorf("%q is not a whole number", v)
		}
		*field(f) = i
		return nil
	}
}

func port(field func(*File) *uint16) func(*File, *yaml.Node) error {
	return func(f *File, n *yaml.Node) error {
		v, err := scalar(n)
		if err != nil {
			return err
		}
		p, err := strconv.ParseUint(v, 10, 16)
		if err != nil || p == 0 || n.Tag != "!!int" {
			return fmt.Errorf("%q is not a port in [1, 65535]", v)
		}
		*field(f) = uint16(p)
		return nil
	}
}

func duration(field func(*File) *time.Duration) func(*File, *yaml.Node) error {
	return func(f *File, n *yaml.Node) error {
		v, err := scalar(n)
		if err != nil {
			return err
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%q is not a duration", v)
		}
		*field(f) = d
		return nil
	}
}

func routerID(n *yaml.Node) (uint8, error) {
	v, err := scalar(n)
	if err != nil {
		return 0, err
	}
	id, err := strconv.ParseUint(v, 10, 8)
	if err != nil || n.Tag != "!!int" {
		return 0, fmt.Errorf("%q is not a router ID in [0, 255] (0: computed)", v)
	}
	return uint8(id), nil
}

func routerIDs(f *File, n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("a %s, not a mapping", kindWord(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			return atLine(k.Line, fmt.Errorf("%s set twice", k.Value))
		}
		seen[k.Value] = true
		switch k.Value {
		case "api":
			id, err := routerID(v)
			if err != nil {
				return atLine(v.Line, fmt.Errorf("api: %v", err))
			}
			f.RouterIDs.API = id
		case "ingress":
			items := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				items = v.Content
			}
			f.RouterIDs.Ingress = nil
			for _, it := range items {
				id, err := routerID(it)
				if err != nil {
					return atLine(it.Line, fmt.Errorf("ingress: %v", err))
				}
				f.RouterIDs.Ingress = append(f.RouterIDs.Ingress, id)
			}
		default:
			return atLine(k.Line, fmt.Errorf("unknown key %q on line %d: api or ingress", k.Value, k.Line))
		}
	}
	return nil
}
