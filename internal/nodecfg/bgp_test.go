package nodecfg

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const bgpExample = `vipMode: bgp
bgp:
  asn: 64513
  peers:
  - address: 192.0.2.1
    asn: 64512
  - {address: "2001:db8::1", asn: 64512, bfd: {interval: 50ms, multiplier: 4}}
  nodes:
    worker-7:
      asn: 64514
      routerID: 198.51.100.77
      peers: [{address: 203.0.113.1, asn: 64600, holdTime: 30s, passwordFile: /etc/infradns-bgp/tor-7.password, bfd: false}, {address: "2001:db8:2::1", asn: 64600, passwordFile: /etc/infradns-bgp/tor-7.password}]
    worker-8:
      peers: [{address: 203.0.113.1, asn: 64600}, {address: "2001:db8:2::1", asn: 64600}]`

func bgpFile(t *testing.T, role, node string) File {
	t.Helper()
	f, err := Parse("c.yaml", []byte(edit(map[string]string{"role": "role: " + role}, "node: "+node, bgpExample)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRenderBGP: in BGP mode no node runs keepalived; lbconfig gets the
// node's BGP settings (a node's overrides replacing the shared ones) and only
// the capability it needs.
func TestRenderBGP(t *testing.T) {
	for _, tc := range []struct {
		role, node string
		want       []string
	}{
		{ControlPlane, "master-0", []string{"vip-mode bgp", "bgp-asn 64513",
			"bgp-peer 192.0.2.1 64512 port 179 hold 9s keepalive 3s bfd 100ms 3",
			"bgp-peer 2001:db8::1 64512 port 179 hold 9s keepalive 3s bfd 50ms 4",
			"resolver-ready http://127.0.0.1:18181/ready"}},
		{Worker, "worker-8", []string{"vip-mode bgp", "bgp-asn 64513",
			"bgp-peer 203.0.113.1 64600 port 179 hold 9s keepalive 3s bfd 100ms 3",
			"bgp-peer 2001:db8:2::1 64600 port 179 hold 9s keepalive 3s bfd 100ms 3",
			"resolver-ready http://127.0.0.1:18181/ready"}},
	} {
		t.Run(tc.node, func(t *testing.T) {
			got := render(t, bgpFile(t, tc.role, tc.node))
			if _, ok := got[ManifestDir+"/infradns-keepalived.yaml"]; ok {
				t.Error("keepalived rendered in BGP mode")
			}
			core := string(got[LBCorefile].Data)
			var lines []string
			for _, l := range strings.Split(core, "\n") {
				if l = strings.TrimSpace(l); strings.HasPrefix(l, "vip-mode") || strings.HasPrefix(l, "bgp-") || strings.HasPrefix(l, "resolver-ready") {
					lines = append(lines, l)
				}
				if strings.HasPrefix(l, "keepalived ") || strings.HasPrefix(l, "reload keepalived") {
					t.Errorf("lbconfig Corefile has %q in BGP mode", l)
				}
			}
			if !slices.Equal(lines, tc.want) {
				t.Errorf("BGP lines:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(tc.want, "\n"))
			}
			p, err := DecodePod(got[ManifestDir+"/infradns-lbconfig.yaml"].Data)
			if err != nil {
				t.Fatal(err)
			}
			if caps := p.Spec.Containers[0].SecurityContext.Capabilities.Add; !slices.Equal(caps, []corev1.Capability{"NET_ADMIN", "NET_BIND_SERVICE"}) || p.Spec.HostPID {
				t.Errorf("lbconfig: caps %v, hostPID %v; want [NET_ADMIN] and no host PIDs", caps, p.Spec.HostPID)
			}
		})
	}
	// Overrides: ASN, router ID, peers with a password file and no BFD.
	f := bgpFile(t, Worker, "worker-7")
	got := render(t, f)
	core := string(got[LBCorefile].Data)
	for _, want := range []string{"bgp-asn 64514", "bgp-router-id 198.51.100.77",
		"bgp-peer 203.0.113.1 64600 port 179 hold 30s keepalive 10s password-file /etc/infradns-bgp/tor-7.password bfd off",
		"bgp-peer 2001:db8:2::1 64600 port 179 hold 9s keepalive 3s password-file /etc/infradns-bgp/tor-7.password bfd 100ms 3"} {
		if !strings.Contains(core, "        "+want+"\n") {
			t.Errorf("worker-7: no %q in\n%s", want, core)
		}
	}
	// The file, once, read-only, in the lbconfig pod only; it must exist.
	for p, o := range got {
		if !strings.HasPrefix(p, ManifestDir+"/") {
			continue
		}
		pod, err := DecodePod(o.Data)
		if err != nil {
			t.Fatal(err)
		}
		var mounts []string
		for _, v := range pod.Spec.Volumes {
			if v.HostPath == nil || v.HostPath.Path != "/etc/infradns-bgp/tor-7.password" {
				continue
			}
			if *v.HostPath.Type != corev1.HostPathFile {
				t.Errorf("%s: the password file's type is %s, want File", p, *v.HostPath.Type)
			}
			for _, m := range pod.Spec.Containers[0].VolumeMounts {
				if m.Name == v.Name {
					mounts = append(mounts, fmt.Sprintf("%s ro=%v", m.MountPath, m.ReadOnly))
				}
			}
		}
		want := []string(nil)
		if strings.HasSuffix(p, "/infradns-lbconfig.yaml") {
			want = []string{"/etc/infradns-bgp/tor-7.password ro=true"}
		}
		if !slices.Equal(mounts, want) {
			t.Errorf("%s mounts the password file %v, want %v", p, mounts, want)
		}
	}
}

const inlinePassword = `c.yaml:15: bgp: peers: peer 1: password: an inline password would be written into lbconfig's Corefile (world-readable), the MachineConfig and -dry-run's diff: put it in a file on each node that only root can read (0600) and name that file with passwordFile`

// TestBGPFileRefuses: every bgp section render-node refuses, with FILE:LINE
// of the value at fault.
func TestBGPFileRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		add  []string
		want string
	}{
		{"bgp without bgp mode", []string{"bgp: {asn: 64513}"}, "c.yaml:11: bgp: set, but vipMode is not bgp"},
		{"unknown mode", []string{"vipMode: ecmp"}, `c.yaml:11: vipMode: "ecmp": want vrrp or bgp`},
		{"speaker in the wrong case", []string{"vipMode: bgp", "bgp:", "  asn: 64513", "  speaker: Table"}, `c.yaml:12: bgp: speaker: "Table": want embedded or table (values are case-sensitive: did you mean "table"?)`},
		{"asn not a number", []string{"vipMode: bgp", "bgp:", "  asn: AS64513"}, `c.yaml:13: bgp: asn: "AS64513" is not an AS number in [1, 4294967294]`},
		{"unknown key", []string{"vipMode: bgp", "bgp:", "  asn: 64513", "  neighbours: []"}, `c.yaml:14: bgp: neighbours: unknown key "neighbours": asn, routerID, speaker, table, peers or nodes`},
		{"peer not an address", []string{"vipMode: bgp", "bgp:", "  asn: 64513", "  peers:", "  - address: tor-1", "    asn: 64512"}, `c.yaml:15: bgp: peers: peer 1: address: "tor-1" is not an IP address`},
		{"peer without address", []string{"vipMode: bgp", "bgp:", "  asn: 64513", "  peers:", "  - asn: 64512"}, `c.yaml:15: bgp: peers: peer 1: address is missing`},
		{"peer bfd key", []string{"vipMode: bgp", "bgp:", "  asn: 64513", "  peers:", "  - {address: 192.0.2.1, asn: 64512, bfd: {rate: 1}}"}, `c.yaml:15: bgp: peers: peer 1: bfd: rate: unknown key "rate": interval or multiplier (bfd: false turns it off)`},
		{"no peers", []string{"vipMode: bgp", "bgp:", "  asn: 64513"}, `c.yaml:12: bgp, vipMode: peers: BGP mode needs at least one peer (the ToR) to announce the VIPs to`},
		{"AS_TRANS", []string{"vipMode: bgp", "bgp:", "  asn: 23456", "  peers: [{address: 192.0.2.1, asn: 64512}, {address: '2001:db8::1', asn: 64512}]"}, `c.yaml:12: bgp: asn: 23456 is AS_TRANS (RFC 6793), not an AS number a speaker may use`},
		// An inline password, whatever its characters (U+00A0, \v and \f
		// used to pass here and break lbconfig's parse), is refused
		// without being quoted: it would be rendered in the open.
		{"inline password", []string{"vipMode: bgp", "bgp:", "  asn: 64513", "  peers:", "  - {address: 192.0.2.1, asn: 64512, password: s3cret}"}, inlinePassword},
		{"inline password, no-break space", []string{"vipMode: bgp", "bgp:", "  asn: 64513", "  peers:", "  - {address: 192.0.2.1, asn: 64512, password: \"s3\u00a0cret\"}"}, inlinePassword},
		{"inline password, vertical tab", []string{"vipMode: bgp", "bgp:", "  asn: 64513", "  peers:", "  - {address: 192.0.2.1, asn: 64512, password: \"s3\\vcret\"}"}, inlinePassword},
		{"inline password, form feed", []string{"vipMode: bgp", "bgp:", "  asn: 64513", "  peers:", "  - {address: 192.0.2.1, asn: 64512, password: \"s3\\fcret\"}"}, inlinePassword},
		{"inline password of a node", []string{"vipMode: bgp", "bgp:", "  asn: 64513", "  peers: [{address: 192.0.2.1, asn: 64512}, {address: '2001:db8::1', asn: 64512}]", "  nodes:", "    worker-7:", "      peers: [{address: 192.0.2.1, asn: 64512, password: s3cret}]"},
			`c.yaml:17: bgp: nodes: worker-7: peers: peer 1: password: an inline password would be written into lbconfig's Corefile (world-readable), the MachineConfig and -dry-run's diff: put it in a file on each node that only root can read (0600) and name that file with passwordFile`},
		{"relative password file", []string{"vipMode: bgp", "bgp:", "  asn: 64513", "  peers: [{address: 192.0.2.1, asn: 64512, passwordFile: tor.password}, {address: '2001:db8::1', asn: 64512}]"}, `c.yaml:12: bgp: peers: peer 192.0.2.1: passwordFile: "tor.password" must be a clean absolute path of letters, digits and ._/+@-`},
		{"password file the DNS pod mounts", []string{"vipMode: bgp", "bgp:", "  asn: 64513", "  peers: [{address: 192.0.2.1, asn: 64512, passwordFile: /etc/infradns/tor.password}, {address: '2001:db8::1', asn: 64512}]"}, `c.yaml:12: bgp: peer 192.0.2.1: passwordFile "/etc/infradns/tor.password" is in /etc/infradns, which other pods mount (or kubelet reads): keep it where only the lbconfig pod mounts it, such as /etc/infradns-bgp/`},
		{"password file beside the kubeconfig", []string{"vipMode: bgp", "bgp:", "  asn: 64513", "  peers: [{address: 192.0.2.1, asn: 64512, passwordFile: /etc/kubernetes/infradns/tor.password}, {address: '2001:db8::1', asn: 64512}]"}, `c.yaml:12: bgp: peer 192.0.2.1: passwordFile "/etc/kubernetes/infradns/tor.password" is in /etc/kubernetes/infradns, which other pods mount (or kubelet reads): keep it where only the lbconfig pod mounts it, such as /etc/infradns-bgp/`},
		{"password file in the manifests", []string{"vipMode: bgp", "bgp:", "  asn: 64513", "  peers: [{address: 192.0.2.1, asn: 64512, passwordFile: /etc/kubernetes/manifests/tor.password}, {address: '2001:db8::1', asn: 64512}]"}, `c.yaml:12: bgp: peer 192.0.2.1: passwordFile "/etc/kubernetes/manifests/tor.password" is in /etc/kubernetes/manifests, which other pods mount (or kubelet reads): keep it where only the lbconfig pod mounts it, such as /etc/infradns-bgp/`},
		{"node override of a bad name", []string{"vipMode: bgp", "bgp:", "  asn: 64513", "  nodes:", "    Worker_1: {asn: 64514}"}, `c.yaml:15: bgp: nodes: Worker_1: "Worker_1" is not a Node name: lower-case letters, digits, '-' and '.' (RFC 1123)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("c.yaml", []byte(edit(nil, tc.add...)))
			if err == nil {
				_, err = f.Values()
			}
			if err == nil || err.Error() != tc.want {
				t.Errorf("err = %v\nwant   %s", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "cret") {
				t.Errorf("the error quotes the password: %v", err)
			}
		})
	}
}

// TestLBServicesBGP: with lbPools in BGP mode every node's lbconfig also
// announces the Services (with the default option when lbPools asks for
// it); in VRRP mode, or without lbPools, none does.
func TestLBServicesBGP(t *testing.T) {
	for _, tc := range []struct {
		role, node, lbPools string
		want                string // "" for no services option
	}{
		{ControlPlane, "master-0", "class", "        services\n"},
		{Worker, "worker-8", "default", "        services default\n"},
		{Worker, "worker-8", "false", ""},
		{Worker, "worker-8", "", ""},
	} {
		t.Run(tc.node+" "+tc.lbPools, func(t *testing.T) {
			f := bgpFile(t, tc.role, tc.node)
			f.LBPools = tc.lbPools
			got := string(render(t, f)[LBCorefile].Data)
			if tc.want == "" && strings.Contains(got, "services") || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("want %q in:\n%s", tc.want, got)
			}
		})
	}
	f := exampleFile(t)
	f.Role, f.LBPools = Worker, "default"
	if got := string(render(t, f)[LBCorefile].Data); strings.Contains(got, "services") {
		t.Errorf("VRRP mode: lbconfig announces Services:\n%s", got)
	}
	f.LBServicesHealthURL = "http://127.0.0.1:10256/healthz"
	if _, err := f.Values(); err == nil || !strings.Contains(err.Error(), "lbServicesHealthURL: gates the Services' routes, which only lbPools in vipMode bgp announces") {
		t.Errorf("lbServicesHealthURL in VRRP mode: %v, want an error naming the key", err)
	}
	g := bgpFile(t, Worker, "worker-8")
	g.LBPools, g.LBServicesHealthURL = "class", "http://127.0.0.1:10256/healthz"
	if got := string(render(t, g)[LBCorefile].Data); !strings.Contains(got, "        services\n        health-check services http://127.0.0.1:10256/healthz\n") {
		t.Errorf("want the services check in:\n%s", got)
	}
	g.LBServicesHealthURL = "127.0.0.1:10256"
	if _, err := g.Values(); err == nil || !strings.Contains(err.Error(), "lbServicesHealthURL") {
		t.Errorf("lbServicesHealthURL not a URL: %v, want an error naming the key", err)
	}
}
