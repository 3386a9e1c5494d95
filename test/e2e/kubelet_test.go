//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infradns/infradns/deploy/image"
	infrakube "github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/internal/nodecfg"
	"github.com/infradns/infradns/internal/vrrp"
	"github.com/infradns/infradns/test/e2e/lab"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The real-kubelet lab: each node runs its own containerd and kubelet, which
// run the static pods exactly as `infradns render-node` wrote them, from the
// image `make image-oci` builds (no registry anywhere).
const (
	klCluster = "kllab"
	klImage   = "quay.io/infradns/infradns:e2e"
	klPause   = "registry.k8s.io/pause:3.10"
	klBound   = 90 * time.Second
)

var klAPIVIP = lab.Host4(130)

// klNode is one lab node with a private mount namespace (overlays on /etc
// and /var/lib, tmpfs on /run and /var/log), so render-node, containerd and
// kubelet use their real paths without touching the host's.
type klNode struct {
	n          *lab.Node
	dir        string       // on the host: containerd's root, configs
	holder     *lab.Process // keeps the mount namespace
	containerd *lab.Process
	kubelet    *lab.Process
	kubeletBin string
}

// klHolder mounts the node's private file system tree (an overlay on each
// directory it is given, tmpfs on /run and /var/log), then sleeps.
const klHolder = `set -e
d=$1
shift
mount -t tmpfs node "$d"
for p in "$@"; do
  mkdir -p "$d/u$p" "$d/w$p"
  mount -t overlay overlay -o "lowerdir=$p,upperdir=$d/u$p,workdir=$d/w$p" "$p"
done
mount -t tmpfs run /run
mount -t tmpfs log /var/log
exec sleep infinity
`

// startKLNode gives lab node n its private tree (klHolder, overlays on
// overlays), its host-side files in dir, and waits until it is mounted.
func startKLNode(ctx context.Context, t *testing.T, n *lab.Node, dir string, overlays ...string) *klNode {
	t.Helper()
	k := &klNode{n: n, dir: dir}
	if err := os.MkdirAll(filepath.Join(dir, "ovl"), 0o755); err != nil {
		t.Fatal(err)
	}
	k.holder = n.Start("holder", append([]string{"unshare", "--mount", "--propagation", "private", "--", "sh", "-c", klHolder, "sh", filepath.Join(dir, "ovl")}, overlays...), lab.WithHostSys())
	lab.Eventually(t, 10*time.Second, 50*time.Millisecond, n.Name+"'s mounts", func() error {
		_, err := k.run(ctx, "mountpoint", "-q", "/var/log") // the holder's last mount
		return err
	})
	return k
}

// klPodLogsOnFailure logs the tail of every container log of nodes when
// the test has failed, before the lab's teardown.
func klPodLogsOnFailure(t *testing.T, nodes *[]*klNode) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var logs []string
		for _, k := range *nodes {
			l, _ := filepath.Glob(k.path("/var/log/pods/*/*/*.log"))
			logs = append(logs, l...)
		}
		lab.Keep(t, "pod logs", logs...)
	})
}

// klImport imports images(k) into each node's containerd, all nodes at
// once, once the containerd answers.
func klImport(ctx context.Context, t *testing.T, nodes []*klNode, images func(*klNode) []string) {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, k := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = lab.Poll(ctx, 20*time.Second, 100*time.Millisecond, func() error { _, err := k.ctr(ctx, "version"); return err })
			for _, img := range images(k) {
				if errs[i] == nil {
					_, errs[i] = k.ctr(ctx, "images", "import", img)
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("images imported into %d containerds in %v", len(nodes), time.Since(start).Round(100*time.Millisecond))
}

func (k *klNode) enter(argv ...string) []string {
	pid := k.holder.Pid()
	return append([]string{"nsenter", fmt.Sprintf("--mount=/proc/%d/ns/mnt", pid), fmt.Sprintf("--uts=/proc/%d/ns/uts", pid),
		"--net=/run/netns/" + k.n.NS, "--"}, argv...)
}

// run runs argv in the node's namespaces and returns its output.
func (k *klNode) run(ctx context.Context, argv ...string) (string, error) {
	args := k.enter(argv...)
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s on %s: %w\n%s", strings.Join(argv, " "), k.n.Name, err, out)
	}
	return string(out), nil
}

// path is p as the node sees it, reachable from the host.
func (k *klNode) path(p string) string { return fmt.Sprintf("/proc/%d/root%s", k.holder.Pid(), p) }

func (k *klNode) start(t *testing.T, name string, argv ...string) *lab.Process {
	t.Helper()
	pid := k.holder.Pid()
	return k.n.Start(name, append([]string{"nsenter", fmt.Sprintf("--mount=/proc/%d/ns/mnt", pid), "--"}, argv...), lab.WithHostSys())
}

func (k *klNode) ctr(ctx context.Context, args ...string) (string, error) {
	return k.run(ctx, append([]string{"ctr", "-a", "/run/containerd/containerd.sock", "-n", "k8s.io"}, args...)...)
}

// klContainerdConfig: its own root on the host's disk (overlayfs snapshots
// cannot sit on the node's overlay), the rest at the default paths inside the
// node. restrict_oom_score_adj: this sandbox withholds CAP_SYS_RESOURCE,
// without it runc fails to start the pause container.
const klContainerdConfig = `version = 2
root = "%[1]s/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[2]s"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "%[1]s/cni/bin"
    conf_dir = "%[1]s/cni/net.d"
`

// klKubeletConfig: standalone (static pods only), cgroup v1 allowed (this
// host), node allocatable not enforced, frequencies short for a test.
const klKubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /etc/kubernetes/manifests
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
imageServiceEndpoint: unix:///run/containerd/containerd.sock
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
readOnlyPort: 0
address: 127.0.0.1
healthzBindAddress: 127.0.0.1
enforceNodeAllocatable: []
cgroupsPerQOS: false
localStorageCapacityIsolation: false
volumePluginDir: %[1]s/volume-plugins
fileCheckFrequency: 1s
syncFrequency: 2s
nodeStatusUpdateFrequency: 2s
resolvConf: /etc/resolv.conf
`

// klImages builds the infradns image from the Dockerfile (make image-oci's
// code, its Debian layer cached) and a pause image named pauseName on the
// same Debian layer.
func klImages(t *testing.T, pauseName string) (infradns, pause string) {
	t.Helper()
	root, err := lab.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logger := testLogger(t)
	start := time.Now()
	infradns = filepath.Join(dir, "infradns.oci.tar")
	if err := image.Build(image.BuildOptions{Dockerfile: filepath.Join(root, "Dockerfile"), Bin: filepath.Join(root, "bin"),
		Version: "e2e", Name: klImage, Out: infradns, Cache: image.DefaultCache(), Log: logger}); err != nil {
		t.Fatalf("image-oci: %v", err)
	}
	f, err := image.ReadFinal(mustRead(t, filepath.Join(root, "Dockerfile")), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, deb, err := image.Platform(runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	base, err := image.DebianLayer(logger, image.DefaultCache(), strings.TrimSuffix(strings.TrimPrefix(f.Base, "debian:"), "-slim"), deb, f.Packages)
	if err != nil {
		t.Fatal(err)
	}
	pause = filepath.Join(dir, "pause.oci.tar")
	w, err := os.Create(pause)
	if err != nil {
		t.Fatal(err)
	}
	err = image.WriteLayout(w, pauseName, image.Final{User: "65535:65535", Entrypoint: []string{"/bin/sleep", "infinity"}},
		[]image.Layer{{File: base, Comment: "pause: sleep"}}, time.Now())
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("images built in %v", time.Since(start).Round(100*time.Millisecond))
	return infradns, pause
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testLogger(t *testing.T) *log.Logger { return log.New(testWriter{t}, "", 0) }

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// klPod is what kubelet's /pods says of one static pod.
type klPod struct {
	Name     string
	Ready    bool
	Restarts map[string]int32  // by container
	IDs      map[string]string // container IDs
	Images   map[string]string // the spec's image, by container
}

// pods asks the node's kubelet for its pods and their status (standalone
// kubelet: the status manager's, through /pods).
func (k *klNode) pods(ctx context.Context) (map[string]klPod, error) {
	var list corev1.PodList
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: k.n.DialContext,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:10250/pods", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kubelet /pods: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	out := map[string]klPod{}
	for _, p := range list.Items {
		kp := klPod{Name: p.Name, Restarts: map[string]int32{}, IDs: map[string]string{}, Images: map[string]string{}}
		for _, c := range p.Spec.Containers {
			kp.Images[c.Name] = c.Image
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				kp.Ready = c.Status == corev1.ConditionTrue
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			kp.Restarts[cs.Name] = cs.RestartCount
			kp.IDs[cs.Name] = cs.ContainerID
		}
		out[strings.TrimSuffix(p.Name, "-"+k.n.Name)] = kp
	}
	return out, nil
}

// waitReady waits until every pod in want is Ready on k.
func (k *klNode) waitReady(ctx context.Context, t *testing.T, want []string) map[string]klPod {
	t.Helper()
	var got map[string]klPod
	lab.Eventually(t, klBound, 250*time.Millisecond, "every pod Ready on "+k.n.Name, func() error {
		if k.kubelet.Exited() {
			return fmt.Errorf("kubelet exited: %v\n%s", k.kubelet.Err(), lab.Tail(k.kubelet.LogPath, 30))
		}
		var err error
		if got, err = k.pods(ctx); err != nil {
			return err
		}
		var notReady []string
		for _, name := range want {
			if p, ok := got[name]; !ok || !p.Ready {
				notReady = append(notReady, name)
			}
		}
		if len(notReady) > 0 {
			return fmt.Errorf("not Ready: %v (of %d pods)", notReady, len(got))
		}
		return nil
	})
	return got
}

// TestKubeletStaticPods runs the rendered static pods under a real kubelet
// and containerd on three control-plane nodes, with their real security
// contexts, probes and restart policy, from the image built from the
// Dockerfile without a registry, against a real kube-apiserver.
func TestKubeletStaticPods(t *testing.T) {
	// Beside the kube-apiserver outage tests: nothing here is timed tightly.
	kubeParallel(t)
	klOneAtATime(t)
	l, site, kube := klNewLab(t, lab.Config{Prefix: "kl", Nodes: 3, Client: true, TeardownGrace: 2 * time.Second})
	apiHostPort := strings.TrimPrefix(kube.URL, "https://")
	apiAddr := netip.MustParseAddrPort(apiHostPort)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	clusterYAML := func(image string) string {
		return klClusterFile(klAPIVIP, lab.Host4(131), image, apiHostPort) + "lbServiceNames: true\nlbPools: default\n"
	}
	clusterFile := filepath.Join(t.TempDir(), "cluster.yaml")
	writeFile(t, clusterFile, clusterYAML(klImage))

	nodes, podNames := klInstallNodes(ctx, t, l, kube, site, clusterFile, nodecfg.ControlPlane)

	// What the pods serve.
	api, ingress := klAPIVIP.String(), lab.Host4(131).String()
	for _, k := range nodes {
		v := runVerify(ctx, t, l.Client(), k.n.IPv4, 53, api, ingress)
		if v.exit != 0 || v.failed != 0 || v.passed != checksPerRun {
			t.Fatalf("verify-dns.sh against %s: exit %d, %d passed, %d failed:\n%s", k.n.Name, v.exit, v.passed, v.failed, v.out)
		}
	}
	t.Logf("verify-dns.sh: %d of %d checks passed against each node", checksPerRun, checksPerRun)
	for _, from := range nodes {
		for _, to := range nodes {
			waitA(ctx, t, from.n, to.n.Name+"."+domain, to.n.IPv4.String())
		}
		waitA(ctx, t, from.n, bootSiteName, bootSiteAddr)
	}
	// lbPools and lbServiceNames: a Service of type LoadBalancer gets an
	// address from the control-plane nodes' lbpools and a name on every
	// node's DNS pod.
	klServiceName(ctx, t, kube, nodes)
	holder := klOneHolder(ctx, t, nodes, kube)
	t.Logf("API VIP on %s, the real kube-apiserver served through haproxy", holder.n.Name)
	klVIPAnswers(ctx, t, l.Client(), holder, false)

	// No container restarted on the way up (a crash loop that ends Ready
	// would hide here).
	for _, k := range nodes {
		ps, err := k.pods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for name, p := range ps {
			for c, n := range p.Restarts {
				if n != 0 {
					t.Errorf("%s: %s/%s restarted %d times", k.n.Name, name, c, n)
				}
			}
		}
	}

	// lbconfig's hand-over relay runs the image's nft with the pod's
	// capabilities: its tables are in every node's network namespace.
	for _, k := range nodes {
		lab.Eventually(t, 10*time.Second, 100*time.Millisecond, k.n.Name+": the hand-over relay's tables", func() error {
			out, err := exec.Command("ip", "netns", "exec", k.n.NS, "nft", "list", "tables").CombinedOutput()
			if err != nil {
				return fmt.Errorf("nft list tables: %v: %s", err, out)
			}
			for _, fam := range []string{"ip", "ip6"} {
				if !slices.Contains(strings.Split(string(out), "\n"), "table "+fam+" "+vrrp.RelayTable) {
					return fmt.Errorf("no %s table %s in:\n%s", fam, vrrp.RelayTable, out)
				}
			}
			return nil
		})
	}

	// lbconfig follows the API and reloads haproxy in another container: a
	// second apiserver address appears in every node's haproxy.cfg, and
	// lbconfig counts a successful reload of it.
	reloads := map[*klNode]float64{}
	for _, k := range nodes {
		reloads[k] = klHAProxyReloads(ctx, t, k, "success")
	}
	extra := lab.Host4(140).String()
	if _, err := kube.Client.DiscoveryV1().EndpointSlices("default").Create(ctx,
		apiServerSlice("kubernetes-extra", int32(apiAddr.Port()), extra), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	for _, k := range nodes {
		cfgs := []string{k.path(nodecfg.LBDir + "/haproxy.cfg")}
		lab.Eventually(t, 30*time.Second, 100*time.Millisecond, k.n.Name+": haproxy.cfg lists "+extra, func() error {
			for _, c := range cfgs {
				if strings.Contains(string(mustRead(t, c)), extra+":") {
					return nil
				}
			}
			return fmt.Errorf("not in %v", cfgs)
		})
	}
	for _, k := range nodes {
		lab.Eventually(t, 10*time.Second, 100*time.Millisecond, k.n.Name+": haproxy reloaded", func() error {
			if n := klHAProxyReloads(ctx, t, k, "success"); n <= reloads[k] {
				return fmt.Errorf("%v successful reloads, %v before", n, reloads[k])
			}
			return nil
		})
		if n := klHAProxyReloads(ctx, t, k, "failure"); n != 0 {
			t.Errorf("%s: %v failed haproxy reloads", k.n.Name, n)
		}
	}
	t.Logf("a new apiserver in every haproxy.cfg, haproxy reloaded by lbconfig from its own container, %v after the EndpointSlice", time.Since(changed).Round(time.Millisecond))
	klOneHolder(ctx, t, nodes, kube)

	// A container killed through the runtime: kubelet restarts it and the
	// node recovers (keepalived's stale pid files, the VIP).
	before := holder.waitReady(ctx, t, podNames)
	kid := strings.TrimPrefix(before["infradns-keepalived"].IDs["keepalived"], "containerd://")
	if _, err := holder.ctr(ctx, "tasks", "kill", "-s", "SIGKILL", kid); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	lab.Eventually(t, klBound, 250*time.Millisecond, "keepalived restarted on "+holder.n.Name, func() error {
		p, err := holder.pods(ctx)
		if err != nil {
			return err
		}
		if k := p["infradns-keepalived"]; k.Restarts["keepalived"] <= before["infradns-keepalived"].Restarts["keepalived"] || !k.Ready {
			return fmt.Errorf("restarts %d, ready %v", k.Restarts["keepalived"], k.Ready)
		}
		return nil
	})
	t.Logf("keepalived SIGKILLed on %s: restarted by kubelet and Ready %v later", holder.n.Name, time.Since(killed).Round(time.Millisecond))
	// When the VIP moved, it came to the new holder long after its
	// resolver started.
	now := klOneHolder(ctx, t, nodes, kube)
	klVIPAnswers(ctx, t, l.Client(), now, now != holder)

	// kubelet restarted: the pods are kept, not restarted.
	k0 := nodes[0]
	before = k0.waitReady(ctx, t, podNames)
	if err := k0.kubelet.Stop(5 * time.Second); err != nil && !k0.kubelet.Exited() {
		t.Fatal(err)
	}
	k0.startKubelet(t)
	after := k0.waitReady(ctx, t, podNames)
	for name, p := range before {
		for c, id := range p.IDs {
			if after[name].IDs[c] != id {
				t.Errorf("%s/%s: container %s after kubelet's restart, was %s", name, c, after[name].IDs[c], id)
			}
		}
	}
	t.Logf("kubelet restarted on %s: all %d pods kept their containers", k0.n.Name, len(before))
	for _, k := range nodes {
		if k.containerd.Exited() {
			t.Errorf("containerd on %s exited: %v\n%s", k.n.Name, k.containerd.Err(), lab.Tail(k.containerd.LogPath, 20))
		}
	}
	if t.Failed() {
		return
	}
	klRollingUpgrade(ctx, t, l, kube, nodes, clusterYAML, podNames, klVIPs{api: klAPIVIP, ingress: lab.Host4(131)})
}

// klClusterFile is the cluster file the real-kubelet labs install with,
// but for their VIP mode's keys.
func klClusterFile(api, ingress netip.Addr, image, apiHostPort string) string {
	return fmt.Sprintf(`cluster: %s
domain: %s
apiVIPs: [%s]
ingressVIPs: [%s]
interface: %s
image: %s
kubeconfig: /etc/kubernetes/infradns/kubeconfig
apiServers: [%s]
upstreams: [198.51.100.53]
listen: [%s, lo]
`, klCluster, domain, api, ingress, lab.Iface, image, apiHostPort, lab.Iface)
}

// klLabs lets one real-kubelet lab run at a time. Each runs three
// kubelets, three containerds and a kube-apiserver on the machine's two
// cores: in make test's first run with two side by side, one lab's pods
// were not Ready after 90 s and the other's nodes failed their checks and
// left the ToR's next hops twice in one upgrade.
var klLabs sync.Mutex

// klOneAtATime holds klLabs until the test and its lab's teardown are done,
// and reaps the container cgroups the lab's containerds leave (klReapCgroups).
func klOneAtATime(t *testing.T) {
	t.Helper()
	klLabs.Lock()
	t.Cleanup(klLabs.Unlock) // the first cleanup registered runs last
	klReapCgroups(t)
}

// klNewLab starts a real-kubelet lab (cfg) as the cluster after its
// installation: the site's DNS server, the real kube-apiserver with the
// nodes' Node objects and its own EndpointSlice. tools are what the test
// needs besides the lab's.
func klNewLab(t *testing.T, cfg lab.Config, tools ...string) (*lab.Lab, *lab.Node, *kubetest.Cluster) {
	t.Helper()
	for _, tool := range append([]string{"containerd", "ctr", "runc", "nsenter", "unshare", "dig", "curl", "mmdebstrap"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (hack/install-deps.sh installs it): %v", tool, err)
		}
	}
	klWeighPods(t, cfg.Nodes)
	l := lab.New(t, cfg)
	// Linux's default, as on the hosts infradns installs on (the lab allows
	// it): the resolver binds the API VIP ahead of having it (IP_FREEBIND).
	for _, n := range l.Nodes() {
		if _, err := n.Run(context.Background(), "sysctl", "-qw", "net.ipv4.ip_nonlocal_bind=0", "net.ipv6.ip_nonlocal_bind=0"); err != nil {
			t.Fatal(err)
		}
	}
	site := startSiteDNS(t, l, lab.Binary(t, "coredns"))
	kube := startLabKube(t, l)
	apiAddr, err := netip.ParseAddrPort(strings.TrimPrefix(kube.URL, "https://"))
	if err != nil {
		t.Fatalf("apiserver URL %s: %v", kube.URL, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range l.Nodes() {
		if _, err := kube.Client.CoreV1().Nodes().Create(ctx, controlPlaneNode(n.Name, n.IPv4.String()), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kube.Client.DiscoveryV1().EndpointSlices("default").Create(ctx,
		apiServerSlice("kubernetes", int32(apiAddr.Port()), apiAddr.Addr().String()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return l, site, kube
}

// klInstallNodes installs infradns on each of the lab's nodes as an
// operator would after kubeadm (render-node with the cluster file and
// role, the NetworkManager dispatcher, the kubeconfig), starts containerd
// and kubelet with the image imported, and waits until every static pod
// is Ready. It returns the nodes and the names of their pods.
func klInstallNodes(ctx context.Context, t *testing.T, l *lab.Lab, kube *kubetest.Cluster, site *lab.Node, clusterFile, role string) ([]*klNode, []string) {
	t.Helper()
	kubelet := filepath.Join(kubetest.Binaries(t), "kubelet")
	infradns := lab.Binary(t, "infradns")
	imgInfradns, imgPause := klImages(t, klPause)
	kubeconfig := string(mustRead(t, kube.Kubeconfig))
	base := t.TempDir()
	var nodes []*klNode
	klPodLogsOnFailure(t, &nodes)
	for _, n := range l.Nodes() {
		k := startKLNode(ctx, t, n, filepath.Join(base, n.Name), "/etc", "/var/lib")
		k.kubeletBin = kubelet
		nodes = append(nodes, k)
		// The operator's install: render-node to "/", the dispatcher as
		// NetworkManager runs it, the kubeconfig.
		if out, err := k.run(ctx, infradns, "render-node", "-f", clusterFile, "-role", role, "-node", k.n.Name, "-o", "/"); err != nil {
			t.Fatalf("render-node: %v", err)
		} else if k == nodes[0] {
			t.Logf("render-node on %s:\n%s", k.n.Name, out)
		}
		writeFile(t, k.path("/run/NetworkManager/resolv.conf"), fmt.Sprintf("nameserver 127.0.0.53\nnameserver %s\n", site.IPv4))
		if out, err := k.run(ctx, "bash", nodecfg.DispatcherPath, lab.Iface, "up"); err != nil {
			t.Fatalf("dispatcher: %v", err)
		} else if !strings.Contains(string(mustRead(t, k.path("/etc/resolv.conf"))), "nameserver "+k.n.IPv4.String()) {
			t.Fatalf("dispatcher on %s did not put the node first in resolv.conf: %s\n%s", k.n.Name, mustRead(t, k.path("/etc/resolv.conf")), out)
		}
		if err := os.MkdirAll(k.path("/etc/kubernetes/infradns"), 0o755); err != nil {
			t.Fatal(err)
		}
		// As the guide says: root:65532 0640, read by lbconfig (root) and
		// mdnsnodes (65532).
		kc := k.path("/etc/kubernetes/infradns/kubeconfig")
		if err := os.WriteFile(kc, []byte(kubeconfig), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(kc, 0, 65532); err != nil {
			t.Fatal(err)
		}
		// Only the image's pull policy and tag matter to kubelet: the
		// manifests stay as rendered.
		writeFile(t, filepath.Join(k.dir, "containerd.toml"), fmt.Sprintf(klContainerdConfig, k.dir, klPause))
		writeFile(t, filepath.Join(k.dir, "kubelet.yaml"), fmt.Sprintf(klKubeletConfig, k.dir))
		k.containerd = k.start(t, "containerd", "containerd", "--config", filepath.Join(k.dir, "containerd.toml"))
	}
	manifests, err := filepath.Glob(nodes[0].path(nodecfg.ManifestDir + "/*.yaml"))
	if err != nil || len(manifests) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	var podNames []string
	for _, m := range manifests {
		p, err := nodecfg.DecodePod(mustRead(t, m))
		if err != nil {
			t.Fatal(err)
		}
		podNames = append(podNames, p.Name)
	}
	slices.Sort(podNames)

	// Images: imported into every node's containerd, in parallel.
	klImport(ctx, t, nodes, func(*klNode) []string { return []string{imgPause, imgInfradns} })

	start := time.Now()
	for _, k := range nodes {
		k.startKubelet(t)
	}
	for _, k := range nodes {
		k.waitReady(ctx, t, podNames)
	}
	t.Logf("all %d pods Ready by kubelet's probes on %d nodes %v after kubelet started", len(podNames), len(nodes), time.Since(start).Round(100*time.Millisecond))
	return nodes, podNames
}

// klVIPAnswers checks that the API VIP, every node's second nameserver,
// answers DNS: the holder's resolver binds its interface (listen mode), and
// a VIP that came to that interface after the resolver started (keepalived
// takes it after its resolver is up, or it moved) was never answered on by
// CoreDNS's own bind. added says the VIP must have come after the start.
// klServiceName creates the address pools and a Service of type
// LoadBalancer with no class (lbPools: default), and waits until every
// node answers SERVICE.NAMESPACE.lb.<domain> with the address one of the
// nodes' lbpools gave it, and names the writer.
func klServiceName(ctx context.Context, t *testing.T, kube *kubetest.Cluster, nodes []*klNode) {
	t.Helper()
	for _, ns := range []string{"shop", "infradns"} {
		if _, err := kube.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if _, err := kube.Client.CoreV1().ConfigMaps("infradns").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: infrakube.PoolsConfigMap},
		Data:       map[string]string{"pools.yaml": "pools:\n- name: default\n  addresses: [203.0.113.80-203.0.113.89]\n"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const addr = "203.0.113.80"
	created := time.Now()
	if _, err := kube.Client.CoreV1().Services("shop").Create(ctx, lbsService("web", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, k := range nodes {
		waitA(ctx, t, k.n, "web.shop.lb."+domain, addr)
	}
	writer := ""
	if l, err := kube.Client.CoordinationV1().Leases("infradns").Get(ctx, infrakube.AllocatorLease, metav1.GetOptions{}); err == nil && l.Spec.HolderIdentity != nil {
		writer = *l.Spec.HolderIdentity
	}
	t.Logf("lbPools: Service shop/web created → %s, allocated by %s, answered by every node's DNS pod %v later", addr, writer, time.Since(created).Round(time.Millisecond))
}

func klVIPAnswers(ctx context.Context, t *testing.T, client *lab.Node, holder *klNode, added bool) {
	t.Helper()
	v := runVerify(ctx, t, client, klAPIVIP, 53, klAPIVIP.String(), lab.Host4(131).String())
	if v.exit != 0 || v.failed != 0 || v.passed != checksPerRun {
		t.Fatalf("verify-dns.sh against the API VIP on %s: exit %d, %d passed, %d failed:\n%s", holder.n.Name, v.exit, v.passed, v.failed, v.out)
	}
	// The Corefile names the API VIP: bound by CoreDNS's own listener when
	// the node held it at the start, else ahead of it (IP_FREEBIND).
	logs, _ := filepath.Glob(holder.path("/var/log/pods/*_infradns-coredns-*/*/*.log"))
	var ahead, atStart bool
	for _, f := range logs {
		b := string(mustRead(t, f))
		ahead = ahead || strings.Contains(b, "plugin/bind: answering on "+klAPIVIP.String()+" as soon as the host has it")
		atStart = atStart || strings.Contains(b, ":53 on "+klAPIVIP.String()+"\n")
	}
	if added && !ahead {
		t.Errorf("%s's resolver does not log that it bound the API VIP %s ahead of having it (logs %v)", holder.n.Name, klAPIVIP, logs)
	}
	if !ahead && !atStart {
		t.Errorf("%s's resolver logs no listener on the API VIP %s (logs %v)", holder.n.Name, klAPIVIP, logs)
	}
	how := "bound when its resolver started, the node holding it"
	if ahead {
		how = "bound ahead of the node having it, when its resolver started"
	}
	t.Logf("verify-dns.sh: %d of %d checks passed against the API VIP on %s, %s", v.passed, checksPerRun, holder.n.Name, how)
}

func (k *klNode) startKubelet(t *testing.T) {
	t.Helper()
	k.kubelet = k.start(t, "kubelet", k.kubeletBin, "--config", filepath.Join(k.dir, "kubelet.yaml"),
		"--hostname-override", k.n.Name, "--node-ip", k.n.IPv4.String(), "--v", "1")
}

// klOneHolder waits until exactly one node holds the API VIP and the real
// apiserver answers through it (haproxy on the holder).
func klOneHolder(ctx context.Context, t *testing.T, nodes []*klNode, kube *kubetest.Cluster) *klNode {
	t.Helper()
	var labNodes []*lab.Node
	for _, k := range nodes {
		labNodes = append(labNodes, k.n)
	}
	holder := nodes[waitOneHolder(t, labNodes, klAPIVIP)]
	klServesAPI(ctx, t, nodes[0].n.Lab().Client(), kube, klAPIVIP)
	return holder
}

// klServesAPI waits until the real apiserver answers through vip (haproxy
// on a node that holds it) from client.
func klServesAPI(ctx context.Context, t *testing.T, client *lab.Node, kube *kubetest.Cluster, vip netip.Addr) {
	t.Helper()
	url := fmt.Sprintf("https://%s/readyz", netip.AddrPortFrom(vip, vrrpLBPort))
	lab.Eventually(t, klBound, 200*time.Millisecond, "the API VIP serves the apiserver", func() error {
		res, err := client.Run(ctx, "curl", "-fsSk", "-m", "2", "-H", "Authorization: Bearer "+kube.Token, url)
		if err != nil {
			return err
		}
		if strings.TrimSpace(res.Stdout) != "ok" {
			return fmt.Errorf("answer %q", res.Stdout)
		}
		return nil
	})
}

// klHAProxyReloads is lbconfig's count of haproxy reloads with result.
func klHAProxyReloads(ctx context.Context, t *testing.T, k *klNode, result string) float64 {
	t.Helper()
	body, err := k.n.HTTPGet(ctx, "http://127.0.0.1:9155/metrics")
	if err != nil {
		t.Fatalf("lbconfig metrics on %s: %v", k.n.Name, err)
	}
	re := regexp.MustCompile(`(?m)^coredns_lbconfig_reloads_total\{file="haproxy",result="` + result + `"\} (\S+)$`)
	var sum float64
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	return sum
}
