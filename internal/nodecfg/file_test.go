package nodecfg

import (
	"strings"
	"testing"
)

// base is a cluster file with one key per line, so each case below knows
// the line its error points at.
var base = []string{
	"cluster: ocp4",                                   // 1
	"domain: ocp4.example.com",                        // 2
	"apiVIPs: [192.0.2.5, 2001:db8::5]",               // 3
	"ingressVIPs: [192.0.2.10, 2001:db8::10]",         // 4
	"interface: ens3",                                 // 5
	"image: quay.io/infradns/infradns:v0.1.0",         // 6
	"kubeconfig: /etc/kubernetes/infradns/kubeconfig", // 7
	"apiServers: [198.51.100.11, 198.51.100.12]",      // 8
	"upstreams: [198.51.100.53]",                      // 9
	"role: control-plane",                             // 10
}

// edit replaces the line of each key in set (an empty value drops it) and
// appends add after the last line (line 11 on).
func edit(set map[string]string, add ...string) string {
	var out []string
	for _, l := range base {
		k, _, _ := strings.Cut(l, ":")
		if v, ok := set[k]; ok {
			if v == "" {
				out = append(out, "# "+k+" dropped") // keep the numbering
				continue
			}
			l = v
		}
		out = append(out, l)
	}
	return strings.Join(append(out, add...), "\n") + "\n"
}

// labelRule is what a cluster name must be, noServers why a control-plane
// node needs apiServers.
const (
	labelRule = `at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit: the status Leases are named after it, and the router IDs computed from it`
	noServers = `missing: a control-plane node's haproxy serves the API VIP before the API lists any apiserver (the first kubeadm init waits on it): list the control-plane nodes' addresses`
)

// TestFileRefuses lists every cluster file render-node refuses, each with
// its exact error: FILE:LINE: KEY: why, in YAML's words.
func TestFileRefuses(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		// The file itself.
		{"empty", "", "c.yaml: empty: a cluster file is a YAML mapping (see deploy/cluster.example.yaml)"},
		{"not a mapping", "- cluster: ocp4\n", "c.yaml:1: a cluster file is a YAML mapping of keys (cluster: ..., apiVIPs: [...])"},
		{"two documents", edit(nil, "---", "cluster: b"), "c.yaml:11: a second YAML document (---): a cluster file is one mapping"},
		{"bad yaml", edit(nil, "domain: [unclosed"), "c.yaml:11: did not find expected ',' or ']'"},
		{"unknown key", edit(nil, "domian: x.example.com"), `c.yaml:11: unknown key "domian" (did you mean "domain"? keys are case-sensitive)`},
		{"key in the wrong case", edit(map[string]string{"apiVIPs": "apivips: [192.0.2.5]"}), `c.yaml:3: unknown key "apivips" (did you mean "apiVIPs"? keys are case-sensitive)`},
		{"key of the old render file", edit(nil, "nodes: []"), `c.yaml:11: unknown key "nodes"`},
		{"key twice", edit(nil, "cluster: b"), "c.yaml:11: cluster: set again (first on line 1)"},
		{"vips not a list", edit(map[string]string{"apiVIPs": "apiVIPs: 192.0.2.5"}), "c.yaml:3: apiVIPs: a value, not a list (want a list of addresses)"},
		{"vip not an address", edit(map[string]string{"ingressVIPs": "ingressVIPs: [192.0.2]"}), `c.yaml:4: ingressVIPs: "192.0.2" is not an IP address (want a list of addresses)`},
		{"port not a number", edit(nil, "lbPort: http"), `c.yaml:11: lbPort: "http" is not a port in [1, 65535] (want a port)`},
		{"port too large", edit(nil, "lbHealthPort: 70000"), `c.yaml:11: lbHealthPort: "70000" is not a port in [1, 65535] (want a port)`},
		{"bad server", edit(map[string]string{"apiServers": "apiServers: [master-0:6443]"}), `c.yaml:8: apiServers: "master-0:6443" is not ADDRESS or ADDRESS:PORT ([ADDRESS]:PORT for IPv6) (want a list of ADDRESS or ADDRESS:PORT)`},
		{"unicast not a boolean", edit(nil, "unicast: sometimes"), `c.yaml:11: unicast: "sometimes" is not a boolean (want true or false)`},
		{"bad interval", edit(nil, "advertInterval: fast"), `c.yaml:11: advertInterval: "fast" is not a duration (want a duration such as 100ms)`},
		{"router ids misspelt", edit(nil, "routerIDs: {api: 1, ingres: 2}"), `c.yaml:11: routerIDs: unknown key "ingres" on line 11: api or ingress (want {api: ID, ingress: ID or [ID, ...]})`},
		{"router id too large", edit(nil, "routerIDs: {api: 300}"), `c.yaml:11: routerIDs: api: "300" is not a router ID in [0, 255] (0: computed) (want {api: ID, ingress: ID or [ID, ...]})`},
		// An error inside a block list or mapping is on its own line.
		{"router id too large on its line", edit(nil, "routerIDs:", "  api: 1", "  ingress: 300"), `c.yaml:13: routerIDs: ingress: "300" is not a router ID in [0, 255] (0: computed) (want {api: ID, ingress: ID or [ID, ...]})`},
		{"second ingress id on its line", edit(nil, "routerIDs:", "  ingress:", "  - 7", "  - x"), `c.yaml:14: routerIDs: ingress: "x" is not a router ID in [0, 255] (0: computed) (want {api: ID, ingress: ID or [ID, ...]})`},
		{"router ids misspelt on its line", edit(nil, "routerIDs:", "  api: 1", "  ingres: 2"), `c.yaml:13: routerIDs: unknown key "ingres" on line 13: api or ingress (want {api: ID, ingress: ID or [ID, ...]})`},
		{"upstream on its line", edit(map[string]string{"upstreams": ""}, "upstreams:", "- 198.51.100.53", "- nope"), `c.yaml:13: upstreams: "nope" is not an IP address (want a list of addresses)`},
		{"server on its line", edit(map[string]string{"apiServers": ""}, "apiServers:", "- 198.51.100.11", "- master-1"), `c.yaml:13: apiServers: "master-1" is not ADDRESS or ADDRESS:PORT ([ADDRESS]:PORT for IPv6) (want a list of ADDRESS or ADDRESS:PORT)`},
		{"reverse zone on its line", edit(nil, "reverseZones:", "- 192.0.2.0/24", "- 198.51.100.1/24"), `c.yaml:13: reverseZones: "198.51.100.1/24" has host bits set: the network is 198.51.100.0/24 (want a list of CIDRs such as 192.0.2.0/24)`},
		{"listen item a list", edit(nil, "listen:", "- lo", "- [ens3]"), `c.yaml:13: listen: item 2: a list (want a list of addresses or interface names)`},

		// The cluster model's rules (internal/cluster), named by key.
		{"ingress health url without a host", edit(nil, "ingressHealthURL: http:///healthz"), `c.yaml:11: ingressHealthURL: ingress: "http:///healthz" is not an http(s) URL with a host, or none`},
		{"no cluster", edit(map[string]string{"cluster": ""}), "c.yaml: cluster: missing (see deploy/cluster.example.yaml)"},
		{"bad cluster", edit(map[string]string{"cluster": "cluster: ocp 4"}), `c.yaml:1: cluster: "ocp 4" is not a DNS-1123 label: ` + labelRule},
		// A cluster name is a DNS-1123 label: Leases are named after it,
		// and OpenShift's router IDs of OCP4 are not those of ocp4.
		{"cluster in upper case", edit(map[string]string{"cluster": "cluster: OCP4"}), `c.yaml:1: cluster: "OCP4" is not a DNS-1123 label: ` + labelRule + ` (did you mean "ocp4"?)`},
		{"cluster with an underscore", edit(map[string]string{"cluster": "cluster: ocp_4"}), `c.yaml:1: cluster: "ocp_4" is not a DNS-1123 label: ` + labelRule},
		{"cluster of 64 characters", edit(map[string]string{"cluster": "cluster: " + strings.Repeat("a", 64)}), `c.yaml:1: cluster: "` + strings.Repeat("a", 64) + `" is not a DNS-1123 label: ` + labelRule},
		{"cluster with a leading dash", edit(map[string]string{"cluster": "cluster: -ocp4"}), `c.yaml:1: cluster: "-ocp4" is not a DNS-1123 label: ` + labelRule},
		{"cluster with a trailing dash", edit(map[string]string{"cluster": "cluster: ocp4-"}), `c.yaml:1: cluster: "ocp4-" is not a DNS-1123 label: ` + labelRule},
		{"domain with a command", edit(map[string]string{"domain": "domain: $(id).example.com"}), `c.yaml:2: domain: "$(id).example.com": label "$(id)" has '$': only letters, digits and '-' are allowed`},
		{"domain with a semicolon", edit(map[string]string{"domain": `domain: "a;b.example.com"`}), `c.yaml:2: domain: "a;b.example.com": label "a;b" has ';': only letters, digits and '-' are allowed`},
		{"domain with a newline", edit(map[string]string{"domain": `domain: "ocp4.example.com\nx"`}), `c.yaml:2: domain: "ocp4.example.com\nx": label "com\nx" has '\n': only letters, digits and '-' are allowed`},
		{"domain of one label", edit(map[string]string{"domain": "domain: localhost"}), `c.yaml:2: domain: "localhost": a cluster domain has at least two labels (ocp4.example.com)`},
		{"no api vip", edit(map[string]string{"apiVIPs": "apiVIPs: []"}), "c.yaml:3: apiVIPs: missing: give one address per family (IPv4, IPv6 or both)"},
		{"two v4 api vips", edit(map[string]string{"apiVIPs": "apiVIPs: [192.0.2.5, 192.0.2.6]"}), "c.yaml:3: apiVIPs: 192.0.2.6 is a second IPv4 address: at most one per family"},
		{"api vip is the ingress vip", edit(map[string]string{"ingressVIPs": "ingressVIPs: [192.0.2.5]"}), "c.yaml:4: ingressVIPs, apiVIPs: 192.0.2.5 is an API VIP too: each VIP must be used once"},
		{"vip 0.0.0.0", edit(map[string]string{"apiVIPs": "apiVIPs: [0.0.0.0]"}), "c.yaml:3: apiVIPs: 0.0.0.0 cannot be a virtual IP: the unspecified address"},
		{"vip ::", edit(map[string]string{"apiVIPs": `apiVIPs: ["::"]`}), "c.yaml:3: apiVIPs: :: cannot be a virtual IP: the unspecified address"},
		{"vip 127.0.0.1", edit(map[string]string{"ingressVIPs": "ingressVIPs: [127.0.0.1]"}), "c.yaml:4: ingressVIPs: 127.0.0.1 cannot be a virtual IP: a loopback address"},
		{"vip broadcast", edit(map[string]string{"ingressVIPs": "ingressVIPs: [255.255.255.255]"}), "c.yaml:4: ingressVIPs: 255.255.255.255 cannot be a virtual IP: in 240.0.0.0/4 (reserved, and 255.255.255.255 is the broadcast address)"},
		{"vip VRRP's group", edit(map[string]string{"ingressVIPs": "ingressVIPs: [224.0.0.18]"}), "c.yaml:4: ingressVIPs: 224.0.0.18 cannot be a virtual IP: a multicast address"},
		{"vip VRRP's v6 group", edit(map[string]string{"ingressVIPs": `ingressVIPs: ["ff02::12"]`}), "c.yaml:4: ingressVIPs: ff02::12 cannot be a virtual IP: a multicast address"},
		{"vip zoned", edit(map[string]string{"apiVIPs": `apiVIPs: ["fd00::5%eth0"]`}), "c.yaml:3: apiVIPs: fd00::5%eth0 cannot be a virtual IP: a zoned address (%eth0)"},
		{"vip is a node's address", edit(map[string]string{"apiServers": "apiServers: [192.0.2.10]"}), "c.yaml:8: apiServers, ingressVIPs: 192.0.2.10 is a VIP: an apiserver is a node's own address"},
		{"server 0.0.0.0", edit(map[string]string{"apiServers": "apiServers: [0.0.0.0]"}), "c.yaml:8: apiServers: 0.0.0.0:6443: the unspecified address"},
		{"server multicast", edit(map[string]string{"apiServers": `apiServers: ["[ff02::1]:6443"]`}), "c.yaml:8: apiServers: [ff02::1]:6443: a multicast address"},
		{"same ports", edit(nil, "lbPort: 9000", "lbHealthPort: 9000"), "c.yaml:12: lbPort, lbHealthPort: both are 9000: haproxy needs two ports"},
		// haproxy listens beside kube-apiserver on the control-plane nodes.
		{"lb port 6443", edit(nil, "lbPort: 6443"), "c.yaml:11: lbPort, apiPort: 6443 is kube-apiserver's port (apiPort) on the control-plane nodes, where haproxy listens too: pick another (default 9445)"},
		{"lb port the api port", edit(nil, "apiPort: 8443", "lbPort: 8443"), "c.yaml:12: lbPort, apiPort: 8443 is kube-apiserver's port (apiPort) on the control-plane nodes, where haproxy listens too: pick another (default 9445)"},
		{"health port the api port", edit(nil, "lbHealthPort: 6443"), "c.yaml:11: lbHealthPort, apiPort: 6443 is kube-apiserver's port (apiPort) on the control-plane nodes, where haproxy listens too: pick another (default 9454)"},
		{"lb port a server's port", edit(map[string]string{"apiServers": "apiServers: [198.51.100.11:8443]"}, "lbPort: 8443"), "c.yaml:11: lbPort, apiServers: 8443 is the port of apiserver 198.51.100.11:8443, on the control-plane nodes where haproxy listens too: pick another (default 9445)"},
		{"unknown failover profile", edit(nil, "failover: slow"), `c.yaml:11: failover: "slow": must be fast or stable`},
		{"v2 sub-second", edit(nil, "vrrpVersion: 2"), "c.yaml:11: vrrpVersion, advertInterval: advert interval 60ms: vrrp version 2 needs whole seconds in [1s, 255s]"},
		{"router ids equal", edit(nil, "routerIDs: {api: 7, ingress: 7}"), "c.yaml:11: routerIDs: api and ingress are both 7"},
		{"bad ingress service", edit(nil, "ingressService: ns/a,b=c"), `c.yaml:11: ingressService: "ns/a,b=c" is not NAMESPACE/NAME (two DNS labels: lower-case letters, digits, inner '-')`},
		{"node with a brace", edit(nil, `node: "a b}"`), `c.yaml:11: node: "a b}" is not a Node name: lower-case letters, digits, '-' and '.' (RFC 1123)`},
		{"interface with a quote", edit(map[string]string{"interface": `interface: 'eth"0'`}), `c.yaml:5: interface: "eth\"0" is not an interface name (at most 15 letters, digits, '_', '.', '@', '-')`},
		{"interface auto", edit(map[string]string{"interface": "interface: auto"}), `c.yaml:5: interface: "auto": name the interface; the same on every node`},

		// What render-node adds for the node's pods.
		{"bad role", edit(map[string]string{"role": "role: master"}), `c.yaml:10: role: "master" is not control-plane, worker or bootstrap`},
		{"role in the wrong case", edit(map[string]string{"role": "role: Worker"}), `c.yaml:10: role: "Worker" is not control-plane, worker or bootstrap (values are case-sensitive: did you mean "worker"?)`},
		{"vip mode in the wrong case", edit(nil, "vipMode: BGP"), `c.yaml:11: vipMode: "BGP": want vrrp or bgp (values are case-sensitive: did you mean "bgp"?)`},
		{"vip mode in the wrong case, with a bgp section", edit(nil, "vipMode: BGP", "bgp: {asn: 64513}"), `c.yaml:11: vipMode: "BGP": want vrrp or bgp (values are case-sensitive: did you mean "bgp"?)`},
		{"no image", edit(map[string]string{"image": ""}), `c.yaml: image: "" is not an image reference`},
		{"worker without kubeconfig", edit(map[string]string{"role": "role: worker", "kubeconfig": ""}), "c.yaml: kubeconfig: missing: a worker node follows the API"},
		{"relative kubeconfig", edit(map[string]string{"kubeconfig": "kubeconfig: kubeconfig"}), `c.yaml:7: kubeconfig: "kubeconfig" must be a clean absolute path of letters, digits and ._/+@-`},
		{"kubeconfig beside the config", edit(map[string]string{"kubeconfig": "kubeconfig: /etc/kubeconfig"}), `c.yaml:7: kubeconfig: "/etc/kubeconfig": its directory is mounted into the pods and must not be / or hold or be in /etc/infradns`},
		{"kubeconfig in the config", edit(map[string]string{"kubeconfig": "kubeconfig: /etc/infradns/kubeconfig"}), `c.yaml:7: kubeconfig: "/etc/infradns/kubeconfig": its directory is mounted into the pods and must not be / or hold or be in /etc/infradns`},
		{"kubeconfig in the run directory", edit(map[string]string{"kubeconfig": "kubeconfig: /run/infradns/kubeconfig"}), `c.yaml:7: kubeconfig: "/run/infradns/kubeconfig": its directory is mounted into the pods and must not be / or hold or be in /run/infradns`},
		// What other tools teach: the directories hold other credentials
		// (kubeadm's pki/ca.key, kubelet's client key and every pod's
		// volumes), which the pods would mount.
		{"kubeadm's admin.conf", edit(map[string]string{"kubeconfig": "kubeconfig: /etc/kubernetes/admin.conf"}), `c.yaml:7: kubeconfig: "/etc/kubernetes/admin.conf": the pods mount the kubeconfig's directory, and /etc/kubernetes is not infradns's own (it may hold other credentials): put the kubeconfig (and any certificate file it names) in a directory named infradns that holds nothing else, such as /etc/kubernetes/infradns/kubeconfig`},
		{"kubelet's kubeconfig", edit(map[string]string{"kubeconfig": "kubeconfig: /var/lib/kubelet/kubeconfig"}), `c.yaml:7: kubeconfig: "/var/lib/kubelet/kubeconfig": the pods mount the kubeconfig's directory, and /var/lib/kubelet is not infradns's own (it may hold other credentials): put the kubeconfig (and any certificate file it names) in a directory named infradns that holds nothing else, such as /etc/kubernetes/infradns/kubeconfig`},
		// The DNS pod's own identity: a directory of its own, never the
		// one holding lbconfig's credentials (which may write Leases).
		{"dns kubeconfig beside lbconfig's", edit(nil, "dnsKubeconfig: /etc/kubernetes/infradns/dns.kubeconfig"), `c.yaml:11: dnsKubeconfig: "/etc/kubernetes/infradns/dns.kubeconfig": the pods mount the kubeconfig's directory, and /etc/kubernetes/infradns is not infradns's own (it may hold other credentials): put the kubeconfig (and any certificate file it names) in a directory named infradns-dns that holds nothing else, such as /etc/kubernetes/infradns-dns/kubeconfig`},
		{"dns kubeconfig is admin.conf", edit(nil, "dnsKubeconfig: /etc/kubernetes/admin.conf"), `c.yaml:11: dnsKubeconfig: "/etc/kubernetes/admin.conf": the pods mount the kubeconfig's directory, and /etc/kubernetes is not infradns's own (it may hold other credentials): put the kubeconfig (and any certificate file it names) in a directory named infradns-dns that holds nothing else, such as /etc/kubernetes/infradns-dns/kubeconfig`},
		{"dns kubeconfig in the config", edit(nil, "dnsKubeconfig: /etc/infradns/kubeconfig"), `c.yaml:11: dnsKubeconfig: "/etc/infradns/kubeconfig": its directory is mounted into the pods and must not be / or hold or be in /etc/infradns`},
		{"dns kubeconfig without kubeconfig", edit(map[string]string{"role": "role: bootstrap", "kubeconfig": ""}, "dnsKubeconfig: /etc/kubernetes/infradns-dns/kubeconfig"), "c.yaml:11: dnsKubeconfig: set without kubeconfig: the DNS pod's identity is the read-only half of one"},
		{"bootstrap without servers", edit(map[string]string{"role": "role: bootstrap", "apiServers": ""}), "c.yaml: apiServers: a bootstrap node has no API to list them: give at least one"},
		{"control plane without servers", edit(map[string]string{"apiServers": ""}), "c.yaml: apiServers: " + noServers},
		{"control plane with no servers", edit(map[string]string{"apiServers": "apiServers: []"}), "c.yaml:8: apiServers: " + noServers},
		{"stub upstream", edit(map[string]string{"upstreams": "upstreams: [127.0.0.53]"}), "c.yaml:9: upstreams: 127.0.0.53 would loop back to this node"},
		{"vip upstream", edit(map[string]string{"upstreams": "upstreams: [192.0.2.5]"}), "c.yaml:9: upstreams: 192.0.2.5 would loop back to this node"},
		{"key elsewhere", edit(nil, "mdnsKey: /root/mdns.key"), `c.yaml:11: mdnsKey: "/root/mdns.key" must be in /etc/infradns (the directory the pods mount)`},
		{"port of coredns", edit(nil, "lbPort: 9153"), "c.yaml:11: lbPort: 9153 is taken by CoreDNS, lbconfig or mdns-publisher"},
		{"bad listen", edit(nil, `listen: ["not an iface"]`), `c.yaml:11: listen: "not an iface" is neither an address nor an interface name`},
		{"status leases off yet a namespace", edit(nil, "statusLeases: false\nstatusLeaseNamespace: infradns"), `c.yaml:12: statusLeaseNamespace: set, but statusLeases is false`},
		{"status leases not a boolean", edit(nil, "statusLeases: off"), `c.yaml:11: statusLeases: "off" is not a boolean (want true or false)`},
		{"bad nodes service", edit(nil, "nodesService: infradns-nodes"), `c.yaml:11: nodesService: "infradns-nodes" is not NAMESPACE/NAME (two DNS labels: lower-case letters, digits, inner '-')`},
		{"reverse zone not a CIDR", edit(nil, "reverseZones: [192.0.2.1]"), `c.yaml:11: reverseZones: "192.0.2.1" is not a CIDR (want a list of CIDRs such as 192.0.2.0/24)`},
		{"reverse zone with host bits", edit(nil, "reverseZones: [192.0.2.1/24]"), `c.yaml:11: reverseZones: "192.0.2.1/24" has host bits set: the network is 192.0.2.0/24 (want a list of CIDRs such as 192.0.2.0/24)`},
		{"bad namespace", edit(nil, "namespace: Kube_System"), `c.yaml:11: namespace: "Kube_System" is not a namespace name (a DNS label: lower-case letters, digits, inner '-')`},
		{"metrics on a multicast address", edit(nil, "metricsAddress: 224.0.0.1"), `c.yaml:11: metricsAddress: 224.0.0.1: an address to listen on (loopback, the node's, or 0.0.0.0)`},
		{"metrics on a name", edit(nil, "metricsAddress: localhost"), `c.yaml:11: metricsAddress: "localhost" is not an IP address (want an address)`},
		{"unknown resolver", edit(nil, "resolver: resolvconf"), `c.yaml:11: resolver: "resolvconf" is not networkmanager or systemd-resolved`},
		{"resolver in the wrong case", edit(nil, "resolver: NetworkManager"), `c.yaml:11: resolver: "NetworkManager" is not networkmanager or systemd-resolved (values are case-sensitive: did you mean "networkmanager"?)`},
		{"resolver not a word", edit(nil, "resolver: [systemd-resolved]"), `c.yaml:11: resolver: a list (want networkmanager or systemd-resolved)`},
		{"resolved without listen", edit(nil, "resolver: systemd-resolved"), `c.yaml:11: resolver, listen: systemd-resolved holds 127.0.0.53:53: set listen (e.g. [ens3, lo]) so CoreDNS binds only those`},
		{"resolved and the wildcard", edit(nil, "listen: [ens3, 0.0.0.0]", "resolver: systemd-resolved"), `c.yaml:12: resolver, listen: 0.0.0.0: systemd-resolved's stub holds port 53 there`},
		{"resolved and its stub", edit(nil, "resolver: systemd-resolved", "listen: [127.0.0.53]"), `c.yaml:12: resolver, listen: 127.0.0.53: systemd-resolved's stub holds port 53 there`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("c.yaml", []byte(tc.in))
			if err == nil {
				_, err = f.Values()
			}
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.in)
			}
			if err.Error() != tc.want {
				t.Errorf("Err =\n  %s\nwant\n  %s", err, tc.want)
			}
		})
	}
}

// TestFileEveryRole: the one file renders every role; keys a role does not
// use (apiServers on a worker, kubeconfig on a bootstrap node) are ignored.
func TestFileEveryRole(t *testing.T) {
	for _, role := range []string{ControlPlane, Worker, Bootstrap} {
		f, err := Parse("c.yaml", []byte(edit(map[string]string{"role": ""})))
		if err != nil {
			t.Fatal(err)
		}
		f.Role, f.Node = role, "node-0"
		v, err := f.Values()
		if err != nil {
			t.Errorf("%s: %v", role, err)
			continue
		}
		if got := len(v.APIServers) > 0; got != (role != Worker) {
			t.Errorf("%s: backends %v", role, v.APIServers)
		}
		if got := v.Kubeconfig != ""; got != (role != Bootstrap) {
			t.Errorf("%s: kubeconfig %q", role, v.Kubeconfig)
		}
	}
}
