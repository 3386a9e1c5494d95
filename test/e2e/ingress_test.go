//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/test/e2e/lab"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The ingress lab: four nodes, routers (a plain-HTTP fakeapi on the
// router's stats port, which is also its health check) on node1..node3 and
// listed as ready endpoints of the ingress service, three ingress VIPs.
// Every node runs bin/coredns (lbconfig, apiint, appswildcard, loadbalance)
// and the keepalived that reads what lbconfig writes; a real kube-apiserver
// in the lab feeds lbconfig.
const (
	ingCluster    = "inglab"
	ingDomain     = "inglab.example.com"
	ingRouterPort = 1936
	ingNodes      = 4
	ingRounds     = 3
	// ingQuiet is how long nothing may move after a node returns.
	ingQuiet = 5 * time.Second
)

var (
	ingAPIVIP = lab.Host4(100)
	ingVIPs   = []netip.Addr{lab.Host4(110), lab.Host4(111), lab.Host4(112)}
)

type ingNode struct {
	n          *lab.Node
	dir        string
	coredns    *lab.Process
	keepalived *lab.Process
	kaAll      []*lab.Process
	router     bool
	routerProc *lab.Process
}

type ingLab struct {
	t       *testing.T
	fakeapi string
	lab     *lab.Lab
	kube    *kubetest.Cluster
	nodes   []*ingNode
}

func (g *ingLab) path(i int, name string) string { return filepath.Join(g.nodes[i].dir, name) }

// routerSlice is the ingress service's EndpointSlice with a ready router on
// each named node.
func routerSlice(l *lab.Lab, names ...string) *discoveryv1.EndpointSlice {
	ready := true
	port, portName := int32(ingRouterPort), "http"
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "router-1", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "router"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
	}
	for _, name := range names {
		n := l.Node(name)
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{n.IPv4.String()},
			NodeName: &n.Name, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return s
}

func startIngressLab(t *testing.T) *ingLab {
	t.Helper()
	fakeapi := vrrpBuildFakeAPI(t)
	l := lab.New(t, lab.Config{Prefix: "ingress", Nodes: ingNodes, Client: true, TeardownGrace: time.Second})
	g := &ingLab{t: t, lab: l, kube: startLabKube(t, l), fakeapi: fakeapi}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var routers []string
	for i, n := range l.Nodes() {
		node := controlPlaneNode(n.Name, n.IPv4.String())
		if i > 0 {
			node.Labels = nil // a worker
			routers = append(routers, n.Name)
		}
		if _, err := g.kube.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.kube.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, apiServerSlice("kubernetes", 6443, l.Nodes()[0].IPv4.String()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.kube.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, routerSlice(l, routers...), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var vips []string
	for _, v := range ingVIPs {
		vips = append(vips, v.String())
	}
	base := t.TempDir()
	for i, n := range l.Nodes() {
		gn := &ingNode{n: n, dir: filepath.Join(base, n.Name), router: i > 0}
		g.nodes = append(g.nodes, gn)
		if err := os.MkdirAll(filepath.Join(gn.dir, "track"), 0o755); err != nil {
			t.Fatal(err)
		}
		if gn.router {
			g.startRouter(i)
		}
		conf := fmt.Sprintf(`.:53 {
    lbconfig {
        cluster %[1]s
        node %[2]s
        api-vip %[3]s
        ingress-vip %[4]s
        interface %[5]s
        kubeconfig %[6]s
        ingress-service default/router
        health-check api none
        health-check ingress http://127.0.0.1:%[7]d/readyz
        vrrp-guard 1s
        keepalived %[8]s
        reload keepalived pidfile %[9]s
        track-dir %[10]s
    }
    apiint %[3]s {
        zone %[11]s
    }
    appswildcard %[4]s {
        zone %[11]s
    }
    loadbalance
}
`, ingCluster, n.Name, ingAPIVIP, strings.Join(vips, " "), lab.Iface, g.kube.Kubeconfig, ingRouterPort,
			g.path(i, "keepalived.conf"), g.path(i, "keepalived.pid"), filepath.Join(gn.dir, "track"), ingDomain)
		gn.coredns = startCorefile(t, n, gn.dir, conf)
	}
	for i, gn := range g.nodes {
		lab.Eventually(t, 60*time.Second, 50*time.Millisecond, "lbconfig wrote keepalived.conf on "+gn.n.Name, func() error {
			if err := running(gn.coredns); err != nil {
				return err
			}
			b, err := os.ReadFile(g.path(i, "keepalived.conf"))
			if err != nil {
				return err
			}
			if gn.router && !strings.Contains(string(b), "_ingress-3_v4") {
				return fmt.Errorf("no ingress instances yet")
			}
			return nil
		})
	}
	for i := range g.nodes {
		g.startKeepalived(i)
	}
	return g
}

// startRouter starts node i's router: plain HTTP on every address of the
// node (the VIPs it holds too), answering its name; /readyz is its health.
func (g *ingLab) startRouter(i int) {
	gn := g.nodes[i]
	gn.routerProc = gn.n.Start("router", []string{g.fakeapi, "serve", "-http", "-name", gn.n.Name, "-listen", fmt.Sprintf(":%d", ingRouterPort)})
}

// startKeepalived starts node i's keepalived as its static pod would,
// after removing the pid files of a killed predecessor.
func (g *ingLab) startKeepalived(i int) {
	g.t.Helper()
	gn := g.nodes[i]
	for _, p := range []string{g.path(i, "keepalived.pid"), g.path(i, "vrrp.pid")} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			g.t.Fatal(err)
		}
	}
	gn.keepalived = gn.n.Start("keepalived", []string{"keepalived", "--dont-fork", "--log-console", "--log-detail",
		"--no-syslog", "--vrrp", "-f", g.path(i, "keepalived.conf"), "-p", g.path(i, "keepalived.pid"), "-r", g.path(i, "vrrp.pid")})
	gn.kaAll = append(gn.kaAll, gn.keepalived)
}

// kill kills node i's keepalived and router with SIGKILL, the VRRP child
// first (killed after its parent it would get SIGTERM and say goodbye: not a
// crash). With the router gone too, a client still sent to the node (the
// stale VIP, an old ARP entry) fails: what the client sees is the move.
func (g *ingLab) kill(i int) {
	g.t.Helper()
	b, err := os.ReadFile(g.path(i, "vrrp.pid"))
	if err != nil {
		g.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		g.t.Fatalf("vrrp.pid on %s holds %q", g.nodes[i].n.Name, b)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		g.t.Fatal(err)
	}
	for _, p := range []*lab.Process{g.nodes[i].keepalived, g.nodes[i].routerProc} {
		if err := p.Kill(); err != nil {
			g.t.Fatal(err)
		}
	}
}

// holders says, for each VIP, which nodes have it on their interface.
func (g *ingLab) holders() ([][]int, error) {
	out := make([][]int, len(ingVIPs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(g.nodes))
	for i, gn := range g.nodes {
		wg.Go(func() {
			ps, err := gn.n.Addrs()
			if err != nil {
				errs[i] = err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for v, vip := range ingVIPs {
				for _, p := range ps {
					if p.Addr() == vip {
						out[v] = append(out[v], i)
					}
				}
			}
		})
	}
	wg.Wait()
	for v := range out {
		sort.Ints(out[v])
	}
	return out, errors.Join(errs...)
}

// placement waits until every VIP is on exactly one node and returns them.
func (g *ingLab) placement(what string, bound time.Duration) []int {
	g.t.Helper()
	var at []int
	lab.Eventually(g.t, bound, 20*time.Millisecond, what, func() error {
		hs, err := g.holders()
		if err != nil {
			return err
		}
		at = at[:0]
		for v, h := range hs {
			if len(h) != 1 {
				return fmt.Errorf("%s on %v", ingVIPs[v], h)
			}
			at = append(at, h[0])
		}
		return nil
	})
	return slices.Clone(at)
}

// masters counts, per ingress VIP, the "Entering MASTER STATE" lines of its
// instance in every keepalived log of the lab: one per time a node took it.
func (g *ingLab) masters() []int {
	out := make([]int, len(ingVIPs))
	for v := range ingVIPs {
		needle := "(" + instance(v) + ") Entering MASTER STATE"
		for _, gn := range g.nodes {
			for _, p := range gn.kaAll {
				out[v] += strings.Count(p.Log(), needle)
			}
		}
	}
	return out
}

func (g *ingLab) name(i int) string { return g.nodes[i].n.Name }

// instance is the keepalived instance of ingress VIP v (its IPv4 one).
func instance(v int) string {
	group := "ingress"
	if v > 0 {
		group = fmt.Sprintf("ingress-%d", v+1)
	}
	return fmt.Sprintf("%s_%s_v4", ingCluster, group)
}

// settled waits until every router's keepalived runs every ingress
// instance out of FAULT: the claim gate has opened everywhere, so every
// node can take over.
func (g *ingLab) settled(what string) {
	g.t.Helper()
	lab.Eventually(g.t, 30*time.Second, 50*time.Millisecond, what, func() error {
		for _, gn := range g.nodes {
			if !gn.router {
				continue
			}
			log := gn.keepalived.Log()
			for v := range ingVIPs {
				best, state := -1, ""
				for _, s := range vrrpStates {
					if i := strings.LastIndex(log, "("+instance(v)+") Entering "+s+" STATE"); i > best {
						best, state = i, s
					}
				}
				if state != "MASTER" && state != "BACKUP" {
					return fmt.Errorf("%s on %s: %q", instance(v), gn.n.Name, state)
				}
			}
		}
		return nil
	})
}

// successor is the node that should take VIP v from victim: the first
// other router in v's order of preference (the routers by name, rotated by
// v), the one with the highest VRRP priority.
func (g *ingLab) successor(v, victim int) int {
	var routers []int
	for i, gn := range g.nodes {
		if gn.router {
			routers = append(routers, i)
		}
	}
	for k := range routers {
		if n := routers[(v+k)%len(routers)]; n != victim {
			return n
		}
	}
	return -1
}

// TestIngressVIPsSpread: three ingress VIPs over three router nodes start on
// three different nodes, DNS answers all three on every node and a client
// using them reaches every router; when a holder's keepalived is killed
// only its VIPs move, to a surviving router, and when it comes back nothing
// moves again (VRRP transitions counted in keepalived's own logs).
func TestIngressVIPsSpread(t *testing.T) {
	g := startIngressLab(t)
	t0 := time.Now()
	at := g.placement("each ingress VIP on exactly one node", 60*time.Second)
	t.Logf("placement %v after %d ms: %s on %s, %s on %s, %s on %s", at, time.Since(t0).Milliseconds(),
		ingVIPs[0], g.name(at[0]), ingVIPs[1], g.name(at[1]), ingVIPs[2], g.name(at[2]))
	if len(slices.Compact(slices.Sorted(slices.Values(at)))) != len(ingVIPs) || slices.Contains(at, 0) {
		t.Fatalf("placement %v: want three different router nodes (node1..node3)", at)
	}
	// The settled state holds: give a slow claim the time of the claim gate.
	time.Sleep(6 * time.Second)
	if again := g.placement("placement holds", time.Second); !slices.Equal(again, at) {
		t.Fatalf("placement moved from %v to %v with nothing failing", at, again)
	}
	if m := g.masters(); !slices.Equal(m, []int{1, 1, 1}) {
		t.Errorf("MASTER transitions %v at the start, want one per VIP", m)
	}
	g.settled("every router ready to take over")

	// DNS: every node's CoreDNS answers *.apps with the three VIPs.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, gn := range g.nodes {
		res, err := g.lab.Client().Dig(ctx, "@"+gn.n.IPv4.String(), "+short", "console-openshift-console.apps."+ingDomain, "A")
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Fields(res.Stdout)
		slices.Sort(got)
		if want := []string{ingVIPs[0].String(), ingVIPs[1].String(), ingVIPs[2].String()}; !slices.Equal(got, want) {
			t.Errorf("%s answers %v for *.apps, want %v", gn.n.Name, got, want)
		}
	}
	// The client uses every address it was given: it reaches every router.
	served := map[string]bool{}
	for _, vip := range ingVIPs {
		body, err := g.lab.Client().HTTPGet(ctx, fmt.Sprintf("http://%s/", netip.AddrPortFrom(vip, ingRouterPort)))
		if err != nil {
			t.Fatal(err)
		}
		served[strings.TrimPrefix(body, "hello from ")] = true
	}
	if len(served) != 3 || served[g.name(0)] {
		t.Errorf("the client reached %v through the three VIPs, want the three routers", served)
	}
	t.Logf("client through the VIPs the DNS gave reached %d routers: %v", len(served), served)

	// A probe per VIP, every 20 ms, for the client's view of each move.
	probes := make([]*lab.Process, len(ingVIPs))
	for v, vip := range ingVIPs {
		probes[v] = g.lab.Client().Start(fmt.Sprintf("probe-%d", v), []string{g.fakeapi, "probe", "-url",
			fmt.Sprintf("http://%s/", netip.AddrPortFrom(vip, ingRouterPort)), "-interval", "20ms", "-timeout", "500ms"})
	}

	var failovers []time.Duration
	for round := range ingRounds {
		victim := at[round%len(at)]
		moving := heldBy(at, victim)
		before := g.masters()
		kill := time.Now()
		g.kill(victim)
		moved := g.waitMoved(fmt.Sprintf("round %d", round), at, moving, victim, kill)
		// lbconfig's guard takes the stale copies off the killed node.
		after := g.placement(fmt.Sprintf("round %d: stale VIPs gone from %s", round, g.name(victim)), 15*time.Second)
		if !slices.Equal(after, at) {
			t.Fatalf("round %d: placement %v, want %v", round, after, at)
		}
		g.checkSuccessors(fmt.Sprintf("round %d", round), at, moving, victim)
		var moves []string
		for _, v := range moving {
			failovers = append(failovers, moved[v])
			moves = append(moves, fmt.Sprintf("%s → %s in %d ms", ingVIPs[v], g.name(at[v]), moved[v].Milliseconds()))
		}
		// The client's view: the outage on each moved VIP.
		var outages []string
		for _, v := range moving {
			st := ingOutage(probes[v], kill)
			outages = append(outages, fmt.Sprintf("%s: %d of %d requests failed, back after %d ms", ingVIPs[v], st.failed, st.requests, st.outage.Milliseconds()))
		}
		m := g.checkMasters(fmt.Sprintf("round %d", round), before, moving)

		// The node comes back: it must take nothing back.
		before = m
		g.startRouter(victim)
		g.startKeepalived(victim)
		g.settled(g.name(victim) + " back")
		quiet := time.Now()
		for time.Since(quiet) < ingQuiet {
			if p := g.placement("placement while "+g.name(victim)+" is back", time.Second); !slices.Equal(p, at) {
				t.Fatalf("round %d: %s came back and the placement moved from %v to %v", round, g.name(victim), at, p)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if m := g.masters(); !slices.Equal(m, before) {
			t.Errorf("round %d: MASTER transitions %v after %s came back, want %v (no move)", round, m, g.name(victim), before)
		}
		t.Logf("round %d: kill -9 keepalived and router on %s: %s; client: %s; %s back: nothing moved in %s (placement %v)",
			round, g.name(victim), strings.Join(moves, ", "), strings.Join(outages, "; "), g.name(victim), ingQuiet, at)
	}
	slices.Sort(failovers)
	t.Logf("ingress failover over %d moves: min %d ms, median %d ms, max %d ms", len(failovers),
		failovers[0].Milliseconds(), failovers[len(failovers)/2].Milliseconds(), failovers[len(failovers)-1].Milliseconds())

	g.reloadHolder(at, probes)
	g.drainRounds(at, probes, ingDrainRounds(t))
}

// ingDrainRounds is how many drain rounds TestIngressVIPsSpread runs: 2 in
// make test, INFRADNS_DRAIN_ROUNDS for the figures (10 or more).
func ingDrainRounds(t *testing.T) int { return envRounds(t, "INFRADNS_DRAIN_ROUNDS", 2) }

// drainRounds: the admin labels a VIP's holder
// exclude-from-external-load-balancers (what precedes a drain). Its lbconfig
// renders it out of the ingress groups, its keepalived drops the instances
// on the reload with a priority-0 advert and the next router in rank takes
// the VIPs (the VIP's copy on lo serves the clients still on the old MAC);
// no other node's keepalived reloads. Taking the label off moves nothing
// back (nopreempt).
func (g *ingLab) drainRounds(at []int, probes []*lab.Process, rounds int) {
	t := g.t
	t.Helper()
	var moves []time.Duration
	var failed []int
	for round := range rounds {
		victim := at[round%len(at)]
		moving := heldBy(at, victim)
		before := g.masters()
		time.Sleep(300 * time.Millisecond) // client traffic before the label
		t0 := time.Now()
		labelExcluded(t, g.kube, g.name(victim), true)
		what := fmt.Sprintf("drain %d", round+1)
		moved := g.waitMoved(what, at, moving, victim, t0)
		if after := g.placement(what+": one holder each", 5*time.Second); !slices.Equal(after, at) {
			t.Fatalf("%s: placement %v, want %v", what, after, at)
		}
		// The others kept their ranks: each VIP goes where a crash would send it.
		g.checkSuccessors(what, at, moving, victim)
		var lines []string
		for _, v := range moving {
			st := ingOutage(probes[v], t0)
			moves, failed = append(moves, moved[v]), append(failed, st.failed)
			line := fmt.Sprintf("%s → %s in %d ms, %d of %d requests failed", ingVIPs[v], g.name(at[v]), moved[v].Milliseconds(), st.failed, st.requests)
			if st.failed > 0 {
				line += fmt.Sprintf(" (last: %s; steady after %d ms)", st.lastErr, st.outage.Milliseconds())
			}
			lines = append(lines, line)
			// A hand-over loses nothing: the drained node serves the SYNs
			// still sent to its MAC (the copy on lo) and finishes the
			// connections open when the client's ARP entry flips (the new
			// holder relays them back). A client left on the old MAC (lost
			// gratuitous ARPs) would fail for seconds.
			if st.failed > 0 {
				t.Errorf("drain %d: %d requests to %s failed while it moved off %s, client steady after %d ms (last: %s); want 0 (a hand-over)",
					round+1, st.failed, ingVIPs[v], g.name(victim), st.outage.Milliseconds(), st.lastErr)
			}
		}
		g.checkMasters(what, before, moving)
		// The label comes off: the node is a backup again and takes nothing.
		labelExcluded(t, g.kube, g.name(victim), false)
		g.settled(g.name(victim) + " undrained")
		quiet := time.Now()
		for time.Since(quiet) < 2*time.Second {
			if p := g.placement("placement after "+g.name(victim)+" is undrained", time.Second); !slices.Equal(p, at) {
				t.Fatalf("drain %d: the label came off %s and the placement moved from %v to %v", round+1, g.name(victim), at, p)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("drain %d: %s labelled %s: %s", round+1, g.name(victim), kube.LabelExcludeFromLB, strings.Join(lines, "; "))
	}
	slices.Sort(failed)
	t.Logf("%d × drain (ms min/median/max): VIP moved %s; failed requests %d/%d/%d", rounds,
		vrrpSummary(moves), failed[0], failed[len(failed)/2], failed[len(failed)-1])
}

// reloadHolder reloads the Corefile of VIP 0's holder (SIGUSR1, what the
// reload plugin does on a change, and an upgrade of the pod's config): the
// new lbconfig takes over the files and keepalived, and nothing moves.
func (g *ingLab) reloadHolder(at []int, probes []*lab.Process) {
	t := g.t
	t.Helper()
	h := at[0]
	gn := g.nodes[h]
	before := g.masters()
	t0 := time.Now()
	if err := gn.coredns.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 10*time.Second, 50*time.Millisecond, "Corefile reloaded on "+gn.n.Name, func() error {
		if !strings.Contains(gn.coredns.Log(), "Reloading complete") {
			return fmt.Errorf("no completed reload in the log yet")
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if p := g.placement("placement after the reload", time.Second); !slices.Equal(p, at) {
		t.Fatalf("Corefile reload on %s moved the placement from %v to %v", gn.n.Name, at, p)
	}
	if m := g.masters(); !slices.Equal(m, before) {
		t.Errorf("Corefile reload on %s: MASTER transitions %v, want %v (no move)", gn.n.Name, m, before)
	}
	var lines []string
	for v := range ingVIPs {
		st := ingOutage(probes[v], t0)
		lines = append(lines, fmt.Sprintf("%s: %d of %d failed", ingVIPs[v], st.failed, st.requests))
		if st.failed > 0 {
			t.Errorf("Corefile reload on %s: %d requests to %s failed, want 0", gn.n.Name, st.failed, ingVIPs[v])
		}
	}
	t.Logf("Corefile reload on %s (holder of %s): no VRRP transition; %s", gn.n.Name, ingVIPs[0], strings.Join(lines, ", "))
}

// heldBy lists the VIPs (their indexes) that node i holds in placement at.
func heldBy(at []int, i int) []int {
	var out []int
	for v, h := range at {
		if h == i {
			out = append(out, v)
		}
	}
	return out
}

// waitMoved watches every VIP until each of moving is on a router other
// than victim; any other VIP that moves meanwhile fails the test at once.
// It records the new holders in at and returns each move's time since from.
func (g *ingLab) waitMoved(what string, at, moving []int, victim int, from time.Time) map[int]time.Duration {
	t := g.t
	t.Helper()
	moved := map[int]time.Duration{}
	lab.Eventually(t, vrrpMoveBound, 10*time.Millisecond, fmt.Sprintf("%s: VIPs of %s move", what, g.name(victim)), func() error {
		hs, err := g.holders()
		if err != nil {
			return err
		}
		for v, h := range hs {
			if !slices.Contains(moving, v) {
				if !slices.Equal(h, []int{at[v]}) {
					t.Fatalf("%s: %s moved from %s to %v though %s held it", what, ingVIPs[v], g.name(at[v]), h, g.name(at[v]))
				}
				continue
			}
			if _, done := moved[v]; done {
				continue
			}
			for _, n := range h {
				if n != victim {
					if n == 0 {
						t.Fatalf("%s: %s moved to %s, which has no router", what, ingVIPs[v], g.name(n))
					}
					moved[v] = time.Since(from)
					at[v] = n
				}
			}
		}
		if len(moved) < len(moving) {
			return fmt.Errorf("holders %v", hs)
		}
		return nil
	})
	return moved
}

// checkSuccessors: each moved VIP went to the next router in its order of
// preference.
func (g *ingLab) checkSuccessors(what string, at, moving []int, victim int) {
	g.t.Helper()
	for _, v := range moving {
		if want := g.successor(v, victim); at[v] != want {
			g.t.Errorf("%s: %s went to %s, want %s (next in its order of preference)", what, ingVIPs[v], g.name(at[v]), g.name(want))
		}
	}
}

// checkMasters: each moved VIP has one MASTER transition more than before,
// the others none; it returns the counts.
func (g *ingLab) checkMasters(what string, before, moving []int) []int {
	g.t.Helper()
	m := g.masters()
	for v := range ingVIPs {
		want := before[v]
		if slices.Contains(moving, v) {
			want++
		}
		if m[v] != want {
			g.t.Errorf("%s: %s has %d MASTER transitions, want %d", what, ingVIPs[v], m[v], want)
		}
	}
	return m
}

// ingOutage waits until the probe has been served vrrpSteadyOK times in a
// row since from, and reports its failures.
func ingOutage(p *lab.Process, from time.Time) vrrpClientStats {
	var st vrrpClientStats
	deadline := time.Now().Add(vrrpClientBound)
	for time.Now().Before(deadline) {
		var rs []fakeapiResult
		for _, r := range parseFakeAPI(p.Log()) {
			if !r.start.Before(from) {
				rs = append(rs, r)
			}
		}
		st = vrrpClientStats{requests: len(rs)}
		last := -1
		for i, r := range rs {
			if !r.ok {
				st.failed++
				last = i
				st.lastErr = fmt.Sprintf("%s after %d ms", r.detail, r.end.Sub(r.start).Milliseconds())
			}
		}
		if len(rs)-last-1 >= vrrpSteadyOK {
			if last >= 0 {
				st.outage = rs[last+1].end.Sub(from)
			}
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
	return st
}
