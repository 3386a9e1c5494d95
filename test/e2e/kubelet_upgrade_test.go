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

	"github.com/infradns/infradns/internal/ecmprelay"
	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/internal/nodecfg"
	"github.com/infradns/infradns/test/e2e/lab"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// klNextImage is the image the rolling upgrade moves to: the same content
// under another name, which is all kubelet sees of an upgrade (a changed
// manifest, so every static pod is replaced).
const klNextImage = "quay.io/infradns/infradns:e2e-next"

// klHolderChange is one change of the set of nodes holding the API VIP.
type klHolderChange struct {
	at      time.Time
	holders []string
}

// klWatchHolders records every change of who holds vip on the cluster
// interface until stop is called, which returns the changes (the first is
// the state at the start). It follows the nodes' address events over
// netlink: polling with `ip` every few milliseconds was itself a load on
// the lab's two cores.
func klWatchHolders(t *testing.T, nodes []*klNode, vip netip.Addr) (stop func() []klHolderChange) {
	t.Helper()
	var (
		mu      sync.Mutex
		changes []klHolderChange
		held    = map[string]bool{}
		done    = make(chan struct{})
		wg      sync.WaitGroup
	)
	record := func(name string, has bool) {
		mu.Lock()
		defer mu.Unlock()
		held[name] = has
		var hs []string
		for _, k := range nodes {
			if held[k.n.Name] {
				hs = append(hs, k.n.Name)
			}
		}
		if len(changes) == 0 || !slices.Equal(changes[len(changes)-1].holders, hs) {
			changes = append(changes, klHolderChange{time.Now(), hs})
		}
	}
	for _, k := range nodes {
		ns, err := netns.GetFromPath("/run/netns/" + k.n.NS)
		if err != nil {
			t.Fatal(err)
		}
		h, err := netlink.NewHandleAt(ns)
		if err != nil {
			ns.Close()
			t.Fatal(err)
		}
		link, err := h.LinkByName(lab.Iface)
		h.Close()
		if err != nil {
			ns.Close()
			t.Fatal(err)
		}
		ch := make(chan netlink.AddrUpdate, 1024)
		err = netlink.AddrSubscribeWithOptions(ch, done, netlink.AddrSubscribeOptions{Namespace: &ns, ListExisting: true, ReceiveBufferSize: 1 << 20,
			ErrorCallback: func(err error) {
				select {
				case <-done: // the subscription's end
				default:
					t.Errorf("%s: address events: %v (the holders' record has a gap)", k.n.Name, err)
				}
			}})
		ns.Close()
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range ch {
				if a, ok := netip.AddrFromSlice(u.LinkAddress.IP); ok && a.Unmap() == vip && u.LinkIndex == link.Attrs().Index {
					record(k.n.Name, u.NewAddr)
				}
			}
		}()
	}
	var once sync.Once
	end := func() { once.Do(func() { close(done); wg.Wait() }) }
	t.Cleanup(end) // a test that fails before stop
	return func() []klHolderChange {
		end()
		mu.Lock()
		defer mu.Unlock()
		return changes
	}
}

// klRollingUpgrade runs the guide's upgrade runbook as written: the new
// image in the cluster file, then `infradns install` on one node at a
// time, the VIP's holder last, each node's pods Ready and doctor passing
// before the next. A client opens a new TLS connection to the real
// apiserver through the API VIP every 20 ms the whole time, and every node
// resolves cluster names through its own /etc/resolv.conf every 50 ms:
// neither may lose a request, and each node gives the VIP up at most once.
func klRollingUpgrade(ctx context.Context, t *testing.T, l *lab.Lab, kube *kubetest.Cluster, nodes []*klNode, clusterYAML func(image string) string, podNames []string, vips klVIPs) {
	t.Helper()
	infradns := lab.Binary(t, "infradns")
	fakeapi := vrrpBuildFakeAPI(t)
	for _, k := range nodes {
		if _, err := k.ctr(ctx, "images", "tag", klImage, klNextImage); err != nil {
			t.Fatal(err)
		}
	}
	// The namespace of the status Leases, as `infradns identities` leaves
	// a cluster (doctor checks that lbconfig may write there); the pools'
	// ConfigMap may have made it already.
	if _, err := kube.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nodecfg.DefaultStatusLeaseNamespace}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	next := filepath.Join(t.TempDir(), "cluster.yaml")
	writeFile(t, next, clusterYAML(klNextImage))

	status, upgrade := klGuideUpgrade(t)
	run := func(k *klNode, argv []string) (string, error) {
		return k.run(ctx, append([]string{"env", "KUBECONFIG=/etc/kubernetes/infradns/kubeconfig", infradns}, argv...)...)
	}
	order := slices.Clone(nodes)
	if vips.tor == nil {
		holder := klOneHolder(ctx, t, nodes, kube)
		// The runbook's first step names the holder (from the status Leases
		// every holder's lbconfig writes).
		lab.Eventually(t, 60*time.Second, 500*time.Millisecond, "infradns status names "+holder.n.Name+" as the API VIP's holder", func() error {
			out, err := run(nodes[0], klGuideArgs(status, next))
			if err != nil {
				return err
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, vips.api.String()) && slices.Contains(strings.Fields(line), holder.n.Name) {
					t.Logf("infradns status, the runbook's first step:\n%s", out)
					return nil
				}
			}
			return fmt.Errorf("status:\n%s", out)
		})
		order = slices.DeleteFunc(order, func(k *klNode) bool { return k == holder })
		order = append(order, holder) // the runbook: a VIP's holder last
	} else {
		// Over BGP every control-plane node announces the API VIP: no
		// holder goes last.
		klAllNextHops(ctx, t, kube, vips.tor, vips.api, nodes)
		out, err := run(nodes[0], klGuideArgs(status, next))
		if err != nil {
			t.Fatalf("infradns status: %v\n%s", err, out)
		}
		t.Logf("infradns status, the runbook's first step:\n%s", out)
	}

	apiName, ingName := "api-int."+domain+".", "upgrade.apps."+domain+"."
	want := map[string]string{apiName: vips.api.String(), ingName: vips.ingress.String()}
	var names []string
	for _, k := range nodes {
		name := k.n.Name + "." + domain + "."
		want[name] = k.n.IPv4.String()
		names = append(names, name)
	}
	names = append([]string{apiName, ingName}, names...)
	resolvers := map[*klNode]*lab.Process{}
	for _, k := range nodes {
		t.Logf("%s's resolv.conf: %q", k.n.Name, strings.TrimSpace(string(mustRead(t, k.path("/etc/resolv.conf")))))
		resolvers[k] = k.start(t, "resolve-probe", fakeapi, "resolve", "-names", strings.Join(names, ","), "-interval", "50ms", "-timeout", "3s")
	}
	// kubelet deletes a replaced pod's logs: follow the old pods' logs of
	// keepalived and lbconfig for the record (kept when the test fails).
	var oldLogs []*lab.Process
	for _, k := range nodes {
		logs, _ := filepath.Glob(k.path("/var/log/pods/*_infradns-*/*/*.log"))
		var mine []string
		for _, f := range logs {
			if strings.Contains(f, "/keepalived/") || strings.Contains(f, "/lbconfig/") || strings.Contains(f, "/haproxy/") {
				mine = append(mine, f)
			}
		}
		if len(mine) > 0 {
			oldLogs = append(oldLogs, l.Client().Start(k.n.Name+"-old-pod-logs", append([]string{"tail", "-F", "-n", "0"}, mine...)))
		}
	}
	url := fmt.Sprintf("https://%s/readyz", netip.AddrPortFrom(vips.api, vrrpLBPort))
	client := l.Client().Start("upgrade-probe", []string{fakeapi, "probe", "-url", url, "-interval", "20ms", "-timeout", "1s", "-bearer", kube.Token})
	var stopWatch func() []klHolderChange
	if vips.tor == nil {
		stopWatch = klWatchHolders(t, nodes, vips.api)
	} else {
		stopWatch = klWatchNextHops(t, vips.tor, nodes, vips.api)
	}
	// Both probes are answering before the first node moves.
	lab.Eventually(t, 20*time.Second, 100*time.Millisecond, "the probes answer", func() error {
		if n := len(parseFakeAPI(client.Log())); n < 25 {
			return fmt.Errorf("client: %d requests", n)
		}
		for k, p := range resolvers {
			if n := len(parseFakeAPI(p.Log())); n < 10 {
				return fmt.Errorf("%s: %d lookups", k.n.Name, n)
			}
		}
		return nil
	})

	start := time.Now()
	took := map[string]time.Duration{}
	for _, k := range order {
		before, err := k.pods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		// -node: the lab nodes' host name is not their Node name.
		if out, err := run(k, append(klGuideArgs(upgrade[0], next), "-node", k.n.Name)); err != nil {
			t.Fatalf("install on %s: %v", k.n.Name, err)
		} else if k == order[0] {
			t.Logf("install on %s:\n%s", k.n.Name, out)
		}
		lab.Eventually(t, klBound, 250*time.Millisecond, k.n.Name+": every pod replaced, on "+klNextImage+" and Ready", func() error {
			ps, err := k.pods(ctx)
			if err != nil {
				return err
			}
			for _, name := range podNames {
				p, ok := ps[name]
				if !ok || !p.Ready {
					return fmt.Errorf("%s not Ready", name)
				}
				for c, img := range p.Images {
					if img != klNextImage {
						return fmt.Errorf("%s/%s: image %s", name, c, img)
					}
					if id := p.IDs[c]; id == "" || id == before[name].IDs[c] {
						return fmt.Errorf("%s/%s: container %q not replaced", name, c, id)
					}
				}
			}
			return nil
		})
		if out, err := run(k, append(klGuideArgs(upgrade[1], next), "-node", k.n.Name)); err != nil {
			t.Errorf("doctor on %s after its upgrade: %v\n%s", k.n.Name, err, out)
		}
		took[k.n.Name] = time.Since(began)
		if vips.tor != nil {
			klRelayState(t, nodes)
		}
		t.Logf("%s upgraded: pods replaced, Ready and doctor passing %v after install", k.n.Name, took[k.n.Name].Round(100*time.Millisecond))
	}
	if vips.tor == nil {
		klOneHolder(ctx, t, nodes, kube)
	} else {
		klAllNextHops(ctx, t, kube, vips.tor, vips.api, nodes)
	}
	// The last lookups and requests of the last node's change.
	time.Sleep(time.Second)
	changes := stopWatch()
	if err := client.Stop(2 * time.Second); err != nil && !client.Exited() {
		t.Error(err)
	}
	for _, p := range resolvers {
		if err := p.Stop(2 * time.Second); err != nil && !p.Exited() {
			t.Error(err)
		}
	}
	t.Logf("rolling upgrade of %d nodes in %v", len(nodes), time.Since(start).Round(100*time.Millisecond))
	if vips.tor != nil {
		// How each old lbconfig left: told its peers, withdrew, held the
		// VIPs for the drain (whichever of the stopping file and the
		// SIGTERM came first).
		for _, p := range oldLogs {
			t.Logf("%s, how it left:\n%s", p.Name, grepLines(p.Log(), "leaving [", "withdrew", "letting the VIPs go"))
		}
	}

	// The client: every request through the API VIP answered.
	rs := parseFakeAPI(client.Log())
	var failed []string
	for _, r := range rs {
		if !r.ok {
			failed = append(failed, fmt.Sprintf("+%v %s", r.start.Sub(start).Round(time.Millisecond), r.detail))
		}
	}
	t.Logf("API VIP client: %d requests (a new TLS connection every 20 ms to the apiserver's /readyz), %d failed", len(rs), len(failed))
	if len(rs) < 100 || len(failed) > 0 {
		t.Errorf("API VIP client: %d requests, %d failed: %v", len(rs), len(failed), failed)
	}

	// Every node's resolver: every lookup answered, and right.
	for _, k := range nodes {
		ls := parseFakeAPI(resolvers[k].Log())
		var bad []string
		var slowest time.Duration
		for _, r := range ls {
			slowest = max(slowest, r.end.Sub(r.start))
			name, addrs, _ := strings.Cut(r.detail, "=")
			if !r.ok || addrs != want[name] {
				bad = append(bad, fmt.Sprintf("+%v %s (took %v)", r.start.Sub(start).Round(time.Millisecond), r.detail, r.end.Sub(r.start).Round(time.Millisecond)))
			}
		}
		t.Logf("%s's resolver: %d lookups of %d names, %d failed or wrong, slowest %v", k.n.Name, len(ls), len(names), len(bad), slowest.Round(time.Millisecond))
		if len(ls) < 50 || len(bad) > 0 {
			t.Errorf("%s's resolver: %d lookups, %d failed or wrong: %v", k.n.Name, len(ls), len(bad), bad)
		}
	}

	// The VIP: a node gives it up at most once (over BGP: leaves the ToR's
	// next hops at most once), and over VRRP two nodes hold it only
	// within issue 28's window for a paused holder. The lab's three
	// nodes share two cores: while one node's containers start, another's
	// keepalived can miss the master-down interval (191 ms); the node that
	// took over then keeps the VIP (its holder boost), and the starved one
	// drops it when it next runs.
	const doubleWindow = 500 * time.Millisecond
	gaveUp := map[string]int{}
	var trace []string
	for i, c := range changes {
		trace = append(trace, fmt.Sprintf("+%v %v", c.at.Sub(start).Round(time.Millisecond), c.holders))
		if vips.tor == nil && len(c.holders) > 1 {
			end := time.Now()
			if i+1 < len(changes) {
				end = changes[i+1].at
			}
			if d := end.Sub(c.at); d >= doubleWindow {
				t.Errorf("%v held the API VIP together for %v (at most %v)", c.holders, d.Round(time.Millisecond), doubleWindow)
			} else {
				t.Logf("%v held the API VIP together for %v (within %v)", c.holders, d.Round(time.Millisecond), doubleWindow)
			}
		}
		if i > 0 {
			for _, h := range changes[i-1].holders {
				if !slices.Contains(c.holders, h) {
					gaveUp[h]++
				}
			}
		}
	}
	t.Logf("API VIP holders during the upgrade: %v; moves away by node: %v", trace, gaveUp)
	for name, n := range gaveUp {
		if n > 1 {
			t.Errorf("%s gave the API VIP up %d times in one upgrade (want at most 1): %v", name, n, trace)
		}
	}
	wantEnd := 1
	if vips.tor != nil {
		wantEnd = len(nodes)
	}
	if len(changes) == 0 || len(changes[len(changes)-1].holders) != wantEnd {
		t.Errorf("the API VIP's holders at the end: %v", trace)
	}
}

// klGuideUpgrade reads the guide's upgrade runbook: its first command
// (infradns status, once) and the two run on each node in turn (install,
// then doctor), each checked to be the one the runbook means.
func klGuideUpgrade(t *testing.T) (status string, perNode []string) {
	t.Helper()
	root, err := lab.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc := string(mustRead(t, filepath.Join(root, "docs/operator-guide.md")))
	i := strings.Index(doc, "**Upgrade (new image).**")
	if i < 0 {
		t.Fatal("docs/operator-guide.md: no upgrade runbook (**Upgrade (new image).**)")
	}
	blocks := shBlocks(doc[i:])
	if len(blocks) == 0 {
		t.Fatal("docs/operator-guide.md: the upgrade runbook has no sh block")
	}
	var cmds []string
	for _, line := range strings.Split(blocks[0], "\n") {
		if c, _, _ := strings.Cut(line, "#"); strings.TrimSpace(c) != "" {
			cmds = append(cmds, strings.TrimSpace(c))
		}
	}
	want := []string{"infradns status", "infradns install -f cluster.yaml -role control-plane", "infradns doctor -f cluster.yaml -role control-plane"}
	if !slices.Equal(cmds, want) {
		t.Fatalf("the guide's upgrade runbook is %q; this test runs %q (change both)", cmds, want)
	}
	return cmds[0], cmds[1:]
}

// klGuideArgs are the arguments of a runbook command, the cluster file at
// file.
func klGuideArgs(cmd, file string) []string {
	args := strings.Fields(strings.TrimPrefix(cmd, "infradns "))
	for i, a := range args {
		if a == "cluster.yaml" {
			args[i] = file
		}
	}
	return args
}

// klVIPs are the VIPs a real-kubelet lab's rolling upgrade checks, and how
// the API VIP is held: by one node over VRRP (tor nil), or announced by
// every control-plane node to tor over BGP.
type klVIPs struct {
	api, ingress netip.Addr
	tor          *lab.ToR
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
	klServesAPI(ctx, t, nodes[0].n.Lab().Client(), kube, vip)
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

// klRelayState logs each node's hand-over relay (BGP): its nft counters
// and the neighbours its device sends to, for the record of a failed run.
func klRelayState(t *testing.T, nodes []*klNode) {
	t.Helper()
	for _, k := range nodes {
		nft, _ := exec.Command("ip", "netns", "exec", k.n.NS, "nft", "list", "table", "ip", ecmprelay.Table).CombinedOutput()
		neigh, _ := exec.Command("ip", "-n", k.n.NS, "neigh", "show", "dev", ecmprelay.Device).CombinedOutput()
		fdb, _ := exec.Command("bridge", "-n", k.n.NS, "fdb", "show", "dev", ecmprelay.Device).CombinedOutput()
		t.Logf("%s's relay:\n%s\nneighbours: %s\nfdb: %s", k.n.Name, nft, neigh, fdb)
	}
}

// grepLines are the lines of s that contain one of subs.
func grepLines(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if slices.ContainsFunc(subs, func(sub string) bool { return strings.Contains(l, sub) }) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
