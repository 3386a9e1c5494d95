//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/internal/nodecfg"
	"github.com/infradns/infradns/test/e2e/lab"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// klVIPs are the VIPs a real-kubelet lab's rolling upgrade checks, and how
// the API VIP is held: by one node over VRRP (tor nil), or announced by
// every control-plane node to tor over BGP.
type klVIPs struct {
	api, ingress netip.Addr
	tor          *lab.ToR
}

// The BGP real-kubelet lab's VIPs: in the routed lab's VIP subnet, which
// no link holds, so only the ToR's routes reach them.
var (
	klBGPAPIVIP     = netip.MustParseAddr("10.91.100.10")
	klBGPIngressVIP = netip.MustParseAddr("10.91.100.11")
)

const klToRASN, klNodeASN = 64512, 64513

// TestKubeletBGP is the real-kubelet lab in vipMode bgp: three
// control-plane nodes in subnets of their own behind a BIRD ToR with BFD
// (the routed lab), the static pods render-node writes for BGP (no
// keepalived; lbconfig's embedded speaker announces the API VIP), run by
// kubelet and containerd from the image. It ends with the guide's rolling
// upgrade, as TestKubeletStaticPods does over VRRP: a client on the API
// VIP and every node's resolver lose nothing, and each node leaves the
// ToR's next hops at most once.
func TestKubeletBGP(t *testing.T) {
	kubeParallel(t)
	for _, tool := range []string{"containerd", "ctr", "runc", "nsenter", "unshare", "dig", "curl", "mmdebstrap", "bird", "birdc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (hack/install-deps.sh installs it): %v", tool, err)
		}
	}
	l := lab.New(t, lab.Config{Prefix: "klb", Nodes: 3, Client: true, Routed: true, TeardownGrace: 2 * time.Second})
	for _, n := range l.Nodes() {
		if _, err := n.Run(context.Background(), "sysctl", "-qw", "net.ipv4.ip_nonlocal_bind=0", "net.ipv6.ip_nonlocal_bind=0"); err != nil {
			t.Fatal(err)
		}
	}
	site := startSiteDNS(t, l, lab.Binary(t, "coredns"))
	kube := startLabKube(t, l)
	apiHostPort := strings.TrimPrefix(kube.URL, "https://")
	apiAddr, err := netip.ParseAddrPort(apiHostPort)
	if err != nil {
		t.Fatalf("apiserver URL %s: %v", kube.URL, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
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

	// The ToR as the guide configures it: every node declared, only host
	// routes from the VIP subnet accepted, BFD, and resilient hashing,
	// without which a next hop leaving or coming back moves some of the
	// other nodes' open connections, which no node can save.
	tc := lab.ToRConfig{ASN: klToRASN, BFD: true, Resilient: true, VIPs: []netip.Prefix{netip.PrefixFrom(klBGPAPIVIP, 24).Masked()}}
	for _, n := range l.Nodes() {
		tc.Peers = append(tc.Peers, lab.ToRPeer{Addr: n.IPv4, ASN: klNodeASN})
	}
	tor, err := l.StartBIRD(tc)
	if err != nil {
		t.Fatal(err)
	}

	// Each node's ToR is its own gateway: the nodes: entries of a cluster
	// whose racks differ.
	var bgpNodes strings.Builder
	for _, n := range l.Nodes() {
		fmt.Fprintf(&bgpNodes, "    %s: {asn: %d, peers: [{address: %s, asn: %d}]}\n", n.Name, klNodeASN, n.Gateway4, klToRASN)
	}
	clusterYAML := func(image string) string {
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
vipMode: bgp
bgp:
  asn: %d
  peers: [{address: %s, asn: %d}]
  nodes:
%s`, klCluster, domain, klBGPAPIVIP, klBGPIngressVIP, lab.Iface, image, apiHostPort, lab.Iface,
			klNodeASN, l.Nodes()[0].Gateway4, klToRASN, bgpNodes.String())
	}
	clusterFile := filepath.Join(t.TempDir(), "cluster.yaml")
	writeFile(t, clusterFile, clusterYAML(klImage))

	nodes, podNames := klInstallNodes(ctx, t, l, kube, site, clusterFile, nodecfg.ControlPlane)
	if slices.ContainsFunc(podNames, func(p string) bool { return strings.Contains(p, "keepalived") }) {
		t.Fatalf("vipMode bgp rendered a keepalived pod: %v", podNames)
	}
	for _, k := range nodes {
		v := runVerify(ctx, t, l.Client(), k.n.IPv4, 53, klBGPAPIVIP.String(), klBGPIngressVIP.String())
		if v.exit != 0 || v.failed != 0 || v.passed != checksPerRun {
			t.Fatalf("verify-dns.sh against %s: exit %d, %d passed, %d failed:\n%s", k.n.Name, v.exit, v.passed, v.failed, v.out)
		}
	}
	t.Logf("verify-dns.sh: %d of %d checks passed against each node", checksPerRun, checksPerRun)
	// mDNS does not cross the ToR: the nodes' names come from the API.
	for _, from := range nodes {
		for _, to := range nodes {
			waitA(ctx, t, from.n, to.n.Name+"."+domain, to.n.IPv4.String())
		}
	}
	klAllNextHops(ctx, t, kube, tor, klBGPAPIVIP, nodes)
	t.Logf("BGP sessions with the ToR:\n%s", tor.Show("summary"))
	// The switch forwards the API VIP through a resilient group of the
	// three nodes.
	fwd, err := exec.Command("ip", "-n", tor.Namespace(), "route", "show", "exact", netip.PrefixFrom(klBGPAPIVIP, 32).String()).CombinedOutput()
	groups, err2 := exec.Command("ip", "-n", tor.Namespace(), "nexthop", "show").CombinedOutput()
	if err != nil || err2 != nil || !strings.Contains(string(fwd), "nhid") || !strings.Contains(string(groups), "type resilient") {
		t.Fatalf("the ToR forwards %s without a resilient group: %v %v\n%s%s", klBGPAPIVIP, err, err2, fwd, groups)
	}
	t.Logf("the ToR forwards the API VIP: %s%s", fwd, groups)
	if t.Failed() {
		return
	}
	klRollingUpgrade(ctx, t, l, kube, nodes, clusterYAML, podNames, klVIPs{api: klBGPAPIVIP, ingress: klBGPIngressVIP, tor: tor})

	// The hand-over relay ran in the pods (NET_ADMIN only): the first node
	// upgraded, in its new pod, sent the next two nodes' open connections
	// back to them as each left, and no relay failed anywhere.
	for _, k := range nodes {
		logs, _ := filepath.Glob(k.path("/var/log/pods/*_infradns-lbconfig-*/*/*.log"))
		var all strings.Builder
		for _, f := range logs {
			all.Write(mustRead(t, f))
		}
		if strings.Contains(all.String(), "hand-over relay:") {
			t.Errorf("%s: the hand-over relay failed in its pod:\n%s", k.n.Name, grepLines(all.String(), "hand-over relay:"))
		}
	}
	first := nodes[0]
	logs, _ := filepath.Glob(first.path("/var/log/pods/*_infradns-lbconfig-*/*/*.log"))
	var firstLog strings.Builder
	for _, f := range logs {
		firstLog.Write(mustRead(t, f))
	}
	for _, k := range nodes[1:] {
		if want := fmt.Sprintf("%s left by %s: its open connections' packets go back to it", klBGPAPIVIP, k.n.IPv4); !strings.Contains(firstLog.String(), want) {
			t.Errorf("%s's lbconfig did not relay %s's open connections when it left (no %q in %v)", first.n.Name, k.n.Name, want, logs)
		}
	}
}

// grepLines are the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// klAllNextHops waits until the ToR routes vip through every node and the
// real apiserver answers through it from the lab's client.
func klAllNextHops(ctx context.Context, t *testing.T, kube *kubetest.Cluster, tor *lab.ToR, vip netip.Addr, nodes []*klNode) {
	t.Helper()
	var want []netip.Addr
	for _, k := range nodes {
		want = append(want, k.n.IPv4)
	}
	slices.SortFunc(want, netip.Addr.Compare)
	wctx, cancel := context.WithTimeout(ctx, klBound)
	defer cancel()
	hs, err := tor.WaitNextHops(wctx, netip.PrefixFrom(vip, 32), len(want))
	if err != nil || !slices.Equal(hs, want) {
		t.Fatalf("the ToR's next hops for %s: %v (want %v): %v\n%s", vip, hs, want, err, tor.Show("summary"))
	}
	url := fmt.Sprintf("https://%s/readyz", netip.AddrPortFrom(vip, vrrpLBPort))
	client := nodes[0].n.Lab().Client()
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

// klWatchNextHops records every change of the nodes the ToR routes vip
// through until stop is called, as klWatchHolders does for VRRP's holders:
// it follows the ToR namespace's route events and reads the route anew
// at each one.
func klWatchNextHops(t *testing.T, tor *lab.ToR, nodes []*klNode, vip netip.Addr) (stop func() []klHolderChange) {
	t.Helper()
	ns, err := netns.GetFromPath("/run/netns/" + tor.Namespace())
	if err != nil {
		t.Fatal(err)
	}
	byAddr := map[netip.Addr]string{}
	for _, k := range nodes {
		byAddr[k.n.IPv4] = k.n.Name
	}
	prefix := netip.PrefixFrom(vip, 32)
	var (
		mu      sync.Mutex
		changes []klHolderChange
		done    = make(chan struct{})
		wg      sync.WaitGroup
	)
	read := func() {
		hs, err := tor.NextHops(prefix)
		if err != nil {
			t.Errorf("next hops of %s: %v (the record has a gap)", prefix, err)
			return
		}
		var names []string
		for _, a := range hs {
			name, ok := byAddr[a]
			if !ok {
				name = a.String()
			}
			names = append(names, name)
		}
		slices.Sort(names)
		mu.Lock()
		defer mu.Unlock()
		if len(changes) == 0 || !slices.Equal(changes[len(changes)-1].holders, names) {
			changes = append(changes, klHolderChange{time.Now(), names})
		}
	}
	ch := make(chan netlink.RouteUpdate, 1024)
	err = netlink.RouteSubscribeWithOptions(ch, done, netlink.RouteSubscribeOptions{Namespace: &ns, ReceiveBufferSize: 1 << 20,
		ErrorCallback: func(err error) {
			select {
			case <-done:
			default:
				t.Errorf("route events in %s: %v (the next hops' record has a gap)", tor.Namespace(), err)
			}
		}})
	ns.Close()
	if err != nil {
		t.Fatal(err)
	}
	read()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for u := range ch {
			if u.Dst == nil {
				continue
			}
			if p, ok := netip.AddrFromSlice(u.Dst.IP); ok && p.Unmap() == vip {
				read()
			}
		}
	}()
	var once sync.Once
	end := func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(end)
	return func() []klHolderChange {
		end()
		mu.Lock()
		defer mu.Unlock()
		return changes
	}
}
