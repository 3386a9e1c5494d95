//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/test/e2e/lab"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The BGP lab: three nodes in subnets of their own behind a ToR namespace
// that routes between them and a client subnet. Each node runs bin/coredns
// with lbconfig in vip-mode bgp (the embedded GoBGP speaker, or the kernel
// table hand-off to an FRR on the node), the haproxy lbconfig configures and
// a fake apiserver behind it; the ToR is FRR (bgpd + bfdd) or BIRD, and
// spreads the API VIP over every node that announces it (ECMP). The client
// opens a new TLS connection to the VIP every 20 ms.
const (
	bgpCluster = "bgplab"
	bgpToRASN  = 64512
	// Bounds for what is asserted; the figures are logged. The lab shares 2
	// cores with other work.
	bgpRouteBound = 10 * time.Second
	bgpBFDBound   = time.Second
)

var (
	bgpVIP = netip.MustParseAddr("10.91.100.1")
	// bgpIngressVIP is the ingress VIP of the API-fed lab: announced by
	// every node with a ready router endpoint.
	bgpIngressVIP = netip.MustParseAddr("10.91.100.2")
	// bgpVIP6 is announced over the IPv6 sessions of the embedded speakers.
	bgpVIP6 = netip.MustParseAddr("fd00:91:100::1")
	// bgpVIPPrefixes hold the VIPs: the ToR accepts host routes in them only.
	bgpVIPPrefixes = []netip.Prefix{netip.MustParsePrefix("10.91.100.0/24"), netip.MustParsePrefix("fd00:91:100::/64")}
)

type bgpNode struct {
	n                *lab.Node
	dir              string
	asn              uint32
	table            bool // hands its routes to an FRR on the node
	coredns, haproxy *lab.Process
	// proxy stands in for kube-proxy's /healthz (services labs), which
	// gates the Services' routes.
	proxy *lab.Process
	// relayOff starts its lbconfig with 'bgp-relay off'.
	relayOff bool
}

// bgpProxyHealth is where the services lab's kube-proxy stand-ins answer.
const bgpProxyHealth = "127.0.0.1:10256"

type bgpLab struct {
	t   *testing.T
	lab *lab.Lab
	tor *lab.ToR
	// kube, when set, is the apiserver lbconfig reads the control plane
	// and the routers from; the client then calls the ingress VIP.
	kube    *kubetest.Cluster
	nodes   []*bgpNode
	client  *lab.Process
	fakeapi string
	// services: lbconfig announces the Services (and lbpools allocates
	// their addresses: TestBGPServices).
	services bool
	// watch is the route the faults watch at the ToR (zero: the API VIP's).
	watch netip.Prefix
}

// bgpLabOpts are what a test adds to the lab.
type bgpLabOpts struct {
	// services: a dual-stack API server, the pools of bgpPools, and every
	// node's lbconfig with 'services' beside an lbpools.
	services bool
}

// bgpPools are the Services' pools of the lab: inside the prefixes the
// ToR accepts host routes in.
const bgpPools = `pools:
- name: lab
  addresses: [10.91.100.16-10.91.100.31, fd00:91:100::10-fd00:91:100::1f]
`

func (b *bgpLab) haConf(i int) string { return filepath.Join(b.nodes[i].dir, "haproxy.cfg") }
func (b *bgpLab) haSock(i int) string { return filepath.Join(b.nodes[i].dir, "haproxy-master.sock") }

// startBGPLab brings up the routed lab with the given ToR and returns once
// the ToR has a next hop for the VIP through every node and the client is
// served. tableNode >= 0 makes that node hand its routes to an FRR of its
// own through kernel table 198 instead of speaking BGP itself.
func startBGPLab(t *testing.T, tor string, tableNode int, withKube bool) *bgpLab {
	t.Helper()
	return startBGPLabWith(t, tor, tableNode, withKube, bgpLabOpts{})
}

func startBGPLabWith(t *testing.T, tor string, tableNode int, withKube bool, opts bgpLabOpts) *bgpLab {
	t.Helper()
	fakeapi := vrrpBuildFakeAPI(t)
	l := lab.New(t, lab.Config{Prefix: "bgp" + tor, Nodes: 3, Client: true, Routed: true, TeardownGrace: 2 * time.Second})
	b := &bgpLab{t: t, lab: l, fakeapi: fakeapi, services: opts.services}
	cfg := lab.ToRConfig{ASN: bgpToRASN, BFD: true, VIPs: bgpVIPPrefixes}
	base := t.TempDir()
	for i, n := range l.Nodes() {
		bn := &bgpNode{n: n, dir: filepath.Join(base, n.Name), asn: uint32(64513 + i), table: i == tableNode}
		b.nodes = append(b.nodes, bn)
		if err := os.MkdirAll(filepath.Join(bn.dir, "track"), 0o755); err != nil {
			t.Fatal(err)
		}
		cfg.Peers = append(cfg.Peers, lab.ToRPeer{Addr: n.IPv4, ASN: bn.asn})
		if !bn.table {
			cfg.Peers = append(cfg.Peers, lab.ToRPeer{Addr: n.IPv6, ASN: bn.asn})
		}
	}
	if withKube {
		var extra []string
		if opts.services {
			extra = []string{"--service-cluster-ip-range=10.96.0.0/24,fd00:96::/112"}
		}
		b.kube = startLabKubeWith(t, l, extra...)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if opts.services {
			for _, ns := range []string{"infradns", "shop"} {
				if _, err := b.kube.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: kube.PoolsConfigMap}, Data: map[string]string{kube.PoolsKey: bgpPools}}
			if _, err := b.kube.Client.CoreV1().ConfigMaps("infradns").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		var addrs, names []string
		for _, n := range l.Nodes() {
			if _, err := b.kube.Client.CoreV1().Nodes().Create(ctx, controlPlaneNode(n.Name, n.IPv4.String()), metav1.CreateOptions{}); err != nil {
				t.Fatalf("create Node %s: %v", n.Name, err)
			}
			addrs, names = append(addrs, n.IPv4.String()), append(names, n.Name)
		}
		if _, err := b.kube.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, apiServerSlice("kubernetes", vrrpAPIPort, addrs...), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.kube.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, routerSlice(l, names...), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	var err error
	switch tor {
	case "frr":
		b.tor, err = l.StartFRR(cfg)
	case "bird":
		b.tor, err = l.StartBIRD(cfg)
	}
	if err != nil {
		t.Fatalf("ToR %s: %v", tor, err)
	}
	t.Logf("ToR %s up in %d ms", tor, time.Since(start).Milliseconds())
	for i := range b.nodes {
		if b.nodes[i].table {
			b.startNodeFRR(i)
		}
		b.startNode(i)
	}
	for i := range b.nodes {
		b.waitConfig(i)
		b.startHAProxy(i)
	}
	seen := map[netip.Addr]bool{}
	lab.Eventually(t, 3*bgpRouteBound, 10*time.Millisecond, "every node announces the VIP", func() error {
		hs := b.nextHops()
		for _, h := range hs {
			if !seen[h] {
				seen[h] = true
				t.Logf("next hop %s at the ToR %d ms after the lab was up", h, time.Since(start).Milliseconds())
			}
		}
		if len(hs) != 3 {
			return fmt.Errorf("next hops %v", hs)
		}
		return nil
	})
	t.Logf("3 next hops at the ToR %d ms after the lab was up", time.Since(start).Milliseconds())
	// IPv6: one next hop per node with the embedded speaker (the table
	// hand-off node's FRR carries IPv4 only here).
	want6 := 0
	for _, bn := range b.nodes {
		if !bn.table {
			want6++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), bgpRouteBound)
	defer cancel()
	hs6, err := b.tor.WaitNextHops(ctx, netip.PrefixFrom(bgpVIP6, 128), want6)
	if err != nil {
		b.dump()
		t.Fatalf("IPv6 VIP: want %d next hops: %v", want6, err)
	}
	t.Logf("IPv6 VIP %s: next hops %v", bgpVIP6, hs6)
	url := fmt.Sprintf("https://%s/", netip.AddrPortFrom(bgpVIP, vrrpLBPort))
	if withKube {
		hs, err := b.tor.WaitNextHops(ctx, netip.PrefixFrom(bgpIngressVIP, 32), 3)
		if err != nil {
			b.dump()
			t.Fatalf("ingress VIP: want 3 next hops (every router node): %v", err)
		}
		t.Logf("ingress VIP %s: next hops %v", bgpIngressVIP, hs)
		url = fmt.Sprintf("https://%s/", netip.AddrPortFrom(bgpIngressVIP, bgpRouterPort))
	}
	b.client = l.Client().Start("probe", []string{fakeapi, "probe", "-url", url, "-interval", "20ms", "-timeout", "500ms"})
	b.waitClient("client first served", time.Now())
	return b
}

// bgpRouterPort is where the API-fed lab's "routers" listen.
const bgpRouterPort = 8443

// startNode starts node i's fake apiserver (and, API-fed, a fake router on
// every address) and its lbconfig.
func (b *bgpLab) startNode(i int) {
	n := b.nodes[i].n
	n.Start("fakeapi", []string{b.fakeapi, "serve", "-name", n.Name, "-listen", netip.AddrPortFrom(n.IPv4, vrrpAPIPort).String()})
	if b.kube != nil {
		n.Start("router", []string{b.fakeapi, "serve", "-name", n.Name, "-listen", fmt.Sprintf("0.0.0.0:%d", bgpRouterPort)})
	}
	if b.services {
		b.startProxy(i)
	}
	b.startCoreDNS(i)
}

// startProxy starts node i's kube-proxy health stand-in.
func (b *bgpLab) startProxy(i int) {
	bn := b.nodes[i]
	bn.proxy = bn.n.Start("kube-proxy", []string{b.fakeapi, "serve", "-http", "-name", bn.n.Name, "-listen", bgpProxyHealth})
}

// waitConfig waits for node i's lbconfig to write haproxy's configuration.
func (b *bgpLab) waitConfig(i int) {
	bn := b.nodes[i]
	lab.Eventually(b.t, 30*time.Second, 20*time.Millisecond, "lbconfig wrote haproxy.cfg on "+bn.n.Name, func() error {
		if err := running(bn.coredns); err != nil {
			return err
		}
		_, err := os.Stat(b.haConf(i))
		return err
	})
}

// startCoreDNS starts node i's lbconfig. Its only backend is the node's own
// fake apiserver, so a response names the node the ToR sent it to.
func (b *bgpLab) startCoreDNS(i int) {
	bn := b.nodes[i]
	speaker := fmt.Sprintf("bgp-asn %d\n        bgp-peer %s %d hold 3s keepalive 1s\n        bgp-peer %s %d hold 3s keepalive 1s",
		bn.asn, bn.n.Gateway4, bgpToRASN, bn.n.Gateway6, bgpToRASN)
	if bn.table {
		speaker = "bgp-speaker table 198"
	}
	source := "backends " + netip.AddrPortFrom(bn.n.IPv4, vrrpAPIPort).String()
	if b.kube != nil {
		// The routers' health is theirs to tell; here every router is up.
		source = fmt.Sprintf("kubeconfig %s\n        ingress-vip %s\n        ingress-service default/router\n        health-check ingress none", b.kube.Kubeconfig, bgpIngressVIP)
	}
	if bn.relayOff {
		speaker += "\n        bgp-relay off"
	}
	var lbpools string
	if b.services {
		// Every node announces the Services; lbpools on each (one elected
		// writer) gives them their addresses.
		speaker += "\n        services\n        health-check services http://" + bgpProxyHealth + "/healthz"
		lbpools = fmt.Sprintf("lbpools {\n        kubeconfig %s\n        identity %s\n        lease infradns/%s 3s\n        announce\n    }", b.kube.Kubeconfig, bn.n.Name, kube.AllocatorLease)
	}
	conf := fmt.Sprintf(`.:1053 {
    lbconfig {
        cluster %s
        node %s
        api-vip %s %s
        %s
        lb-port %d
        health-port %d
        haproxy %s
        reload haproxy socket %s
        track-dir %s
        vip-mode bgp
        %s
    }
    %s
    prometheus 127.0.0.1:9155
    whoami
}
`, bgpCluster, bn.n.Name, bgpVIP, bgpVIP6, source, vrrpLBPort, vrrpHealthPort,
		b.haConf(i), b.haSock(i), filepath.Join(bn.dir, "track"), speaker, lbpools)
	bn.coredns = startCorefile(b.t, bn.n, bn.dir, conf)
}

func (b *bgpLab) startHAProxy(i int) {
	bn := b.nodes[i]
	_ = os.Remove(b.haSock(i))
	bn.haproxy = bn.n.Start("haproxy", []string{"haproxy", "-W", "-db", "-f", b.haConf(i), "-S", b.haSock(i)})
}

// startNodeFRR runs FRR on node i as a site's own speaker would: it
// imports kernel table 198 (where lbconfig puts the healthy VIP routes)
// and redistributes it to the ToR, with origin IGP like every other
// node's speaker (a different origin would cost the node its ECMP share).
func (b *bgpLab) startNodeFRR(i int) {
	bn := b.nodes[i]
	conf := fmt.Sprintf(`frr defaults datacenter
no zebra nexthop kernel enable
ip import-table 198
bfd
 profile fast
  transmit-interval 100
  receive-interval 100
  detect-multiplier 3
 exit
exit
route-map VIP permit 10
 set origin igp
exit
router bgp %d
 bgp router-id %s
 no bgp ebgp-requires-policy
 neighbor %s remote-as %d
 neighbor %s timers 1 3
 neighbor %s timers connect 1
 neighbor %s bfd profile fast
 address-family ipv4 unicast
  redistribute table 198 route-map VIP
 exit-address-family
exit
`, bn.asn, bn.n.IPv4, bn.n.Gateway4, bgpToRASN, bn.n.Gateway4, bn.n.Gateway4, bn.n.Gateway4)
	if err := bn.n.StartFRR(conf); err != nil {
		b.t.Fatalf("FRR on %s: %v", bn.n.Name, err)
	}
}

// prefix is the route the faults watch.
func (b *bgpLab) prefix() netip.Prefix {
	if b.watch.IsValid() {
		return b.watch
	}
	return bgpPrefix()
}

func (b *bgpLab) nextHops() []netip.Addr {
	hs, err := b.tor.NextHops(b.prefix())
	if err != nil {
		b.t.Fatalf("next hops: %v", err)
	}
	return hs
}

func bgpPrefix() netip.Prefix { return netip.PrefixFrom(bgpVIP, 32) }

func (b *bgpLab) waitNextHops(what string, n int) []netip.Addr {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bgpRouteBound*3)
	defer cancel()
	hs, err := b.tor.WaitNextHops(ctx, b.prefix(), n)
	if err != nil {
		b.dump()
		b.t.Fatalf("%s: want %d next hops: %v (now %v)", what, n, err, b.nextHops())
	}
	return hs
}

func (b *bgpLab) dump() {
	b.t.Logf("ToR:\n%s", b.tor.Show("summary"))
	for _, bn := range b.nodes {
		if bn.coredns != nil {
			b.t.Logf("%s coredns:\n%s", bn.n.Name, lab.Tail(bn.coredns.LogPath, 15))
		}
	}
}

// bgpProbe is one client request: when, whether it was served, by which node.
type bgpProbe struct {
	start, end time.Time
	ok         bool
	node       string
	err        string // a failure's error
}

func (b *bgpLab) probes() []bgpProbe {
	var out []bgpProbe
	for _, r := range parseFakeAPI(b.client.Log()) {
		p := bgpProbe{start: r.start, end: r.end, ok: r.ok}
		if r.ok {
			p.node = r.detail[strings.LastIndex(r.detail, "_")+1:] // "hello_from_NODE"
		} else {
			p.err = r.detail
		}
		out = append(out, p)
	}
	return out
}

// waitClient waits for vrrpSteadyOK successes in a row after the last
// failure since from, and reports the requests since from.
func (b *bgpLab) waitClient(what string, from time.Time) vrrpClientStats {
	b.t.Helper()
	var st vrrpClientStats
	lab.Eventually(b.t, vrrpClientBound, 50*time.Millisecond, what, func() error {
		if b.client.Exited() {
			return fmt.Errorf("client exited: %v\n%s", b.client.Err(), lab.Tail(b.client.LogPath, 10))
		}
		st = vrrpClientStats{}
		var rs []bgpProbe
		for _, p := range b.probes() {
			if !p.start.Before(from) {
				rs = append(rs, p)
			}
		}
		st.requests = len(rs)
		last := -1
		for i, p := range rs {
			if !p.ok {
				st.failed, last = st.failed+1, i
			}
		}
		if len(rs)-last-1 < vrrpSteadyOK {
			return fmt.Errorf("%d requests, %d failed, %d ok since the last failure", len(rs), st.failed, len(rs)-last-1)
		}
		if last >= 0 {
			st.outage = rs[last+1].end.Sub(from)
			// Every request started after the last failed one was served:
			// from here on the fault costs no new connection anything.
			st.slowStart = rs[last].start.Sub(from)
		}
		return nil
	})
	return st
}

// spread is how many requests each node served since from.
func (b *bgpLab) spread(from time.Time) map[string]int {
	m := map[string]int{}
	for _, p := range b.probes() {
		if p.ok && !p.start.Before(from) {
			m[p.node]++
		}
	}
	return m
}

// checkECMP lets the client run for a second and checks that more than one
// node served it; it returns when that second began.
func (b *bgpLab) checkECMP(what string) time.Time {
	b.t.Helper()
	from := time.Now()
	time.Sleep(time.Second)
	sp := b.spread(from)
	b.t.Logf("ECMP (%s): next hops of %s %v; 1 s of requests served by %v", what, b.prefix(), b.nextHops(), sp)
	if len(sp) < 2 {
		b.t.Errorf("requests served by %v: want at least 2 nodes (ECMP)", sp)
	}
	return from
}

// waitDrop polls the ToR every 5 ms until the VIP has n next hops; it
// returns how long after from that was.
func (b *bgpLab) waitDrop(what string, from time.Time, n int) time.Duration {
	b.t.Helper()
	b.waitNextHops(what, n)
	return time.Since(from)
}

// bgpFault is one kind of failure of one node, undone by restore.
type bgpFault struct {
	name    string
	do      func(i int)
	restore func(i int)
	// graceful: no request may fail.
	graceful bool
	// bound on the time to the route's withdrawal at the ToR (0: none).
	dropBound time.Duration
}

func (b *bgpLab) faults() []bgpFault {
	return []bgpFault{
		{name: "kill -9 the speaker (lbconfig)", dropBound: bgpBFDBound,
			do: func(i int) {
				if err := b.nodes[i].coredns.Kill(); err != nil {
					b.t.Fatal(err)
				}
			},
			restore: func(i int) { b.startCoreDNS(i) }},
		{name: "silent link failure (nft drop, carrier up)", dropBound: bgpBFDBound,
			do: func(i int) {
				if err := b.nodes[i].n.Blackhole(); err != nil {
					b.t.Fatal(err)
				}
			},
			restore: func(i int) {
				if err := b.nodes[i].n.Unblackhole(); err != nil {
					b.t.Fatal(err)
				}
			}},
		{name: "haproxy killed (health)", dropBound: bgpBFDBound,
			do: func(i int) {
				if err := b.nodes[i].haproxy.Kill(); err != nil {
					b.t.Fatal(err)
				}
			},
			restore: func(i int) { b.startHAProxy(i) }},
		{name: "SIGTERM lbconfig (graceful)", graceful: true, dropBound: bgpBFDBound,
			do: func(i int) {
				if err := b.nodes[i].coredns.Signal(syscall.SIGTERM); err != nil {
					b.t.Fatal(err)
				}
			},
			restore: func(i int) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = b.nodes[i].coredns.Wait(ctx)
				b.startCoreDNS(i)
			}},
	}
}

// upgrade is a node's rolling upgrade as kubelet runs it when every static
// pod's manifest changes: all the pods are stopped at once (haproxy's pod
// first writes its stopping file and stops haproxy softly 1.5 s later, as
// its manifest's preStop does), then the new ones start. The speaker
// withdraws first, and the open connections are relayed to the node until
// they end there.
func (b *bgpLab) upgrade() bgpFault {
	var stopped chan struct{}
	stopping := func(i int) string { return filepath.Join(filepath.Dir(b.haSock(i)), "stopping") }
	return bgpFault{name: "rolling upgrade (every process stopped as kubelet stops the pods, then started anew)", graceful: true, dropBound: bgpBFDBound,
		do: func(i int) {
			bn := b.nodes[i]
			// kubelet stops the pods side by side; here haproxy's first, so
			// lbconfig sees the stopping file before its own SIGTERM.
			writeFile(b.t, stopping(i), "")
			stopped = make(chan struct{})
			go func() {
				defer close(stopped)
				time.Sleep(300 * time.Millisecond)
				if err := bn.coredns.Signal(syscall.SIGTERM); err != nil {
					b.t.Error(err)
				}
				time.Sleep(1200 * time.Millisecond)
				_ = bn.haproxy.Signal(syscall.SIGUSR1) // soft stop
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if bn.haproxy.Wait(ctx) != nil && ctx.Err() != nil {
					// The manifest's hard stop. A connection still open then is
					// one whose packets the fabric took elsewhere and nobody
					// relayed here: its client saw it reset long before.
					sess, err := haMasterCLI(b.haSock(i), "@1 show sess all")
					b.t.Errorf("%s: haproxy still had a connection 10 s after its soft stop: stopped hard; its sessions (%v):\n%s", bn.n.Name, err, sess)
					_ = bn.haproxy.Signal(syscall.SIGTERM)
				}
			}()
		},
		restore: func(i int) {
			bn := b.nodes[i]
			<-stopped
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := bn.coredns.Wait(ctx); ctx.Err() != nil {
				b.t.Fatalf("%s: lbconfig did not stop: %v", bn.n.Name, err)
			}
			if err := bn.haproxy.Wait(ctx); ctx.Err() != nil {
				b.t.Fatalf("%s: haproxy did not stop softly: %v", bn.n.Name, err)
			}
			b.t.Logf("%s's lbconfig stopped:\n%s", bn.n.Name, lab.Tail(bn.coredns.LogPath, 8))
			if err := os.Remove(stopping(i)); err != nil {
				b.t.Fatal(err)
			}
			b.startCoreDNS(i)
			b.waitConfig(i)
			b.startHAProxy(i)
		}}
}

// drain is the admin's drain: node i labelled
// node.kubernetes.io/exclude-from-external-load-balancers gives up its
// VIPs (withdraw, then let go a drain later) without a failed request;
// removing the label brings it back.
func (b *bgpLab) drain() bgpFault {
	return bgpFault{name: "drain (exclude-from-external-load-balancers)", graceful: true, dropBound: bgpBFDBound,
		do:      func(i int) { labelExcluded(b.t, b.kube, b.nodes[i].n.Name, true) },
		restore: func(i int) { labelExcluded(b.t, b.kube, b.nodes[i].n.Name, false) }}
}

// labelExcluded puts kube.LabelExcludeFromLB on the Node called name (the
// admin's drain label), or takes it off.
func labelExcluded(t *testing.T, c *kubetest.Cluster, name string, on bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	if on {
		n.Labels[kube.LabelExcludeFromLB] = ""
	} else {
		delete(n.Labels, kube.LabelExcludeFromLB)
	}
	if _, err := c.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bgpRounds is how many rounds of each fault the lab runs: 1 by default
// (make test), INFRADNS_BGP_ROUNDS for the figures (5 or more).
func bgpRounds(t *testing.T) int { return envRounds(t, "INFRADNS_BGP_ROUNDS", 1) }

// envRounds reads a number of rounds from the environment variable name,
// def when it is unset; anything but a positive number fails the test.
func envRounds(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, s)
	}
	return n
}

// run runs rounds of fault f, each on the next node, and logs the figures.
func (b *bgpLab) run(f bgpFault, rounds int) {
	b.t.Helper()
	var drops, backs, outages, lastFails []time.Duration
	failed := 0
	for r := range rounds {
		i := r % len(b.nodes)
		if b.nodes[i].table && f.name == "kill -9 the speaker (lbconfig)" {
			// The hand-off node's speaker is FRR; killing lbconfig leaves
			// the table as it was (the routes stay, as they should).
			i = (i + 1) % len(b.nodes)
		}
		time.Sleep(300 * time.Millisecond) // client traffic before the fault
		t0 := time.Now()
		f.do(i)
		drop := b.waitDrop(f.name+" on "+b.nodes[i].n.Name+": route withdrawn", t0, 2)
		st := b.waitClient(f.name+": client served by the others", t0)
		hs := b.nextHops()
		if slices.Contains(hs, b.nodes[i].n.IPv4) {
			b.t.Errorf("%s: %s still a next hop: %v", f.name, b.nodes[i].n.Name, hs)
		}
		t1 := time.Now()
		f.restore(i)
		b.waitNextHops(f.name+": "+b.nodes[i].n.Name+" back", 3)
		back := time.Since(t1)
		b.t.Logf("%s on %s (round %d): route withdrawn at the ToR after %d ms; %d of %d requests failed, the last one started at %d ms, client steady after %d ms; back as a next hop %d ms after the restore",
			f.name, b.nodes[i].n.Name, r+1, drop.Milliseconds(), st.failed, st.requests, st.slowStart.Milliseconds(), st.outage.Milliseconds(), back.Milliseconds())
		drops, backs, outages, lastFails = append(drops, drop), append(backs, back), append(outages, st.outage), append(lastFails, st.slowStart)
		failed += st.failed
		if f.graceful {
			// The whole round counts, the node's return included: an
			// upgrade's haproxy stops 1.5 s after the withdrawal, and the
			// node comes back as a next hop.
			time.Sleep(500 * time.Millisecond)
			end := time.Now()
			// The ToR's hash-threshold ECMP moves some flows to another
			// next hop whenever one leaves or comes back: a connection
			// caught in its handshake then meets a node without its socket
			// and is reset. That is the fabric's (resilient nexthop groups
			// avoid it), not a VIP let go early, which would be refused or
			// time out; a round has two such changes, the leave (before
			// the restore) and the return.
			var resets, other []string
			var atLeave, atReturn int
			for _, p := range b.probes() {
				if p.ok || p.start.Before(t0) || !p.start.Before(end) {
					continue
				}
				// A reset shows as "reset by peer" or EOF on a read, and as
				// "broken pipe" on a write the RST came before.
				if strings.Contains(p.err, "reset_by_peer") || strings.Contains(p.err, "EOF") || strings.Contains(p.err, "broken_pipe") {
					resets = append(resets, p.err)
					if p.start.Before(t1) {
						atLeave++
					} else {
						atReturn++
					}
				} else {
					other = append(other, p.err)
				}
			}
			if len(other) > 0 || atLeave > 1 || atReturn > 1 {
				b.t.Errorf("%s on %s: %d requests failed (%v) and %d were reset (%d at the leave, %d at the return), want none failed and at most one reset by each rehash of the ToR", f.name, b.nodes[i].n.Name, len(other), other, len(resets), atLeave, atReturn)
			}
			if len(resets) > 0 {
				b.t.Logf("%s on %s: %d connection reset by the ToR's ECMP rehash: %v", f.name, b.nodes[i].n.Name, len(resets), resets)
			}
		}
		if f.dropBound > 0 && drop > f.dropBound {
			b.t.Errorf("%s on %s: route withdrawn after %s, want within %s", f.name, b.nodes[i].n.Name, drop, f.dropBound)
		}
	}
	b.t.Logf("SUMMARY %s, %d rounds: withdrawn %s ms; last failed request started at %s ms; client steady (last failure over) %s ms; %d requests failed in all; back %s ms (min/median/max)",
		f.name, rounds, vrrpSummary(drops), vrrpSummary(lastFails), vrrpSummary(outages), failed, vrrpSummary(backs))
}

// reload makes node i's CoreDNS reload its Corefile (SIGUSR1, as the
// reload plugin does on a change): the new lbconfig takes over the
// speaker and its sessions, so the ToR sees no change and no request fails.
func (b *bgpLab) reload(i int) {
	b.t.Helper()
	bn := b.nodes[i]
	from := time.Now()
	speakers := strings.Count(bn.coredns.Log(), "BGP peer "+bn.n.Gateway4.String()+" (AS")
	if err := bn.coredns.Signal(syscall.SIGUSR1); err != nil {
		b.t.Fatal(err)
	}
	lab.Eventually(b.t, 10*time.Second, 50*time.Millisecond, "Corefile reloaded on "+bn.n.Name, func() error {
		if strings.Count(bn.coredns.Log(), "SIGUSR1: Reloading") == 0 {
			return fmt.Errorf("no reload in the log yet")
		}
		return nil
	})
	changes := b.quiet(2 * time.Second)
	if n := strings.Count(bn.coredns.Log(), "BGP peer "+bn.n.Gateway4.String()+" (AS"); n != speakers {
		b.t.Errorf("%s started a new speaker on reload (%d peer additions, was %d)", bn.n.Name, n, speakers)
	}
	b.t.Logf("%s after the reload:\n%s", bn.n.Name, lab.Tail(bn.coredns.LogPath, 6))
	st := b.waitClient("client served across the reload", from)
	b.t.Logf("Corefile reload on %s: %d next-hop changes at the ToR, %d of %d requests failed", bn.n.Name, changes, st.failed, st.requests)
	if changes != 0 || st.failed != 0 || len(b.nextHops()) != 3 {
		b.t.Errorf("Corefile reload on %s: %d next-hop changes, %d failed requests, next hops %v; want none, none and 3", bn.n.Name, changes, st.failed, b.nextHops())
	}
	if strings.Contains(bn.coredns.Log(), "withdrew") && strings.LastIndex(bn.coredns.Log(), "withdrew") > strings.LastIndex(bn.coredns.Log(), "SIGUSR1") {
		b.t.Errorf("%s withdrew a route across the reload:\n%s", bn.n.Name, lab.Tail(bn.coredns.LogPath, 20))
	}
}

// quiet counts next-hop changes at the ToR over d with nothing failing.
func (b *bgpLab) quiet(d time.Duration) int {
	prev := b.nextHops()
	changes := 0
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if hs := b.nextHops(); !slices.Equal(hs, prev) {
			changes++
			b.t.Logf("quiet window: next hops %v -> %v", prev, hs)
			prev = hs
		}
	}
	return changes
}

func bgpQuiet(t *testing.T) time.Duration {
	if s := os.Getenv("INFRADNS_BGP_QUIET"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("INFRADNS_BGP_QUIET=%q: %v", s, err)
		}
		return d
	}
	return 3 * time.Second
}

// TestBGPVIPs: the API VIP over BGP with FRR as the ToR (two nodes with the
// embedded speaker, one handing its routes to FRR on the node through
// kernel table 198), then with BIRD as the ToR: ECMP over every node, a
// crash, a silent link failure (BFD), a dead haproxy (health) and a
// graceful stop, each measured at the ToR and by a client; fed by the API,
// a drain, and a drained node that stays drained across restarts of its
// lbconfig and of the API server.
func TestBGPVIPs(t *testing.T) {
	t.Run("frr", func(t *testing.T) {
		b := startBGPLab(t, "frr", 2, false)
		b.checkECMP("FRR ToR")
		rounds := bgpRounds(t)
		for _, f := range b.faults() {
			b.run(f, rounds)
		}
		b.reload(0)
		if n := b.quiet(bgpQuiet(t)); n != 0 {
			t.Errorf("%d next-hop changes in a quiet window, want 0", n)
		}
		if got := b.metric(0, "coredns_lbconfig_bgp_announced{vip=\"10.91.100.1\"}"); got != "1" {
			t.Errorf("bgp_announced on %s = %q, want 1", b.nodes[0].n.Name, got)
		}
		if got := b.metric(0, fmt.Sprintf("coredns_lbconfig_bgp_session_up{peer=%q}", b.nodes[0].n.Gateway4)); got != "1" {
			t.Errorf("bgp_session_up on %s = %q, want 1", b.nodes[0].n.Name, got)
		}
	})
	t.Run("bird", func(t *testing.T) {
		// Fed by a real kube-apiserver: the API VIP from the control
		// plane, the ingress VIP (the client's) from every router node.
		b := startBGPLab(t, "bird", -1, true)
		from := b.checkECMP("BIRD ToR, the client on the ingress VIP")
		// Losing the API changes no announcement: they follow the last
		// state and local health.
		done := make(chan int)
		go func() { done <- b.quiet(4 * time.Second) }()
		b.kube.StopFor(3 * time.Second)
		if n := <-done; n != 0 {
			t.Errorf("%d next-hop changes while the API was down, want 0", n)
		}
		if st := b.waitClient("client served while the API was down", from); st.failed != 0 {
			t.Errorf("%d requests failed while the API was down", st.failed)
		}
		for _, f := range b.faults() {
			if strings.HasPrefix(f.name, "silent") || f.graceful {
				b.run(f, 1)
			}
		}
		b.run(b.drain(), bgpRounds(t))
		b.drainAcrossRestarts(1)

		// The guide's rolling upgrade, one node after the other, with a
		// client on the API VIP (haproxy on every node, the apiservers
		// behind them): the nodes know their peers from the API, so each
		// leaver's open connections are relayed back to it.
		_ = b.client.Stop(time.Second)
		b.client = b.lab.Client().Start("probe-api", []string{b.fakeapi, "probe", "-url", fmt.Sprintf("https://%s/", netip.AddrPortFrom(bgpVIP, vrrpLBPort)), "-interval", "20ms", "-timeout", "500ms"})
		b.waitClient("client served through the API VIP", time.Now())
		b.run(b.upgrade(), len(b.nodes))
	})
}

// How long a drained node is watched for announcing again after its
// lbconfig rendered from the first listing (with the drain label lost, it
// announced 1.7 s later in the lab) and after the API server came back (its
// reflectors reconnect within 7.5 s, the reconnect backoff's cap with
// jitter; with the label lost in the relist, it announced 3.5 s later).
const (
	bgpDrainRestartWindow = 5 * time.Second
	bgpDrainRelistWindow  = 10 * time.Second
)

// drainAcrossRestarts drains node i (the admin's label) and then restarts
// its lbconfig, and the API server (every lbconfig's reflectors list
// again): a drained node must stay drained however lbconfig learns the
// Nodes. client-go's watch-list (its default) once passed the first listing
// and every relist through a transform that dropped the drain label, and a
// drained node announced the VIPs again at each.
func (b *bgpLab) drainAcrossRestarts(i int) {
	t := b.t
	t.Helper()
	bn := b.nodes[i]
	ingress := netip.PrefixFrom(bgpIngressVIP, 32)
	t0 := time.Now()
	labelExcluded(t, b.kube, bn.n.Name, true)
	drop := b.waitDrop("drained "+bn.n.Name+": API VIP route withdrawn", t0, 2)
	ctx, cancel := context.WithTimeout(context.Background(), bgpRouteBound)
	defer cancel()
	if hs, err := b.tor.WaitNextHops(ctx, ingress, 2); err != nil {
		t.Fatalf("drained %s: ingress VIP next hops %v: %v", bn.n.Name, hs, err)
	}

	// notBack samples the ToR for d: node i may be a next hop of neither
	// VIP.
	notBack := func(what string, d time.Duration) {
		t.Helper()
		samples, start := 0, time.Now()
		for end := start.Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			for _, p := range []netip.Prefix{bgpPrefix(), ingress} {
				hs, err := b.tor.NextHops(p)
				if err != nil {
					t.Fatal(err)
				}
				if slices.Contains(hs, bn.n.IPv4) {
					t.Fatalf("%s: drained %s announces %s again %d ms later (next hops %v)\n%s", what, bn.n.Name, p, time.Since(start).Milliseconds(), hs, lab.Tail(bn.coredns.LogPath, 20))
				}
			}
			samples++
		}
		t.Logf("drained %s, %s: not a next hop of either VIP in %d samples over %v", bn.n.Name, what, samples, d)
	}

	// Its lbconfig restarts: the first listing.
	if err := bn.coredns.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer stopCancel()
	_ = bn.coredns.Wait(stopCtx)
	t1 := time.Now()
	b.startCoreDNS(i)
	lab.Eventually(t, 30*time.Second, 50*time.Millisecond, "restarted lbconfig on "+bn.n.Name+" rendered from the API", func() error {
		if err := running(bn.coredns); err != nil {
			return err
		}
		r, err := b.readMetric(i, "coredns_lbconfig_renders_total")
		if err != nil {
			return err
		}
		if r == "" || r == "0" {
			return fmt.Errorf("renders_total %q", r)
		}
		return nil
	})
	rendered := time.Since(t1)
	notBack("lbconfig restarted", bgpDrainRestartWindow)

	// The API server restarts: every reflector lists again.
	t2 := time.Now()
	b.kube.Restart()
	apiBack := time.Since(t2)
	notBack("API server restarted", bgpDrainRelistWindow)

	t3 := time.Now()
	labelExcluded(t, b.kube, bn.n.Name, false)
	b.waitNextHops(bn.n.Name+" undrained", 3)
	t.Logf("drain across restarts on %s: withdrawn %d ms after the label; restarted lbconfig rendered after %d ms; API server back after %d ms; a next hop again %d ms after the label came off",
		bn.n.Name, drop.Milliseconds(), rendered.Milliseconds(), apiBack.Milliseconds(), time.Since(t3).Milliseconds())
}

// metric reads one series from node i's lbconfig metrics.
func (b *bgpLab) metric(i int, series string) string {
	v, err := b.readMetric(i, series)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// readMetric is metric for a node whose lbconfig may not serve yet.
func (b *bgpLab) readMetric(i int, series string) (string, error) {
	res, err := b.nodes[i].n.Run(context.Background(), "curl", "-s", "http://127.0.0.1:9155/metrics")
	if err != nil {
		return "", fmt.Errorf("metrics of %s: %w", b.nodes[i].n.Name, err)
	}
	for _, l := range strings.Split(res.Stdout, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			return v, nil
		}
	}
	return "", nil
}
