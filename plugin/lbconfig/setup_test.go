package lbconfig

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"

	"github.com/infradns/infradns/internal/lb"
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
			if l.cfg.Cluster != "ocp4" || l.cfg.APIVIPs[0] != netip.MustParseAddr("192.0.2.5") {
				t.Errorf("Config = %+v", l.cfg)
			}
			if l.cfg.LBPort != lb.DefaultLBPort || l.cfg.APIPort != lb.DefaultAPIPort || l.cfg.VRRPVersion != 3 ||
				l.cfg.AdvertInterval != 100*time.Millisecond || l.ingressNS != "openshift-ingress" || l.ingressName != "router-internal-default" {
				t.Errorf("Defaults not set: %+v", l.cfg)
			}
			if r := l.reload[lb.Keepalived]; r.method != "pidfile" || r.path != DefaultKeepalivedPidfile {
				t.Errorf("Default keepalived reload = %+v", r)
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
			if len(l.cfg.APIVIPs) != 2 || len(l.cfg.IngressVIPs) != 2 || len(l.cfg.NodeIPs) != 2 || !l.cfg.Unicast {
				t.Errorf("Config = %+v", l.cfg)
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
			if l.ingressName != "router-internal-apps" || len(l.cfg.StaticBackends) != 3 || l.cfg.StaticBackends[0].Port() != 0 {
				t.Errorf("Ingress %s, backends %v", l.ingressName, l.cfg.StaticBackends)
			}
			if l.statusNS != "openshift-kni-infra" {
				t.Errorf("Status namespace = %q", l.statusNS)
			}
			if l.guardWindow != 5*time.Second {
				t.Errorf("Guard window = %v", l.guardWindow)
			}
			if l.health["api"] != "https://127.0.0.1:6443/readyz" || l.health["ingress"] != "none" {
				t.Errorf("Health = %v", l.health)
			}
			if l.cfg.AdvertInterval != 50*time.Millisecond || l.cfg.RouterIDs.API != 14 || l.cfg.RouterIDs.Ingress != 0 {
				t.Errorf("Timing/ids = %v %+v", l.cfg.AdvertInterval, l.cfg.RouterIDs)
			}
		}},
		{name: "v2 with whole seconds", input: "lbconfig {\ncluster a\napi-vip 192.0.2.5\nhaproxy /x\nvrrp-version 2\nadvert-interval 1s\n}"},
		{name: "no cluster", input: "lbconfig {\napi-vip 192.0.2.5\nhaproxy /x\n}", shouldErr: "'cluster NAME' option is required"},
		{name: "no vip", input: "lbconfig {\ncluster a\nhaproxy /x\n}", shouldErr: "api-vip"},
		{name: "no output", input: "lbconfig {\ncluster a\napi-vip 192.0.2.5\n}", shouldErr: "at least one of"},
		{name: "arguments", input: "lbconfig example.org {\ncluster a\n}", shouldErr: "Wrong argument count"},
		{name: "twice", input: "lbconfig {\ncluster a\napi-vip 192.0.2.5\nhaproxy /x\n}\nlbconfig {\n}", shouldErr: "Testfile:6 - Error during parsing: this plugin can only be used once per Server Block"},
		{name: "unknown", input: "lbconfig {\nvip 192.0.2.5\n}", shouldErr: "unknown property 'vip'"},
		{name: "bad cluster", input: "lbconfig {\ncluster a.b\n}", shouldErr: "invalid cluster name"},
		{name: "two v4 vips", input: "lbconfig {\napi-vip 192.0.2.5 192.0.2.6\n}", shouldErr: "one address per family"},
		{name: "bad vip", input: "lbconfig {\napi-vip 192.0.2.500\n}", shouldErr: "invalid address"},
		{name: "bad port", input: "lbconfig {\nlb-port 70000\n}", shouldErr: "lb-port must be a port"},
		{name: "same ports", input: "lbconfig {\ncluster a\napi-vip 192.0.2.5\nhaproxy /x\nlb-port 9454\n}", shouldErr: "both 9454"},
		{name: "v2 sub-second", input: "lbconfig {\ncluster a\napi-vip 192.0.2.5\nhaproxy /x\nvrrp-version 2\n}", shouldErr: "whole seconds"},
		{name: "v3 odd interval", input: "lbconfig {\ncluster a\napi-vip 192.0.2.5\nhaproxy /x\nadvert-interval 15ms\n}", shouldErr: "multiple of 10ms"},
		{name: "vrrp 4", input: "lbconfig {\nvrrp-version 4\n}", shouldErr: "must be 2 or 3"},
		{name: "bad duration", input: "lbconfig {\nadvert-interval fast\n}", shouldErr: "invalid advert-interval"},
		{name: "router-ids equal", input: "lbconfig {\ncluster a\napi-vip 192.0.2.5\nhaproxy /x\nrouter-ids 7 7\n}", shouldErr: "both 7"},
		{name: "router-ids range", input: "lbconfig {\nrouter-ids 300 1\n}", shouldErr: "[0, 255]"},
		{name: "reload socket for keepalived", input: "lbconfig {\nreload keepalived socket /run/k.sock\n}", shouldErr: "only haproxy"},
		{name: "reload relative", input: "lbconfig {\nreload haproxy pidfile run/h.pid\n}", shouldErr: "absolute PATH"},
		{name: "reload what", input: "lbconfig {\nreload nginx kill\n}", shouldErr: "keepalived|haproxy"},
		{name: "ingress-service", input: "lbconfig {\ningress-service router\n}", shouldErr: "NAMESPACE/NAME"},
		{name: "bad backend", input: "lbconfig {\nbackends master-0\n}", shouldErr: "invalid backend"},
		{name: "health-check kind", input: "lbconfig {\nhealth-check dns none\n}", shouldErr: "api|ingress"},
		{name: "health-check url", input: "lbconfig {\nhealth-check api 127.0.0.1:9454\n}", shouldErr: "not an http(s) URL"},
		{name: "vrrp-guard", input: "lbconfig {\nvrrp-guard 2m\n}", shouldErr: "(0, 1m]"},
		{name: "status-lease", input: "lbconfig {\nstatus-lease kube_system\n}", shouldErr: "namespace name"},
		{name: "track-dir relative", input: "lbconfig {\ntrack-dir run\n}", shouldErr: "absolute"},
		{name: "interface too long", input: "lbconfig {\ninterface abcdefghijklmnop\n}", shouldErr: "invalid interface"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l, err := parse(caddy.NewTestController("dns", tc.input))
			if tc.shouldErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.shouldErr) {
					t.Fatalf("Err = %v, want it to contain %q", err, tc.shouldErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, l)
			}
		})
	}
}
