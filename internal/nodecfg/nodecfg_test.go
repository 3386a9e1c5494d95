package nodecfg

import (
	"flag"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/cluster"

	corev1 "k8s.io/api/core/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/ from the current templates")

func exampleFile(t *testing.T) File {
	t.Helper()
	b, err := os.ReadFile("../../deploy/cluster.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse("cluster.example.yaml", b)
	if err != nil {
		t.Fatalf("deploy/cluster.example.yaml: %v", err)
	}
	return f
}

func ips(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, x := range s {
		out[i] = netip.MustParseAddr(x)
	}
	return out
}

func renderList(t *testing.T, f File) []Output {
	t.Helper()
	v, err := f.Values()
	if err != nil {
		t.Fatal(err)
	}
	outs, err := Render(v)
	if err != nil {
		t.Fatal(err)
	}
	return outs
}

func render(t *testing.T, f File) map[string]Output {
	t.Helper()
	m := map[string]Output{}
	for _, o := range renderList(t, f) {
		m[o.Path] = o
	}
	return m
}

// TestRenderRoles renders the shipped example for each role and compares
// every file with testdata/ROLE (go test -update rewrites them).
func TestRenderRoles(t *testing.T) {
	for _, tc := range []struct {
		role, node string
		pods       []string
		corefile   []string // must be in the Corefile
		notCore    []string // must not
	}{
		{ControlPlane, "master-0", []string{"coredns", "haproxy", "keepalived", "lbconfig", "mdns-publisher"},
			[]string{"kubeconfig /etc/kubernetes/infradns/kubeconfig", "haproxy /etc/infradns/lb/haproxy.cfg",
				"backends 198.51.100.11 198.51.100.12 198.51.100.13", "node master-0", "import /etc/infradns/forward*.conf",
				"prometheus 127.0.0.1:9153", "prometheus 127.0.0.1:9155", ".:18053 {\n    bind 127.0.0.1\n"},
			[]string{"health-check api none"}},
		{Worker, "worker-0", []string{"coredns", "keepalived", "lbconfig", "mdns-publisher"},
			[]string{"health-check api none", "keepalived /etc/infradns/lb/keepalived.conf"},
			[]string{"haproxy /etc", "backends"}},
		{Bootstrap, "", []string{"coredns", "haproxy", "keepalived", "lbconfig", "mdns-publisher"},
			[]string{"backends 198.51.100.11"},
			[]string{"kubeconfig", "\n        node "}},
	} {
		t.Run(tc.role, func(t *testing.T) {
			// One file for every role: only the role and node differ.
			f := exampleFile(t)
			f.Role, f.Node = tc.role, tc.node
			got := render(t, f)
			var pods []string
			for p, o := range got {
				if !strings.HasPrefix(p, ManifestDir+"/") {
					continue
				}
				pods = append(pods, strings.TrimSuffix(strings.TrimPrefix(p, ManifestDir+"/infradns-"), ".yaml"))
				pod, err := DecodePod(o.Data)
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				if pod.Namespace != "kube-system" || pod.Spec.Containers[0].Image != f.Image {
					t.Errorf("%s: namespace %q image %q", p, pod.Namespace, pod.Spec.Containers[0].Image)
				}
			}
			slices.Sort(pods)
			if !slices.Equal(pods, tc.pods) {
				t.Errorf("pods %v, want %v", pods, tc.pods)
			}
			// Both Corefiles: the resolver's and lbconfig's.
			core := string(got[Corefile].Data) + string(got[LBCorefile].Data)
			if strings.Contains(string(got[Corefile].Data), "lbconfig {") || strings.Contains(string(got[LBCorefile].Data), "mdnsnodes {") {
				t.Errorf("a Corefile holds the other's plugins:\n%s", core)
			}
			for _, s := range tc.corefile {
				if !strings.Contains(core, s) {
					t.Errorf("Corefile lacks %q:\n%s", s, core)
				}
			}
			for _, s := range tc.notCore {
				if strings.Contains(core, s) {
					t.Errorf("Corefile has %q:\n%s", s, core)
				}
			}
			if d := got[DispatcherPath]; d.Mode != 0o755 || len(d.Data) == 0 {
				t.Errorf("dispatcher script mode %v, %d bytes", d.Mode, len(d.Data))
			}
			env := string(got[ResolvEnv].Data)
			for _, s := range []string{"INFRADNS_DOMAIN=ocp4.example.com\n", "INFRADNS_INTERFACE=ens3\n",
				`INFRADNS_EXCLUDE="192.0.2.5 2001:db8::5 192.0.2.10 2001:db8::10"`} {
				if !strings.Contains(env, s) {
					t.Errorf("resolv.env lacks %q:\n%s", s, env)
				}
			}
			golden(t, filepath.Join("testdata", tc.role), got)
		})
	}
}

func golden(t *testing.T, dir string, got map[string]Output) {
	t.Helper()
	for p, o := range got {
		if p == DispatcherPath || p == ResolverScript {
			continue // shipped as is, tested in deploy/node
		}
		gp := filepath.Join(dir, filepath.FromSlash(p))
		if *update {
			if err := os.MkdirAll(filepath.Dir(gp), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(gp, o.Data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(gp)
		if err != nil {
			t.Fatalf("%v (go test ./internal/nodecfg -update writes it)", err)
		}
		if string(want) != string(o.Data) {
			t.Errorf("%s differs from %s (go test ./internal/nodecfg -update rewrites it):\n%s", p, gp, o.Data)
		}
	}
}

// TestDecodePod: each broken variant of a rendered manifest is refused, so
// the checks that guard the real ones can fail.
func TestDecodePod(t *testing.T) {
	f := exampleFile(t)
	f.Role = ControlPlane
	// lbconfig's manifest has every kind of field the checks look at.
	good := string(render(t, f)[ManifestDir+"/infradns-lbconfig.yaml"].Data)
	if _, err := DecodePod([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"unknown field", "  hostNetwork: true\n", "  hostNetwork: true\n  hostNetwrok: true\n", "unknown field"},
		{"duplicate field", "  hostPID: true\n", "  hostPID: true\n  hostPID: false\n", "already set"},
		{"unknown container field", "    image: ", "    imagePullPolicyy: Always\n    image: ", "unknown field"},
		{"no host network", "  hostNetwork: true\n", "  hostNetwork: false\n", "hostNetwork"},
		{"not critical", "system-node-critical", "system-cluster-critical", "priorityClassName"},
		{"untyped hostPath", "{path: /run/infradns/track, type: DirectoryOrCreate}", "{path: /run/infradns/track}", "needs a type"},
		{"moved mount", "{name: track, mountPath: /run/infradns/track}", "{name: track, mountPath: /var/run/infradns/track}", "keep their path"},
		{"undeclared volume", "{name: tmp, mountPath: /tmp}", "{name: scratch, mountPath: /tmp}", "undeclared volume"},
		{"capabilities kept", `drop: ["ALL"]`, `drop: ["NET_RAW"]`, "drop ALL"},
		{"not a pod", "kind: Pod", "kind: Deployment", "v1/Pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(good, tc.old) {
				t.Fatalf("the manifest has no %q", tc.old)
			}
			bad := strings.Replace(good, tc.old, tc.new, 1)
			_, err := DecodePod([]byte(bad))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCoreDNSProbesMatchCorefile(t *testing.T) {
	f := exampleFile(t)
	f.Role = Worker
	got := render(t, f)
	pod, err := DecodePod(got[ManifestDir+"/infradns-coredns.yaml"].Data)
	if err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	core := string(got[Corefile].Data)
	for _, pr := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if pr == nil || pr.HTTPGet == nil {
			t.Fatal("coredns needs http liveness and readiness probes")
		}
		want := map[string]string{"/health": "health :", "/ready": "ready :"}[pr.HTTPGet.Path] + pr.HTTPGet.Port.String()
		if !strings.Contains(core, want) {
			t.Errorf("probe %s on port %s, but the Corefile has no %q", pr.HTTPGet.Path, pr.HTTPGet.Port.String(), want)
		}
	}
	if !slices.Equal(c.Command, []string{"/usr/bin/coredns"}) || !slices.Equal(c.Args, []string{"-conf", Corefile}) {
		t.Errorf("coredns runs %v %v", c.Command, c.Args)
	}
}

// TestRenderOptions: each optional key of the cluster file reaches the
// file that uses it, and the result still validates.
func TestRenderOptions(t *testing.T) {
	publisher := ManifestDir + "/infradns-mdns-publisher.yaml"
	for _, tc := range []struct {
		name string
		edit func(*File)
		file string
		want []string
	}{
		{"listen", func(f *File) { f.Listen = []string{"ens3", "lo"} }, Corefile, []string{"\n    bind ens3 lo 192.0.2.5 2001:db8::5\n"}},
		{"listen names the API VIP", func(f *File) { f.Listen = []string{"ens3", "192.0.2.5"} }, Corefile, []string{"\n    bind ens3 192.0.2.5 2001:db8::5\n"}},
		{"metrics address", func(f *File) { f.MetricsAddress = netip.MustParseAddr("::") }, Corefile, []string{"\n    prometheus [::]:9153\n"}},
		{"metrics address of the publisher", func(f *File) { f.MetricsAddress = netip.MustParseAddr("198.51.100.11") }, publisher,
			[]string{"- --metrics-address=198.51.100.11:9154"}},
		{"mdns key", func(f *File) { f.MDNSKey = "/etc/infradns/mdns.key" }, Corefile, []string{"        key /etc/infradns/mdns.key\n"}},
		{"mdns key in the publisher", func(f *File) { f.MDNSKey = "/etc/infradns/mdns.key" }, publisher,
			[]string{"- --key=/etc/infradns/mdns.key", "{name: config, mountPath: /etc/infradns, readOnly: true}"}},
		{"vips never announced", func(*File) {}, publisher, []string{"- --exclude-address=192.0.2.5", "- --exclude-address=2001:db8::10"}},
		{"unicast and timing", func(f *File) {
			f.Unicast, f.VRRPVersion, f.AdvertInterval = true, 2, time.Second
		}, LBCorefile, []string{"        unicast\n", "        vrrp-version 2\n", "        advert-interval 1s\n"}},
		{"stable failover", func(f *File) { f.Failover = "stable" }, LBCorefile, []string{"        failover stable\n"}},
		{"stable failover on vrrp version 2", func(f *File) { f.Failover, f.VRRPVersion = "stable", 2 }, LBCorefile,
			[]string{"        failover stable\n", "        vrrp-version 2\n"}},
		{"router ids and lease", func(f *File) {
			f.RouterIDs = cluster.RouterIDs{API: 50, Ingress: []uint8{51}}
			f.lines["routerIDs"] = 1
			f.StatusLease = "kube-system"
		}, LBCorefile, []string{"        router-ids 50 51\n", "        status-lease kube-system\n"}},
		{"three ingress vips per family", func(f *File) {
			f.IngressVIPs = ips("192.0.2.10", "192.0.2.11", "192.0.2.12", "2001:db8::10", "2001:db8::11", "2001:db8::12")
			f.RouterIDs = cluster.RouterIDs{Ingress: []uint8{0, 0, 99}}
			f.lines["routerIDs"] = 1
		}, LBCorefile, []string{"        ingress-vip 192.0.2.10 192.0.2.11 192.0.2.12 2001:db8::10 2001:db8::11 2001:db8::12\n",
			"        router-ids 0 0 0 99\n"}},
		{"three ingress vips answered", func(f *File) {
			f.IngressVIPs = ips("192.0.2.10", "192.0.2.11", "192.0.2.12", "2001:db8::10", "2001:db8::11", "2001:db8::12")
		}, Corefile, []string{"    appswildcard 192.0.2.10 192.0.2.11 192.0.2.12 2001:db8::10 2001:db8::11 2001:db8::12 {\n",
			"    loadbalance\n"}},
		{"three ingress vips never announced", func(f *File) {
			f.IngressVIPs = ips("192.0.2.10", "192.0.2.11", "192.0.2.12")
		}, publisher, []string{"- --exclude-address=192.0.2.11", "- --exclude-address=192.0.2.12"}},
		{"namespace", func(f *File) { f.Namespace = "openshift-kni-infra" }, ManifestDir + "/infradns-keepalived.yaml", []string{"  namespace: openshift-kni-infra\n"}},
		{"nodes service", func(f *File) { f.NodesService = "kube-system/infradns-nodes" }, Corefile, []string{"        nodes-service kube-system/infradns-nodes\n"}},
		{"load-balancer service names", func(f *File) { f.LBServiceNames = true }, Corefile,
			[]string{"    lbservices {\n        zone ocp4.example.com\n        kubeconfig /etc/kubernetes/infradns/kubeconfig\n    }\n    mdnsnodes {\n"}},
		{"reverse zones", func(f *File) {
			f.ReverseZones = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::/32")}
		}, Corefile, []string{"        zone ocp4.example.com\n        # The cluster's networks", "        reverse 192.0.2.0/24 2001:db8::/32\n    }\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := exampleFile(t)
			f.Role = ControlPlane
			tc.edit(&f)
			got := string(render(t, f)[tc.file].Data)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%s lacks %q:\n%s", tc.file, w, got)
				}
			}
		})
	}
}

// TestPodRuntimeSettings: what a real kubelet and containerd showed the
// pods need (issue 11): no pull at a restart (the registry may need the DNS
// the pod serves), the log as the termination message, host directories
// created when missing (nothing else creates the kubeconfig's), and
// keepalived allowed to lock its memory (vrrp_no_swap).
func TestPodRuntimeSettings(t *testing.T) {
	for _, role := range []string{ControlPlane, Worker, Bootstrap} {
		f := exampleFile(t)
		f.Role = role
		var pods int
		for name, file := range render(t, f) {
			if !strings.HasPrefix(name, ManifestDir+"/") {
				continue
			}
			p, err := DecodePod(file.Data)
			if err != nil {
				t.Fatalf("%s %s: %v", role, name, err)
			}
			pods++
			for _, c := range p.Spec.Containers {
				if c.ImagePullPolicy != corev1.PullIfNotPresent {
					t.Errorf("%s %s/%s: imagePullPolicy %q, want IfNotPresent", role, name, c.Name, c.ImagePullPolicy)
				}
				if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
					t.Errorf("%s %s/%s: terminationMessagePolicy %q", role, name, c.Name, c.TerminationMessagePolicy)
				}
				// kubelet restarts what hangs: every container has a liveness probe.
				if c.LivenessProbe == nil {
					t.Errorf("%s %s/%s: no liveness probe", role, name, c.Name)
				}
				if c.Name == "keepalived" && !slices.Contains(c.SecurityContext.Capabilities.Add, "IPC_LOCK") {
					t.Errorf("%s %s: keepalived lacks IPC_LOCK for vrrp_no_swap: %v", role, name, c.SecurityContext.Capabilities.Add)
				}
			}
			for _, v := range p.Spec.Volumes {
				if v.HostPath != nil && v.HostPath.Path == path.Dir(f.Kubeconfig) && (v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate) {
					t.Errorf("%s %s: the kubeconfig directory must be DirectoryOrCreate", role, name)
				}
			}
		}
		if pods == 0 {
			t.Errorf("%s: no pods rendered", role)
		}
	}
}

// TestLeastPrivilege: the pod that parses DNS and mDNS from the network
// runs as a user with no privilege but port 53 and sees neither the host's
// processes nor the files root's daemons read; what the configuration
// needs lives in the lbconfig pod.
func TestLeastPrivilege(t *testing.T) {
	for _, role := range []string{ControlPlane, Worker, Bootstrap} {
		f := exampleFile(t)
		f.Role = role
		got := render(t, f)
		pods := map[string]*corev1.Pod{}
		for _, name := range []string{"coredns", "lbconfig", "mdns-publisher"} {
			p, err := DecodePod(got[ManifestDir+"/infradns-"+name+".yaml"].Data)
			if err != nil {
				t.Fatalf("%s %s: %v", role, name, err)
			}
			pods[name] = p
		}
		for name, want := range map[string]struct {
			uid     int64
			caps    []corev1.Capability
			hostPID bool
		}{
			"coredns":        {65532, []corev1.Capability{"NET_BIND_SERVICE"}, false},
			"mdns-publisher": {65532, nil, false},
			"lbconfig":       {0, []corev1.Capability{"NET_RAW", "NET_ADMIN", "KILL", "NET_BIND_SERVICE"}, true},
		} {
			p := pods[name]
			sc := p.Spec.Containers[0].SecurityContext
			if sc.RunAsUser == nil || *sc.RunAsUser != want.uid || !slices.Equal(sc.Capabilities.Add, want.caps) || p.Spec.HostPID != want.hostPID {
				t.Errorf("%s %s: user %v, caps %v, hostPID %v; want %d, %v, %v", role, name, sc.RunAsUser, sc.Capabilities.Add, p.Spec.HostPID, want.uid, want.caps, want.hostPID)
			}
			if want.uid != 0 && (sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot) {
				t.Errorf("%s %s: runAsNonRoot not set", role, name)
			}
		}
		for _, m := range pods["coredns"].Spec.Containers[0].VolumeMounts {
			if m.MountPath == LBDir || m.MountPath == RunDir || !m.ReadOnly && m.MountPath != "/tmp" {
				t.Errorf("%s coredns mounts %s (read-only %v): the DNS pod writes nothing root reads", role, m.MountPath, m.ReadOnly)
			}
		}
	}
}

// TestIngressHealthURL: ingressHealthURL becomes lbconfig's ingress check
// (for ingress-nginx and others); without it lbconfig's default (OpenShift's
// router) applies and no line is written.
func TestIngressHealthURL(t *testing.T) {
	for _, tc := range []struct {
		url, want string
	}{
		{"http://127.0.0.1:10254/healthz", "        health-check ingress http://127.0.0.1:10254/healthz\n"},
		{"none", "        health-check ingress none\n"},
		{"", ""},
	} {
		f := exampleFile(t)
		f.Role = Worker
		f.IngressHealthURL = tc.url
		got := string(render(t, f)[LBCorefile].Data)
		if tc.want == "" && strings.Contains(got, "health-check ingress") || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("ingressHealthURL %q: lbconfig Corefile:\n%s", tc.url, got)
		}
	}
}

// TestStatusLeasesDefault: the status Leases are on, in "infradns", unless
// the file turns them off.
func TestStatusLeasesDefault(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*File)
		want string
	}{
		{"default", func(*File) {}, "        status-lease infradns\n"},
		{"another namespace", func(f *File) { f.StatusLease = "vip-status" }, "        status-lease vip-status\n"},
		{"off", func(f *File) { f.NoStatusLeases = true }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := exampleFile(t)
			f.Role = Worker
			tc.edit(&f)
			got := string(render(t, f)[LBCorefile].Data)
			if tc.want == "" && strings.Contains(got, "status-lease") || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("want %q in:\n%s", tc.want, got)
			}
		})
	}
}

// TestLBPools: lbpools runs in the control-plane nodes' lbconfig pods
// only, with lbconfig's kubeconfig (its identity: the host name, or the
// cluster file's node) and the default option when asked.
func TestLBPools(t *testing.T) {
	const block = "    lbpools {\n        kubeconfig /etc/kubernetes/infradns/kubeconfig\n"
	for _, tc := range []struct {
		role, value string
		want        string // "" for no lbpools
	}{
		{ControlPlane, "class", block + "    }\n}\n"},
		{ControlPlane, "default", block + "        default\n    }\n}\n"},
		{ControlPlane, "false", ""},
		{ControlPlane, "", ""},
		{Worker, "default", ""},
		{Bootstrap, "default", ""},
	} {
		t.Run(tc.role+" "+tc.value, func(t *testing.T) {
			f := exampleFile(t)
			f.Role, f.LBPools = tc.role, tc.value
			got := string(render(t, f)[LBCorefile].Data)
			if tc.want == "" && strings.Contains(got, "lbpools") || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("want %q in:\n%s", tc.want, got)
			}
		})
	}
	// In BGP mode the nodes announce the Services: lbpools says who does.
	for _, mode := range []string{"vrrp", "bgp"} {
		f := exampleFile(t)
		if mode == "bgp" {
			f = bgpFile(t, ControlPlane, "master-0")
		}
		f.Role, f.LBPools = ControlPlane, "default"
		got := string(render(t, f)[LBCorefile].Data)
		_, block, _ := strings.Cut(got, "lbpools {")
		if has := strings.Contains(block, "\n        announce\n"); has != (mode == "bgp") {
			t.Errorf("%s: announce in lbpools %v, want %v:\n%s", mode, has, mode == "bgp", got)
		}
	}
	f := exampleFile(t)
	f.Role, f.LBPools = ControlPlane, "yes"
	if _, err := f.Values(); err == nil || !strings.Contains(err.Error(), `lbPools: "yes": want class`) {
		t.Errorf("lbPools yes: %v, want an error naming the key and the values", err)
	}
}

// TestRunDirs: every pod mounts only the run directories it needs, each
// written by one daemon: keepalived its pid files (lbconfig reads them to
// signal it), haproxy its master socket (lbconfig connects to it), lbconfig
// the track files (keepalived reads them). No pod mounts /run/infradns
// itself: before, the haproxy pod (root) could write keepalived's pid file,
// which lbconfig signals, and the track files that move the VIPs.
func TestRunDirs(t *testing.T) {
	type mounts map[string]bool // path: read-only
	for _, tc := range []struct {
		name string
		file File
		want map[string]mounts // by pod
	}{
		{"control plane", withRole(exampleFile(t), ControlPlane), map[string]mounts{
			"keepalived": {KeepalivedRunDir: false, TrackDir: true},
			"haproxy":    {HAProxyRunDir: false},
			"lbconfig":   {TrackDir: false, KeepalivedRunDir: true, HAProxyRunDir: true},
		}},
		{"worker", withRole(exampleFile(t), Worker), map[string]mounts{
			"keepalived": {KeepalivedRunDir: false, TrackDir: true},
			"lbconfig":   {TrackDir: false, KeepalivedRunDir: true},
		}},
		{"bgp control plane", bgpFile(t, ControlPlane, "master-0"), map[string]mounts{
			"haproxy":  {HAProxyRunDir: false},
			"lbconfig": {TrackDir: false, HAProxyRunDir: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]mounts{}
			for name, ms := range hostMounts(t, render(t, tc.file)) {
				for _, m := range ms {
					if !strings.HasPrefix(m.path+"/", RunDir+"/") && !strings.HasPrefix(RunDir+"/", m.path+"/") {
						continue
					}
					pod := strings.TrimSuffix(name, ".yaml")
					if got[pod] == nil {
						got[pod] = mounts{}
					}
					got[pod][m.path] = m.readOnly
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("run directories mounted (path: read-only) %v\nwant %v", got, tc.want)
			}
		})
	}
}

func withRole(f File, role string) File {
	f.Role = role
	return f
}

// TestKubeconfigMount: the pods that read the API mount the kubeconfig's
// directory (infradns's own), read-only, and no pod mounts a directory that
// holds other credentials.
func TestKubeconfigMount(t *testing.T) {
	f := withRole(exampleFile(t), ControlPlane)
	f.Kubeconfig = "/var/lib/infradns/kubeconfig"
	for name, ms := range hostMounts(t, render(t, f)) {
		mounted := false
		for _, m := range ms {
			if strings.HasPrefix(m.path, "/etc/kubernetes") || strings.HasPrefix(m.path, "/var/lib/kubelet") {
				t.Errorf("%s mounts %s", name, m.path)
			}
			if m.path == "/var/lib/infradns" {
				mounted = true
				if !m.readOnly {
					t.Errorf("%s mounts the kubeconfig's directory read-write", name)
				}
			}
		}
		if want := name == "coredns.yaml" || name == "lbconfig.yaml"; mounted != want {
			t.Errorf("%s mounts the kubeconfig's directory: %v, want %v", name, mounted, want)
		}
	}
}

// hostMount is a host path a container mounts.
type hostMount struct {
	path     string
	readOnly bool
}

// hostMounts are the host paths each rendered static pod's containers
// mount, by the manifest's name without "infradns-" (coredns.yaml, ...).
func hostMounts(t *testing.T, files map[string]Output) map[string][]hostMount {
	t.Helper()
	out := map[string][]hostMount{}
	for p, o := range files {
		name, ok := strings.CutPrefix(p, ManifestDir+"/infradns-")
		if !ok {
			continue
		}
		pod, err := DecodePod(o.Data)
		if err != nil {
			t.Fatal(err)
		}
		vols := map[string]string{}
		for _, v := range pod.Spec.Volumes {
			if v.HostPath != nil {
				vols[v.Name] = v.HostPath.Path
			}
		}
		out[name] = []hostMount{}
		for _, c := range pod.Spec.Containers {
			for _, m := range c.VolumeMounts {
				if hp := vols[m.Name]; hp != "" {
					out[name] = append(out[name], hostMount{hp, m.ReadOnly})
				}
			}
		}
	}
	return out
}

// TestDNSKubeconfigMount: with dnsKubeconfig the DNS pod mounts its own
// kubeconfig's directory and reads that file, lbconfig its own: neither
// pod holds the other's credentials. Without it both use kubeconfig.
func TestDNSKubeconfigMount(t *testing.T) {
	const lbDir, dnsDir = "/etc/kubernetes/infradns", "/etc/kubernetes/infradns-dns"
	for _, tc := range []struct {
		name, dnsKubeconfig string
		role                string
		want                map[string]string // pod → the kubeconfig directory it mounts
		corefile            string            // mdnsnodes' kubeconfig line
	}{
		{"control plane, own DNS identity", dnsDir + "/kubeconfig", ControlPlane,
			map[string]string{"coredns.yaml": dnsDir, "lbconfig.yaml": lbDir}, "kubeconfig " + dnsDir + "/kubeconfig"},
		{"worker, own DNS identity", dnsDir + "/kubeconfig", Worker,
			map[string]string{"coredns.yaml": dnsDir, "lbconfig.yaml": lbDir}, "kubeconfig " + dnsDir + "/kubeconfig"},
		{"one identity (no dnsKubeconfig)", "", ControlPlane,
			map[string]string{"coredns.yaml": lbDir, "lbconfig.yaml": lbDir}, "kubeconfig " + lbDir + "/kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := withRole(exampleFile(t), tc.role)
			f.Kubeconfig = lbDir + "/kubeconfig"
			f.DNSKubeconfig = tc.dnsKubeconfig
			files := render(t, f)
			got := map[string]string{}
			for name, ms := range hostMounts(t, files) {
				for _, m := range ms {
					if !strings.HasPrefix(m.path, "/etc/kubernetes/") {
						continue
					}
					if got[name] != "" && got[name] != m.path {
						t.Errorf("%s mounts two kubeconfig directories: %s and %s", name, got[name], m.path)
					}
					got[name] = m.path
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("kubeconfig directories mounted %v, want %v", got, tc.want)
			}
			if c := string(files[Corefile].Data); !strings.Contains(c, tc.corefile+"\n") {
				t.Errorf("the DNS pod's Corefile has no %q:\n%s", tc.corefile, c)
			}
			if c := string(files[LBCorefile].Data); !strings.Contains(c, "kubeconfig "+lbDir+"/kubeconfig\n") || strings.Contains(c, dnsDir) {
				t.Errorf("lbconfig's Corefile does not read lbconfig's kubeconfig alone:\n%s", c)
			}
		})
	}
}
