//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/internal/nodecfg"
	"github.com/infradns/infradns/test/e2e/lab"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The boot lab: three control-plane nodes and a worker, set up from what
// `infradns render-node` writes and nothing else.
const (
	bootCluster = "bootlab"
	bootBound   = 60 * time.Second
	// bootSiteName is a name only the site's DNS server knows.
	bootSiteName = "www.example.org."
	bootSiteAddr = "203.0.113.80"
	// bootEdgeNode is a Node only the API knows: not on the lab's link, so
	// no mDNS from it (a routed or remote node).
	bootEdgeNode = "edge0"
	bootEdgeAddr = "203.0.113.7"
)

var (
	bootAPIVIP     = lab.Host4(120)
	bootIngressVIP = []netip.Addr{lab.Host4(121), lab.Host6(121)}
)

// bootImage maps the image's binaries (the Dockerfile copies make build's
// outputs to /usr/bin; keepalived, haproxy and sh come from Debian packages
// at the same paths as on this machine) to this build.
func bootImage(t *testing.T) map[string]string {
	m := map[string]string{}
	for _, b := range []string{"coredns", "infradns", "mdns-publisher"} {
		m["/usr/bin/"+b] = lab.Binary(t, b)
	}
	return m
}

type bootNode struct {
	n    *lab.Node
	role string
	root string // the node's "/" for everything infradns installs
	pods map[string]*corev1.Pod
	proc map[string]*lab.Process // by pod/container
}

// TestBootFromRenderedManifests installs the stack on a lab cluster the way
// an operator would: one cluster file, `infradns render-node` per node, the
// resolver dispatcher script run as NetworkManager would run it, and every
// container of every rendered static pod started with its own command and
// arguments (no kubelet: a private mount namespace per container gives it
// its hostPath volumes at their paths and the image's binaries). Then: the
// dig verification against every node, node names over mDNS before the API
// exists, the API VIP held by one control-plane node and serving, names
// outside the cluster forwarded to the upstream the dispatcher found; and
// once an API appears, a Node only the API knows resolves everywhere.
func TestBootFromRenderedManifests(t *testing.T) {
	for _, tool := range []string{"keepalived", "haproxy", "unshare", "dig", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (hack/install-deps.sh installs it): %v", tool, err)
		}
	}
	infradns := lab.Binary(t, "infradns")
	image := bootImage(t)
	fakeapi := vrrpBuildFakeAPI(t)

	l := lab.New(t, lab.Config{Prefix: "boot", Nodes: 4, Client: true, TeardownGrace: time.Second})
	site := startSiteDNS(t, l, image["/usr/bin/coredns"])

	var apiServers []string
	for _, n := range l.Nodes()[:3] {
		apiServers = append(apiServers, netip.AddrPortFrom(n.IPv4, vrrpAPIPort).String())
	}
	clusterFile := filepath.Join(t.TempDir(), "cluster.yaml")
	writeFile(t, clusterFile, fmt.Sprintf(`cluster: %s
domain: %s
apiVIPs: [%s]
ingressVIPs: [%s, %s]
interface: %s
image: quay.io/infradns/infradns:e2e
kubeconfig: /etc/kubernetes/infradns/kubeconfig
apiServers: [%s]
upstreams: [198.51.100.53]
`, bootCluster, domain, bootAPIVIP, bootIngressVIP[0], bootIngressVIP[1], lab.Iface, strings.Join(apiServers, ", ")))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	base := t.TempDir()
	var nodes []*bootNode
	for i, n := range l.Nodes() {
		bn := &bootNode{n: n, role: nodecfg.ControlPlane, root: filepath.Join(base, n.Name), proc: map[string]*lab.Process{}}
		if i == 3 {
			bn.role = nodecfg.Worker
		}
		nodes = append(nodes, bn)
		// Every role from the one cluster file: the worker ignores apiServers.
		out, err := exec.CommandContext(ctx, infradns, "render-node", "-f", clusterFile, "-role", bn.role, "-node", n.Name, "-o", bn.root).CombinedOutput()
		if err != nil {
			t.Fatalf("render-node for %s: %v\n%s", n.Name, err, out)
		}
		if i == 0 || i == 3 {
			t.Logf("render-node -role %s -node %s:\n%s", bn.role, n.Name, out)
		}
		bn.pods = readManifests(t, bn.root)
		// The operator's part: the directory of the kubeconfig (it arrives
		// with the API, later).
		if err := os.MkdirAll(filepath.Join(bn.root, "etc/kubernetes/infradns"), 0o755); err != nil {
			t.Fatal(err)
		}
		runDispatcher(ctx, t, bn, site.IPv4)
	}

	// The apiservers haproxy balances (kube-apiserver's static pods).
	for _, n := range l.Nodes()[:3] {
		n.Start("fakeapi", []string{fakeapi, "serve", "-name", n.Name, "-listen", netip.AddrPortFrom(n.IPv4, vrrpAPIPort).String()})
	}
	began := time.Now()
	for _, bn := range nodes {
		for _, name := range slices.Sorted(maps.Keys(bn.pods)) {
			startPod(t, bn, name, image)
		}
	}

	// Every node's CoreDNS answers for the cluster domain: an unknown name
	// is NXDOMAIN once mdnsnodes has listened to the link (SERVFAIL before).
	// lbconfig runs in its own pod; on the worker it has nothing to render
	// from until the API exists: its /ready is checked below, once it does.
	for _, bn := range nodes {
		lab.Eventually(t, bootBound, 100*time.Millisecond, "coredns answers on "+bn.n.Name, func() error {
			if p := bn.proc["infradns-coredns/coredns"]; p.Exited() {
				return fmt.Errorf("coredns exited: %v\n%s", p.Err(), lab.Tail(p.LogPath, 20))
			}
			res, err := bn.n.Dig(ctx, "@"+bn.n.IPv4.String(), "no-such-node."+domain, "A")
			if err != nil {
				return err
			}
			if !strings.Contains(res.Stdout, "status: NXDOMAIN") {
				return fmt.Errorf("not NXDOMAIN yet:\n%s", res.Stdout)
			}
			return nil
		})
	}
	t.Logf("every CoreDNS answers %v after the pods started", time.Since(began).Round(time.Millisecond))

	// Node names over mDNS, before any API exists: every node hears every
	// node (its metric, so that no name is asked, and its NXDOMAIN cached,
	// before it was announced), then every node resolves every node.
	for _, bn := range nodes {
		bootWaitMetric(ctx, t, bn, "mdns", len(nodes))
	}
	t.Logf("every node's mdnsnodes hears all %d nodes %v after the pods started", len(nodes), time.Since(began).Round(time.Millisecond))
	for _, from := range nodes {
		for _, to := range nodes {
			bootWaitA(ctx, t, from, to.n.Name+"."+domain, to.n.IPv4.String())
		}
	}

	api := bootAPIVIP.String()
	ingress := bootIngressVIP[0].String() + "," + bootIngressVIP[1].String()
	for _, bn := range nodes {
		v := runVerify(ctx, t, l.Client(), bn.n.IPv4, 53, api, ingress)
		if v.exit != 0 || v.failed != 0 || v.passed != checksPerRun {
			t.Fatalf("verify-dns.sh against %s (%s): exit %d, %d passed, %d failed:\n%s", bn.n.Name, bn.role, v.exit, v.passed, v.failed, v.out)
		}
	}
	t.Logf("verify-dns.sh: %d of %d checks passed against each of the %d nodes", checksPerRun, checksPerRun, len(nodes))

	// Names outside the cluster: to the upstream the dispatcher wrote, not
	// the one render-node seeded.
	for _, bn := range nodes {
		bootWaitA(ctx, t, bn, bootSiteName, bootSiteAddr)
	}

	// The API VIP: one control-plane holder, and haproxy behind it serving.
	var labNodes []*lab.Node
	for _, bn := range nodes {
		labNodes = append(labNodes, bn.n)
	}
	holder := nodes[waitOneHolder(t, labNodes, bootAPIVIP)]
	if holder.role != nodecfg.ControlPlane {
		t.Fatalf("%s (%s) holds the API VIP", holder.n.Name, holder.role)
	}
	url := fmt.Sprintf("https://%s/readyz", netip.AddrPortFrom(bootAPIVIP, vrrpLBPort))
	lab.Eventually(t, bootBound, 200*time.Millisecond, "the API VIP serves", func() error {
		res, err := l.Client().Run(ctx, "curl", "-fsSk", "-m", "2", url)
		if err != nil {
			return err
		}
		if res.Stdout == "" {
			return fmt.Errorf("empty answer")
		}
		return nil
	})
	t.Logf("API VIP %s on %s, served through haproxy %v after the pods started", bootAPIVIP, holder.n.Name, time.Since(began).Round(time.Millisecond))

	// The API arrives: Nodes (one of them off the link) and the apiservers.
	kube := bootStartKube(t, l)
	kubeconfig, err := os.ReadFile(kube.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	for _, bn := range nodes {
		writeFile(t, filepath.Join(bn.root, "etc/kubernetes/infradns/kubeconfig"), string(kubeconfig))
	}
	// Asked before the API listed it, edge0's NXDOMAIN would sit in
	// CoreDNS's cache for up to 30 s: wait for mdnsnodes to have the API's
	// Nodes (its metric) before asking.
	for _, bn := range nodes {
		bootWaitMetric(ctx, t, bn, "api", len(nodes)+1)
	}
	t.Logf("the API's %d Nodes in every node's mdnsnodes %v after the kubeconfig appeared", len(nodes)+1, time.Since(written).Round(time.Millisecond))
	for _, bn := range nodes {
		bootWaitA(ctx, t, bn, bootEdgeNode+"."+domain, bootEdgeAddr)
	}
	t.Logf("%s (API only) resolves on every node %v after the kubeconfig appeared", bootEdgeNode, time.Since(written).Round(time.Millisecond))
	// Every CoreDNS and every lbconfig ready for kubelet, the worker's
	// lbconfig included (its probe is on loopback).
	for _, bn := range nodes {
		for _, ready := range []string{"http://127.0.0.1:18181/ready", "http://127.0.0.1:18183/ready"} {
			lab.Eventually(t, bootBound, 200*time.Millisecond, ready+" on "+bn.n.Name, func() error {
				_, err := bn.n.HTTPGet(ctx, ready)
				return err
			})
		}
	}
	// The mDNS names stay, now from both sources.
	for _, bn := range nodes {
		bootWaitA(ctx, t, bn, nodes[0].n.Name+"."+domain, nodes[0].n.IPv4.String())
	}
	// Every long-running container is still up.
	for _, bn := range nodes {
		for name, p := range bn.proc {
			if p.Exited() {
				t.Errorf("%s on %s exited: %v\n%s", name, bn.n.Name, p.Err(), lab.Tail(p.LogPath, 20))
			}
		}
	}

	// Last, as it renumbers a node: the API VIP's holder gets a new address
	// (DHCP hands out another: NetworkManager adds it, then deletes the old
	// one), so `ip` lists keepalived's VIP, added before it, first. The
	// dispatcher, run again as NetworkManager does then, must name the
	// node's new address, and the VIP once (it named the VIP twice).
	holder = nodes[waitOneHolder(t, labNodes, bootAPIVIP)]
	if err := holder.n.ReplaceAddr(netip.PrefixFrom(holder.n.IPv4, 24), netip.PrefixFrom(lab.Host4(150), 24)); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, bootBound, 100*time.Millisecond, holder.n.Name+" lists the VIP before its new address", func() error {
		addrs, err := holder.n.Addrs()
		if err != nil {
			return err
		}
		for _, p := range addrs {
			switch p.Addr() {
			case bootAPIVIP:
				return nil
			case holder.n.IPv4:
				return fmt.Errorf("addresses %v", addrs)
			}
		}
		return fmt.Errorf("addresses %v", addrs)
	})
	runDispatcher(ctx, t, holder, site.IPv4)
	t.Logf("%s renumbered to %s while holding %s: resolv.conf names it first, the VIP once", holder.n.Name, holder.n.IPv4, bootAPIVIP)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readManifests decodes every manifest render-node wrote, strictly.
func readManifests(t *testing.T, root string) map[string]*corev1.Pod {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, nodecfg.ManifestDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests under %s: %v", root, err)
	}
	pods := map[string]*corev1.Pod{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := nodecfg.DecodePod(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		pods[p.Name] = p
	}
	return pods
}

// runDispatcher runs the dispatcher script render-node installed, in the
// node's namespace, as NetworkManager runs it when the link comes up. Its
// source lists what a careless resolver setup would: systemd-resolved's
// stub, the node itself and the real site server.
func runDispatcher(ctx context.Context, t *testing.T, bn *bootNode, site netip.Addr) {
	t.Helper()
	src := filepath.Join(bn.root, "run/NetworkManager/resolv.conf")
	writeFile(t, src, fmt.Sprintf("search example.org\nnameserver 127.0.0.53\nnameserver %s\nnameserver %s\n", bn.n.IPv4, site))
	r := func(p string) string { return filepath.Join(bn.root, p) }
	res, err := bn.n.Run(ctx, "env",
		"INFRADNS_RESOLV_ENV="+r(nodecfg.ResolvEnv),
		"INFRADNS_RESOLV_CONF="+r("/etc/resolv.conf"),
		"INFRADNS_FORWARD_CONF="+r(nodecfg.ForwardConf),
		"INFRADNS_UPSTREAM_SOURCES="+src,
		"bash", r(nodecfg.DispatcherPath), lab.Iface, "up")
	if err != nil {
		t.Fatalf("dispatcher on %s: %v\n%s%s", bn.n.Name, err, res.Stdout, res.Stderr)
	}
	resolv, err := os.ReadFile(r("/etc/resolv.conf"))
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	for _, line := range strings.Split(string(resolv), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" {
			ns = append(ns, f[1])
		}
	}
	if len(ns) == 0 || ns[0] != bn.n.IPv4.String() || slices.Contains(ns, "127.0.0.53") || len(slices.Compact(slices.Sorted(slices.Values(ns)))) != len(ns) {
		t.Fatalf("%s: resolv.conf nameservers %v, want %s first, each once, and no 127.0.0.53:\n%s", bn.n.Name, ns, bn.n.IPv4, resolv)
	}
	fwd, err := os.ReadFile(r(nodecfg.ForwardConf))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, line := range strings.Split(string(fwd), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	if want := "forward . " + site.String(); len(lines) != 1 || lines[0] != want {
		t.Fatalf("%s: forward.conf says %q, want %q (no loop to the node or the stub):\n%s", bn.n.Name, lines, want, fwd)
	}
}

// startPod does what kubelet does with a static pod, minus the container
// runtime: the hostPath volumes are created (DirectoryOrCreate) or must
// exist (Directory), and each container runs its command and arguments in
// the node's namespaces with a private mount namespace where the volumes
// are bind mounts of the node root's directories at their paths, emptyDirs
// are tmpfs, and the image's binaries are this build's (overlays on /etc,
// /run and /usr/bin let the mount points exist without touching the host).
func startPod(t *testing.T, bn *bootNode, name string, image map[string]string) {
	t.Helper()
	pod := bn.pods[name]
	if len(pod.Spec.InitContainers) > 0 {
		t.Fatalf("%s: init containers are not emulated", name)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		vols[v.Name] = v
		if hp := v.HostPath; hp != nil {
			dir := filepath.Join(bn.root, hp.Path)
			switch *hp.Type {
			case corev1.HostPathDirectoryOrCreate:
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			case corev1.HostPathDirectory:
				if st, err := os.Stat(dir); err != nil || !st.IsDir() {
					t.Fatalf("%s: volume %s: hostPath %s is not a directory on %s (kubelet would not start the pod): %v", name, v.Name, hp.Path, bn.n.Name, err)
				}
			default:
				t.Fatalf("%s: volume %s: hostPath type %s is not emulated", name, v.Name, *hp.Type)
			}
		}
	}
	for _, c := range pod.Spec.Containers {
		// Sources first: the binaries and the node root live under /tmp on
		// most machines, which an emptyDir at /tmp would hide. Then the
		// hostPath volumes, parents before what is mounted inside them, and
		// the emptyDirs last.
		var script []string
		for _, dst := range slices.Sorted(maps.Keys(image)) {
			script = append(script, fmt.Sprintf("touch %q && mount --bind %q %q", dst, image[dst], dst))
		}
		mounts := slices.Clone(c.VolumeMounts)
		slices.SortStableFunc(mounts, func(a, b corev1.VolumeMount) int {
			ea, eb := vols[a.Name].EmptyDir != nil, vols[b.Name].EmptyDir != nil
			if ea != eb {
				if ea {
					return 1
				}
				return -1
			}
			return len(a.MountPath) - len(b.MountPath)
		})
		for _, m := range mounts {
			v := vols[m.Name]
			switch {
			case v.HostPath != nil:
				script = append(script, fmt.Sprintf("mkdir -p %q && mount --bind %q %q", m.MountPath, filepath.Join(bn.root, v.HostPath.Path), m.MountPath))
				if m.ReadOnly {
					script = append(script, fmt.Sprintf("mount -o remount,bind,ro %q", m.MountPath))
				}
			case v.EmptyDir != nil:
				for _, o := range c.VolumeMounts {
					if vols[o.Name].HostPath != nil && strings.HasPrefix(o.MountPath+"/", m.MountPath+"/") {
						t.Fatalf("%s: hostPath %s inside emptyDir %s is not emulated", name, o.MountPath, m.MountPath)
					}
				}
				script = append(script, fmt.Sprintf("mkdir -p %q && mount -t tmpfs emptydir %q", m.MountPath, m.MountPath))
			default:
				t.Fatalf("%s: volume %s is neither hostPath nor emptyDir", name, m.Name)
			}
		}
		scratch := filepath.Join(t.TempDir(), "mnt")
		if err := os.MkdirAll(scratch, 0o755); err != nil {
			t.Fatal(err)
		}
		wrapper := `set -e
s=$1; shift
mount -t tmpfs pod "$s"
for d in /etc /run /usr/bin; do
  mkdir -p "$s/u$d" "$s/w$d"
  mount -t overlay overlay -o "lowerdir=$d,upperdir=$s/u$d,workdir=$s/w$d" "$d"
done
` + strings.Join(script, "\n") + `
exec "$@"
`
		argv := append([]string{"unshare", "--mount", "--propagation", "private", "--", "sh", "-c", wrapper, "sh", scratch},
			append(slices.Clone(c.Command), c.Args...)...)
		var env []string
		for _, e := range c.Env {
			env = append(env, e.Name+"="+e.Value)
		}
		// A container starts in its image's working directory, "/" here
		// (the test's own may be under a /tmp the emptyDir hides).
		dir := c.WorkingDir
		if dir == "" {
			dir = "/"
		}
		bn.proc[name+"/"+c.Name] = bn.n.Start(name+"-"+c.Name, argv, lab.WithEnv(env...), lab.WithDir(dir))
	}
}

// bootWaitMetric waits until n nodes are known to bn's mdnsnodes from
// source (mdns or api).
func bootWaitMetric(ctx context.Context, t *testing.T, bn *bootNode, source string, n int) {
	t.Helper()
	want := fmt.Sprintf(`coredns_mdnsnodes_source_nodes{source="%s",zones="%s."} %d`, source, domain, n)
	lab.Eventually(t, bootBound, 100*time.Millisecond, bn.n.Name+": "+want, func() error {
		body, err := bn.n.HTTPGet(ctx, "http://127.0.0.1:9153/metrics")
		if err != nil {
			return err
		}
		if !strings.Contains(body, want) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
}

// startSiteDNS starts the site's DNS server on a lab client: coredns
// (the binary given) knowing only bootSiteName.
func startSiteDNS(t *testing.T, l *lab.Lab, coredns string) *lab.Node {
	t.Helper()
	site := l.AddClient("sitedns")
	conf := filepath.Join(t.TempDir(), "Corefile")
	writeFile(t, conf, fmt.Sprintf(".:53 {\n    hosts {\n        %s %s\n    }\n}\n", bootSiteAddr, bootSiteName))
	site.Start("coredns", []string{coredns, "-conf", conf})
	return site
}

// bootWaitA waits until from's CoreDNS answers qname with exactly addr.
func bootWaitA(ctx context.Context, t *testing.T, from *bootNode, qname, addr string) {
	t.Helper()
	waitA(ctx, t, from.n, qname, addr)
}

// waitOneHolder waits until exactly one of nodes holds vip and returns its
// index.
func waitOneHolder(t *testing.T, nodes []*lab.Node, vip netip.Addr) int {
	t.Helper()
	holder := -1
	lab.Eventually(t, bootBound, 100*time.Millisecond, "one node holds "+vip.String(), func() error {
		var hs []string
		for i, n := range nodes {
			has, err := n.HasAddr(vip)
			if err != nil {
				return err
			}
			if has {
				hs = append(hs, n.Name)
				holder = i
			}
		}
		if len(hs) != 1 {
			return fmt.Errorf("holders %v", hs)
		}
		return nil
	})
	return holder
}

// waitA waits until n's CoreDNS (on its address) answers qname with exactly
// addr.
func waitA(ctx context.Context, t *testing.T, n *lab.Node, qname, addr string) {
	t.Helper()
	lab.Eventually(t, bootBound, 100*time.Millisecond, fmt.Sprintf("%s answers %s A %s", n.Name, qname, addr), func() error {
		res, err := n.Dig(ctx, "@"+n.IPv4.String(), qname, "A", "+short")
		if err != nil {
			return err
		}
		if got := strings.Fields(res.Stdout); len(got) != 1 || got[0] != addr {
			return fmt.Errorf("answer %q", res.Stdout)
		}
		return nil
	})
}

// bootStartKube is the cluster's API arriving: a real kube-apiserver in a
// namespace of its own with the lab's Nodes (the worker without the
// control-plane role) and one Node off the link, and the default/kubernetes
// EndpointSlice listing the control-plane apiservers.
func bootStartKube(t *testing.T, l *lab.Lab) *kubetest.Cluster {
	t.Helper()
	c := startLabKube(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, n := range l.Nodes() {
		node := controlPlaneNode(n.Name, n.IPv4.String())
		if i == 3 {
			node.Labels = map[string]string{"node-role.kubernetes.io/worker": ""}
		}
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create Node %s: %v", n.Name, err)
		}
	}
	edge := controlPlaneNode(bootEdgeNode, bootEdgeAddr)
	edge.Labels = nil
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, edge, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Node %s: %v", bootEdgeNode, err)
	}
	if _, err := c.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, vrrpAPISlice(l, []int{0, 1, 2}), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the default/kubernetes EndpointSlice: %v", err)
	}
	return c
}
