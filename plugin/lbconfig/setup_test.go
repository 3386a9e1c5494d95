package lbconfig

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/nodecfg"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name      string
		input     string
		shouldErr string // substring of the error; empty: no error
		check     func(*testing.T, *LBConfig)
	}{
		{name: "minimal", input: `lbconfig {
			cluster ocp4
			api-vip 192.0.2.5
			keepalived /etc/keepalived/keepalived.conf
		}`, check: func(t *testing.T, l *LBConfig) {
			s := l.model.Spec()
			if s.Name != "ocp4" || s.APIVIPs[0] != netip.MustParseAddr("192.0.2.5") {
				t.Errorf("Spec = %+v", s)
			}
			if s.LBPort != cluster.DefaultLBPort || s.APIPort != cluster.DefaultAPIPort || s.VRRP.Version != 3 ||
				s.VRRP.AdvertInterval != 60*time.Millisecond || s.IngressService != "openshift-ingress/router-internal-default" {
				t.Errorf("Defaults not set: %+v", s)
			}
			if r := l.reload[lb.Keepalived]; r.method != "pidfile" || r.path != DefaultKeepalivedPidfile {
				t.Errorf("Default keepalived reload = %+v", r)
			}
		}},
		{name: "haproxy through its master socket", input: `lbconfig {
			cluster ocp4
			api-vip 192.0.2.5
			keepalived /etc/keepalived/keepalived.conf
			haproxy /etc/infradns/lb/haproxy.cfg
			reload haproxy socket /run/infradns/haproxy/master.sock
		}`, check: func(t *testing.T, l *LBConfig) {
			// The pod's wrapper announces a stop there (deploy/static-pods/haproxy.yaml.tmpl).
			if f := l.haproxyStopping(); f != "/run/infradns/haproxy/stopping" {
				t.Errorf("stopping file %q, want /run/infradns/haproxy/stopping", f)
			}
		}},
		{name: "everything", input: `lbconfig {
			kubeconfig /etc/kubernetes/kubeconfig
			cluster ocp4
			node master-0
			api-vip 192.0.2.5 2001:db8::5
			ingress-vip 192.0.2.10 2001:db8::10
			interface eth0
			node-ip 198.51.100.11 2001:db8:1::11
			api-port 6443
			lb-port 9445
			health-port 9454
			keepalived /etc/keepalived/keepalived.conf /etc/infradns/keepalived.tmpl
			haproxy /etc/haproxy/haproxy.cfg
			reload keepalived systemctl reload keepalived
			reload haproxy pidfile /run/haproxy.pid
			unicast
			ingress-service openshift-ingress/router-internal-apps
			backends 198.51.100.10 198.51.100.11:6443 [2001:db8:1::10]:6443
			vrrp-version 3
			advert-interval 50ms
			router-ids 14 0
			track-dir /run/infradns
			health-check api https://127.0.0.1:6443/readyz
			health-check ingress none
			vrrp-guard 5s
			status-lease openshift-kni-infra
		}`, check: func(t *testing.T, l *LBConfig) {
			s := l.model.Spec()
			if len(s.APIVIPs) != 2 || len(s.IngressVIPs) != 2 || len(s.NodeIPs) != 2 || !s.VRRP.Unicast {
				t.Errorf("Spec = %+v", s)
			}
			if l.outputs[lb.Keepalived].template != "/etc/infradns/keepalived.tmpl" || l.outputs[lb.HAProxyCfg].path != "/etc/haproxy/haproxy.cfg" {
				t.Errorf("Outputs = %+v", l.outputs)
			}
			if r := l.reload[lb.Keepalived]; r.method != "command" || strings.Join(r.argv, " ") != "systemctl reload keepalived" {
				t.Errorf("keepalived reload = %+v", r)
			}
			if r := l.reload[lb.HAProxyCfg]; r.method != "pidfile" || r.path != "/run/haproxy.pid" {
				t.Errorf("haproxy reload = %+v", r)
			}
			if f := l.haproxyStopping(); f != "" {
				t.Errorf("haproxy reloaded through a pid file in /run: stopping file %q, want none", f)
			}
			if _, name := l.model.IngressService(); name != "router-internal-apps" || len(s.StaticBackends) != 3 || s.StaticBackends[0].Port() != 6443 {
				t.Errorf("Ingress %s, backends %v", name, s.StaticBackends)
			}
			if l.statusNS != "openshift-kni-infra" {
				t.Errorf("Status namespace = %q", l.statusNS)
			}
			if l.guardWindow != 5*time.Second {
				t.Errorf("Guard window = %v", l.guardWindow)
			}
			if l.model.HealthURL("api") != "https://127.0.0.1:6443/readyz" || l.model.HealthURL("ingress") != "none" {
				t.Errorf("Health = %v", s.Health)
			}
			if g := l.model.Groups(); s.VRRP.AdvertInterval != 50*time.Millisecond || g[0].RouterID != 14 || g[1].RouterID != 61 {
				t.Errorf("Timing/ids = %v %+v", s.VRRP.AdvertInterval, g)
			}
		}},
		{name: "bgp", input: `lbconfig {
			cluster ocp4
			api-vip 10.91.100.1 fd00:91:100::1
			haproxy /etc/haproxy/haproxy.cfg
			vip-mode bgp
			bgp-asn 64513
			bgp-router-id 10.91.1.2
			bgp-peer 10.91.1.1 64512 hold 3s keepalive 1s bfd 50ms 4
			bgp-peer fd00:91:1::1 4200000000 port 1179 bfd off
		}`, check: func(t *testing.T, l *LBConfig) {
			b := l.model.Spec().BGP
			if l.model.Mode() != cluster.ModeBGP || b.ASN != 64513 || b.RouterID.String() != "10.91.1.2" || b.Speaker != cluster.SpeakerEmbedded || len(b.Peers) != 2 {
				t.Fatalf("BGP = %+v", b)
			}
			p, q := b.Peers[0], b.Peers[1]
			if p.ASN != 64512 || p.Password != "" || p.HoldTime != 3*time.Second || p.Keepalive != time.Second ||
				p.BFD.Interval != 50*time.Millisecond || p.BFD.Multiplier != 4 || p.Port != 179 {
				t.Errorf("peer 1 = %+v", p)
			}
			if q.ASN != 4200000000 || q.Port != 1179 || !q.BFD.Off || q.HoldTime != 9*time.Second {
				t.Errorf("peer 2 = %+v", q)
			}
		}},
		{name: "bgp with services", input: "lbconfig {\ncluster a\napi-vip 192.0.2.5\nhaproxy /h.cfg\nkubeconfig /k\nvip-mode bgp\nbgp-asn 64513\nbgp-peer 10.0.0.1 64512\nservices default\nhealth-check services http://127.0.0.1:10256/healthz\n}",
			check: func(t *testing.T, l *LBConfig) {
				if l.services == nil || !l.services.isDefault {
					t.Errorf("services = %+v, want the default class too", l.services)
				}
				if l.servicesHealth != "http://127.0.0.1:10256/healthz" {
					t.Errorf("servicesHealth = %q", l.servicesHealth)
				}
				if h := l.model.Spec().Health; h[cluster.CheckServices] != "" {
					t.Errorf("the model's health checks got the Services' URL: %v", h)
				}
			}},
		{name: "bgp table hand-off on a worker (no output)", input: "lbconfig {\ncluster a\napi-vip 192.0.2.5\ningress-vip 192.0.2.6\nvip-mode bgp\nbgp-speaker table 200\n}",
			check: func(t *testing.T, l *LBConfig) {
				if b := l.model.Spec().BGP; b.Speaker != cluster.SpeakerTable || b.Table != 200 {
					t.Errorf("BGP = %+v", b)
				}
			}},
		{name: "reload and health-check once per kind", input: "lbconfig {\ncluster a\napi-vip 192.0.2.5\nhaproxy /x\nreload keepalived none\nreload haproxy none\nhealth-check api none\nhealth-check ingress none\n}"},
		{name: "stable failover", input: "lbconfig {\ncluster a\napi-vip 192.0.2.5\nhaproxy /x\nfailover stable\n}",
			check: func(t *testing.T, l *LBConfig) {
				if v := l.model.Spec().VRRP; v.Failover != cluster.FailoverStable || v.AdvertInterval != time.Second {
					t.Errorf("VRRP = %+v, want the stable profile's 1s adverts", v)
				}
			}},
		{name: "v2 with whole seconds", input: "lbconfig {\ncluster a\napi-vip 192.0.2.5\nhaproxy /x\nvrrp-version 2\nadvert-interval 1s\n}"},
		{name: "three ingress vips per family", input: "lbconfig {\ncluster a\napi-vip 192.0.2.5\nhaproxy /x\ningress-vip 192.0.2.10 192.0.2.11 192.0.2.12 2001:db8::10\nrouter-ids 0 0 40\n}",
			check: func(t *testing.T, l *LBConfig) {
				var got []string
				for _, g := range l.model.Groups() {
					got = append(got, fmt.Sprintf("%s:%d:%v", g.Name, g.RouterID, g.VIPs))
				}
				want := "[api:167:[192.0.2.5] ingress:38:[192.0.2.10 2001:db8::10] ingress-2:40:[192.0.2.11] ingress-3:60:[192.0.2.12]]"
				if fmt.Sprint(got) != want {
					t.Errorf("Groups = %v, want %v", got, want)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := parse(caddy.NewTestController("dns", tc.input))
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, l)
			}
		})
	}
}

// TestParseRefuses lists every Corefile the plugin refuses, each with its
// exact error: the file, the line of the option at fault and the reason.
// Each input is a valid block with one line changed or added at line 5.
func TestParseRefuses(t *testing.T) {
	block := func(lines ...string) string {
		return "lbconfig {\n    cluster ocp4\n    api-vip 192.0.2.5\n    keepalived /etc/keepalived/keepalived.conf\n    " +
			strings.Join(lines, "\n    ") + "\n}"
	}
	bgpBlock := func(lines ...string) string {
		return "lbconfig {\n    cluster ocp4\n    api-vip 192.0.2.5\n    haproxy /etc/haproxy/haproxy.cfg\n    " +
			strings.Join(lines, "\n    ") + "\n}"
	}
	const at = "Testfile:5 - Error during parsing: "
	tests := []struct {
		name, input, want string
	}{
		{"no cluster", "lbconfig {\napi-vip 192.0.2.5\nhaproxy /x\n}", "Testfile:1 - Error during parsing: the 'cluster NAME' option is required"},
		{"no vip", "lbconfig {\ncluster a\nhaproxy /x\n}", "Testfile:1 - Error during parsing: the 'api-vip ADDRESS...' option is required"},
		{"no output", "lbconfig {\ncluster a\napi-vip 192.0.2.5\n}", "Testfile:1 - Error during parsing: at least one of 'keepalived OUTPUT' and 'haproxy OUTPUT' is required"},
		{"arguments", "lbconfig example.org {\ncluster a\n}", "Testfile:1 - Error during parsing: Wrong argument count or unexpected line ending after 'example.org'"},
		{"twice in a block", block("haproxy /x\n}\nlbconfig {"), "Testfile:7 - Error during parsing: lbconfig: used more than once in this server block (first on line 1)"},
		{"unknown", block("vip 192.0.2.5"), at + "unknown property 'vip'"},
		{"cluster twice", block("cluster b"), at + "cluster: used more than once (first on line 2)"},
		{"api-vip twice", block("api-vip 192.0.2.6"), at + "api-vip: used more than once (first on line 3)"},
		{"reload keepalived twice", block("reload keepalived none", "reload keepalived none"), "Testfile:6 - Error during parsing: reload keepalived: used more than once (first on line 5)"},
		{"health-check api twice", block("health-check api none", "health-check api none"), "Testfile:6 - Error during parsing: health-check api: used more than once (first on line 5)"},
		{"same output for both", block("haproxy /etc/keepalived/keepalived.conf"), at + "keepalived and haproxy both write /etc/keepalived/keepalived.conf"},
		{"relative keepalived output", "lbconfig {\ncluster a\napi-vip 192.0.2.5\nkeepalived keepalived.conf\n}", "Testfile:4 - Error during parsing: keepalived: \"keepalived.conf\" must be a clean absolute path of letters, digits and ._/+@-"},
		{"relative haproxy output", block("haproxy etc/haproxy.cfg"), at + "haproxy: \"etc/haproxy.cfg\" must be a clean absolute path of letters, digits and ._/+@-"},
		{"relative template", block("haproxy /etc/haproxy.cfg haproxy.tmpl"), at + "haproxy: \"haproxy.tmpl\" must be a clean absolute path of letters, digits and ._/+@-"},
		{"bad cluster", "lbconfig {\ncluster a.b\napi-vip 192.0.2.5\nhaproxy /x\n}", "Testfile:2 - Error during parsing: cluster: \"a.b\": at most 63 letters, digits, '-' and '_'"},
		{"two v4 api vips", "lbconfig {\ncluster a\napi-vip 192.0.2.5 192.0.2.6\nhaproxy /x\n}", "Testfile:3 - Error during parsing: api-vip: 192.0.2.6 is a second IPv4 address: at most one per family"},
		{"api vip is the ingress vip", block("ingress-vip 192.0.2.5"), at + "ingress-vip, api-vip: 192.0.2.5 is an API VIP too: each VIP must be used once"},
		{"broadcast vip", block("ingress-vip 255.255.255.255"), at + "ingress-vip: 255.255.255.255 cannot be a virtual IP: in 240.0.0.0/4 (reserved, and 255.255.255.255 is the broadcast address)"},
		{"loopback vip", block("ingress-vip 127.0.0.1"), at + "ingress-vip: 127.0.0.1 cannot be a virtual IP: a loopback address"},
		{"vip is this node's address", block("node-ip 192.0.2.5"), at + "api-vip, node-ip: 192.0.2.5 is this node's own address: a VIP must be an address no node has"},
		{"bad vip", block("ingress-vip 192.0.2.500"), at + "invalid address \"192.0.2.500\""},
		{"multicast vip", block("ingress-vip 224.0.0.18"), at + "invalid address \"224.0.0.18\": not a unicast address"},
		{"bad port", block("lb-port 70000"), at + "lb-port must be a port in [1, 65535]: \"70000\""},
		{"same ports", block("lb-port 9454"), at + "lb-port, health-port: both are 9454: haproxy needs two ports"},
		{"v2 sub-second", block("vrrp-version 2"), at + "vrrp-version, advert-interval: advert interval 60ms: vrrp version 2 needs whole seconds in [1s, 255s]"},
		{"v3 odd interval", block("advert-interval 15ms"), at + "vrrp-version, advert-interval: advert interval 15ms: vrrp version 3 needs a multiple of 10ms in [10ms, 40.95s]"},
		{"unknown failover profile", block("failover slow"), at + "failover: \"slow\": must be fast or stable"},
		{"vrrp 4", block("vrrp-version 4"), at + "vrrp-version must be 2 or 3: \"4\""},
		{"bad duration", block("advert-interval fast"), at + "invalid advert-interval \"fast\": time: invalid duration \"fast\""},
		{"router-ids equal", block("router-ids 7 7"), at + "router-ids: api and ingress are both 7"},
		{"router-ids range", block("router-ids 300 1"), at + "router-ids must be in [0, 255] (0: computed from the cluster name): \"300\""},
		{"reload socket for keepalived", block("reload keepalived socket /run/k.sock"), at + "reload keepalived socket: only haproxy has a master socket"},
		{"reload relative", block("reload haproxy pidfile run/h.pid"), at + "reload haproxy pidfile needs one absolute PATH: \"run/h.pid\" must be a clean absolute path of letters, digits and ._/+@-"},
		{"reload what", block("reload nginx kill"), at + "reload needs keepalived|haproxy and a method: pidfile PATH, socket PATH, none or COMMAND..."},
		{"same pid file for both", block("reload keepalived pidfile /run/x.pid", "reload haproxy pidfile /run/x.pid"), "Testfile:6 - Error during parsing: keepalived and haproxy are both reloaded through /run/x.pid"},
		{"ingress-service without a namespace", block("ingress-service router"), at + "ingress-service: \"router\" is not NAMESPACE/NAME (two DNS labels: lower-case letters, digits, inner '-')"},
		{"ingress-service with a selector", block(`ingress-service "ns/a,b=c"`), at + "ingress-service: \"ns/a,b=c\" is not NAMESPACE/NAME (two DNS labels: lower-case letters, digits, inner '-')"},
		{"bad backend", block("backends master-0"), at + "invalid backend \"master-0\": want ADDRESS or ADDRESS:PORT"},
		{"backend 0.0.0.0", block("backends 0.0.0.0"), at + "backends: 0.0.0.0:6443: the unspecified address"},
		{"backend multicast", block("backends 224.0.0.1:6443"), at + "backends: 224.0.0.1:6443: a multicast address"},
		{"health-check kind", block("health-check dns none"), at + "health-check needs api|ingress|services and URL|none"},
		{"health-check services without services", bgpBlock("vip-mode bgp", "bgp-asn 64513", "bgp-peer 10.0.0.1 64512", "health-check services http://127.0.0.1:10256/healthz"), "Testfile:8 - Error during parsing: health-check services gates the Services' addresses, and this block has no 'services'"},
		{"health-check url", block("health-check api 127.0.0.1:9454"), at + "health-check api: \"127.0.0.1:9454\" is not an http(s) URL with a host, or none"},
		{"health-check without a host", block("health-check api http://"), at + "health-check api: \"http://\" is not an http(s) URL with a host, or none"},
		{"vrrp-guard", block("vrrp-guard 2m"), at + "vrrp-guard must be a duration in (0, 1m] or off: \"2m\""},
		{"status-lease", block("status-lease kube_system"), at + "status-lease: \"kube_system\" is not a namespace name (a DNS label: lower-case letters, digits, inner '-')"},
		{"track-dir relative", block("track-dir run"), at + "track-dir: \"run\" must be a clean absolute path of letters, digits and ._/+@-"},
		{"track-dir with a quote", block(`track-dir "/run/a\"b"`), at + "track-dir: \"/run/a\\\"b\" must be a clean absolute path of letters, digits and ._/+@-"},
		{"track-dir with a newline", block("track-dir \"/run/a\nb\""), at + "track-dir: \"/run/a\\nb\" must be a clean absolute path of letters, digits and ._/+@-"},
		{"interface too long", block("interface abcdefghijklmnop"), at + "interface: \"abcdefghijklmnop\" is not an interface name (at most 15 letters, digits, '_', '.', '@', '-')"},
		{"interface with a quote", block(`interface "eth\"0"`), at + "interface: \"eth\\\"0\" is not an interface name (at most 15 letters, digits, '_', '.', '@', '-')"},
		{"node with a brace", block(`node "a b}"`), at + "node: \"a b}\" is not a Node name: lower-case letters, digits, '-' and '.' (RFC 1123)"},
		{"bgp with keepalived", block("vip-mode bgp", "bgp-asn 64513", "bgp-peer 10.0.0.1 64512"), "Testfile:4 - Error during parsing: vip-mode bgp announces the VIPs over BGP; keepalived would hold them with VRRP: a VIP is one or the other (drop 'keepalived' or 'vip-mode bgp')"},
		{"bgp setting without bgp mode", block("bgp-asn 64513"), at + "bgp-asn is a setting of vip-mode bgp, and this block has no 'vip-mode bgp'"},
		{"bgp peer without bgp mode", block("bgp-peer 10.0.0.1 64512"), at + "bgp-peer is a setting of vip-mode bgp, and this block has no 'vip-mode bgp'"},
		{"services without bgp mode", block("kubeconfig /etc/k", "services"), "Testfile:6 - Error during parsing: services is a setting of vip-mode bgp, and this block has no 'vip-mode bgp'"},
		{"services without a kubeconfig", bgpBlock("vip-mode bgp", "bgp-asn 64513", "bgp-peer 10.0.0.1 64512", "services"), "Testfile:8 - Error during parsing: services needs 'kubeconfig PATH': the Services and their endpoints come from the API"},
		{"services with a class", bgpBlock("vip-mode bgp", "bgp-asn 64513", "bgp-peer 10.0.0.1 64512", "kubeconfig /etc/k", "services metallb"), "Testfile:9 - Error during parsing: services takes nothing, or 'default' (also the Services with no loadBalancerClass): [\"metallb\"]"},
		{"unknown vip mode", bgpBlock("vip-mode ospf"), "Testfile:5 - Error during parsing: vip-mode: \"ospf\": want vrrp or bgp"},
		{"bgp without peers", bgpBlock("vip-mode bgp", "bgp-asn 64513"), at + "bgp-peer, vip-mode: BGP mode needs at least one peer (the ToR) to announce the VIPs to"},
		{"bgp asn not a number", bgpBlock("vip-mode bgp", "bgp-asn AS64513"), "Testfile:6 - Error during parsing: bgp-asn: AS number \"AS64513\": want a number in [1, 4294967294]"},
		{"bgp asn AS_TRANS", bgpBlock("vip-mode bgp", "bgp-asn 23456", "bgp-peer 10.0.0.1 64512"), "Testfile:6 - Error during parsing: bgp-asn: 23456 is AS_TRANS (RFC 6793), not an AS number a speaker may use"},
		{"bgp peer not an address", bgpBlock("vip-mode bgp", "bgp-asn 64513", "bgp-peer tor-1 64512"), "Testfile:7 - Error during parsing: bgp-peer: \"tor-1\" is not an IP address"},
		{"bgp peer twice", bgpBlock("vip-mode bgp", "bgp-asn 64513", "bgp-peer 10.0.0.1 64512", "bgp-peer 10.0.0.1 64512"), "Testfile:8 - Error during parsing: bgp-peer 10.0.0.1: used more than once (first on line 7)"},
		{"bgp peer unknown setting", bgpBlock("vip-mode bgp", "bgp-asn 64513", "bgp-peer 10.0.0.1 64512 ttl 2"), "Testfile:7 - Error during parsing: bgp-peer 10.0.0.1: unknown setting \"ttl\" (port, password-file, hold, keepalive, bfd)"},
		{"bgp bfd out of range", bgpBlock("vip-mode bgp", "bgp-asn 64513", "bgp-peer 10.0.0.1 64512 bfd 1ms 3"), "Testfile:7 - Error during parsing: bgp-peer: peer 10.0.0.1: BFD interval 1ms: want whole milliseconds in [10ms, 1m]"},
		{"bgp bfd without a multiplier", bgpBlock("vip-mode bgp", "bgp-asn 64513", "bgp-peer 10.0.0.1 64512 bfd 100ms"), "Testfile:7 - Error during parsing: bgp-peer 10.0.0.1: bfd needs a value"},
		{"bgp hold below 3s", bgpBlock("vip-mode bgp", "bgp-asn 64513", "bgp-peer 10.0.0.1 64512 hold 1s"), "Testfile:7 - Error during parsing: bgp-peer: peer 10.0.0.1: hold time 1s: want [3s, 65535s] (RFC 4271)"},
		{"bgp v6 peer for a v4 vip", bgpBlock("vip-mode bgp", "bgp-asn 64513", "bgp-peer fd00::1 64512"), "Testfile:7 - Error during parsing: api-vip, bgp-peer: 192.0.2.5 has no v4 peer to be announced to"},
		{"bgp table out of range", bgpBlock("vip-mode bgp", "bgp-speaker table 255"), "Testfile:6 - Error during parsing: bgp-speaker: 255: want a routing table in [1, 252] (253-255 are the kernel's)"},
		{"bgp table with peers", bgpBlock("vip-mode bgp", "bgp-speaker table", "bgp-peer 10.0.0.1 64512"), "Testfile:7 - Error during parsing: bgp-peer, bgp-speaker: speaker table hands the routes to the site's own speaker, which has the peers: leave peers out"},
		{"kubeconfig relative", block("kubeconfig kube/config"), at + "kubeconfig: \"kube/config\" must be a clean absolute path of letters, digits and ._/+@-"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(caddy.NewTestController("dns", tc.input))
			if err == nil {
				t.Fatalf("parse accepted:\n%s", tc.input)
			}
			if err.Error() != tc.want {
				t.Errorf("Err =\n  %s\nwant\n  %s", err, tc.want)
			}
		})
	}
}

// TestRenderedBGPCorefile: what render-node writes for a BGP cluster is a
// block this plugin accepts, with the node's settings, the password read
// from the file it names.
func TestRenderedBGPCorefile(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "tor.password")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := `cluster: ocp4
domain: ocp4.example.com
apiVIPs: [192.0.2.5]
ingressVIPs: [192.0.2.10]
interface: ens3
image: quay.io/infradns/infradns:v0.1.0
kubeconfig: /etc/kubernetes/infradns/kubeconfig
apiServers: [198.51.100.11]
role: control-plane
node: master-0
vipMode: bgp
bgp:
  asn: 64513
  peers: [{address: 198.51.100.1, asn: 64512, passwordFile: ` + pwFile + `, bfd: {interval: 50ms, multiplier: 4}}]
`
	f, err := nodecfg.Parse("c.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	v, err := f.Values()
	if err != nil {
		t.Fatal(err)
	}
	outs, err := nodecfg.Render(v)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(outs, func(o nodecfg.Output) bool { return o.Path == nodecfg.LBCorefile })
	if i < 0 {
		t.Fatal("no lbconfig Corefile rendered")
	}
	core := string(outs[i].Data)
	start := strings.Index(core, "lbconfig {")
	end := strings.Index(core[start:], "\n    }")
	l, err := parse(caddy.NewTestController("dns", core[start:start+end+6]))
	if err != nil {
		t.Fatalf("%v\n%s", err, core)
	}
	b := l.model.Spec().BGP
	if strings.Contains(core, "s3cret") {
		t.Errorf("the rendered Corefile holds the password:\n%s", core)
	}
	if l.model.Mode() != cluster.ModeBGP || b.ASN != 64513 || len(b.Peers) != 1 || b.Peers[0].Password != "s3cret" || b.Peers[0].PasswordFile != pwFile ||
		b.Peers[0].BFD.Interval != 50*time.Millisecond || b.Peers[0].BFD.Multiplier != 4 || l.outputs[lb.Keepalived].path != "" {
		t.Errorf("parsed %+v, outputs %+v", b, l.outputs)
	}
}
