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
	"testing"
	"time"

	"github.com/infradns/infradns/internal/nodecfg"
	"github.com/infradns/infradns/test/e2e/lab"
)

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
//
// It was kept out of make test while it lost requests: 3 of 16 runs lost
// one or two of the client's ~3,000 (found with nft log at the ToR and the
// nodes: lbconfig let the VIPs go at once when kubelet's SIGTERM came right
// after haproxy's stopping file had withdrawn them; fixed in internal/bgp),
// then 1 of 18 lost one of another kind (connected, TLS done and the request
// written 16 ms after the SYN, no answer within 1 s; the SYN 49 ms after a
// withdrawal; not explained), and under load the lab's pods starved until
// they weighed as kubepods do (klWeighPods). The 10 runs with klWeighPods
// lost nothing.
func TestKubeletBGP(t *testing.T) {
	kubeParallel(t)
	klOneAtATime(t)
	l, site, kube := klNewLab(t, lab.Config{Prefix: "klb", Nodes: 3, Client: true, Routed: true, TeardownGrace: 2 * time.Second}, "bird", "birdc", "chrt")
	apiHostPort := strings.TrimPrefix(kube.URL, "https://")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

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
		return klClusterFile(klBGPAPIVIP, klBGPIngressVIP, image, apiHostPort) + fmt.Sprintf(`vipMode: bgp
bgp:
  asn: %d
  peers: [{address: %s, asn: %d}]
  nodes:
%s`, klNodeASN, l.Nodes()[0].Gateway4, klToRASN, bgpNodes.String())
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
