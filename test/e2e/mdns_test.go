//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/test/e2e/lab"
)

// mdnsBound is how long any mDNS change may take before a test fails. The
// target is under a second; the bound is generous because two shared cores
// make the timing noisy, and the measured figures are logged instead.
const mdnsBound = 10 * time.Second

// mdnsCorefile writes a node resolver that serves node names from mDNS only:
// with no other infradns plugin in the block, a name mdnsnodes does not know
// is NXDOMAIN, so absence is observable.
func mdnsCorefile(t *testing.T, dnsPort, readyPort, promPort int, keyFile string) string {
	t.Helper()
	key := ""
	if keyFile != "" {
		key = "\n        key " + keyFile
	}
	body := fmt.Sprintf(`.:%d {
    prometheus :%d
    ready :%d
    mdnsnodes {
        zone %s
        cluster ocp4
        interface eth0%s
    }
}
`, dnsPort, promPort, readyPort, domain, key)
	p := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startMDNSResolvers starts bin/coredns with corefile on every node at once and
// waits until all of them report ready on readyPort (mdnsnodes is ready one
// query window after its first query).
func startMDNSResolvers(t *testing.T, nodes []*lab.Node, name, corefile string, readyPort int) {
	t.Helper()
	procs := make([]*lab.Process, len(nodes))
	for i, n := range nodes {
		procs[i] = n.Start(name, []string{lab.Binary(t, "coredns"), "-conf", corefile})
	}
	for i, n := range nodes {
		p := procs[i]
		url := fmt.Sprintf("http://127.0.0.1:%d/ready", readyPort)
		lab.Eventually(t, 20*time.Second, 50*time.Millisecond, name+" ready on "+n.Name, func() error {
			if p.Exited() {
				return fmt.Errorf("%s exited: %v\n%s", name, p.Err(), lab.Tail(p.LogPath, 20))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, err := n.HTTPGet(ctx, url)
			return err
		})
	}
}

// mdnsPublisherArgs is the publisher command line of a cluster node.
func mdnsPublisherArgs(t *testing.T, extra ...string) []string {
	return append([]string{lab.Binary(t, "mdns-publisher"), "--interface", lab.Iface, "--cluster", "ocp4"}, extra...)
}

// mdnsAnswer is what a node's resolver said about one name and type.
type mdnsAnswer struct {
	rcode string
	addrs []netip.Addr
}

func (a mdnsAnswer) String() string { return fmt.Sprintf("%s %v", a.rcode, a.addrs) }

var mdnsStatusRE = regexp.MustCompile(`status: ([A-Z]+),`)

// mdnsLookup asks the resolver on port of node from (over loopback, inside the
// node) for name and qtype, with one short try so that polling stays fast.
func mdnsLookup(ctx context.Context, from *lab.Node, port int, name, qtype string) (mdnsAnswer, error) {
	res, err := from.Run(ctx, "dig", "+time=1", "+tries=1", "+noall", "+comments", "+answer",
		"-p", strconv.Itoa(port), "@127.0.0.1", name, qtype)
	if err != nil {
		return mdnsAnswer{}, err
	}
	m := mdnsStatusRE.FindStringSubmatch(res.Stdout)
	if m == nil {
		return mdnsAnswer{}, fmt.Errorf("dig %s %s on %s: no status in %q", name, qtype, from.Name, res.Stdout)
	}
	a := mdnsAnswer{rcode: m[1]}
	for _, line := range strings.Split(res.Stdout, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || strings.HasPrefix(line, ";") || f[3] != qtype {
			continue
		}
		ip, err := netip.ParseAddr(f[4])
		if err != nil {
			return mdnsAnswer{}, fmt.Errorf("dig %s %s on %s: bad address in %q", name, qtype, from.Name, line)
		}
		a.addrs = append(a.addrs, ip)
	}
	slices.SortFunc(a.addrs, netip.Addr.Compare)
	return a, nil
}

// mdnsName is a node's name in the cluster domain.
func mdnsName(label string) string { return label + "." + domain }

// mdnsExactly is a check that the answer is NOERROR with exactly want.
func mdnsExactly(want ...netip.Addr) func(mdnsAnswer) error {
	slices.SortFunc(want, netip.Addr.Compare)
	return func(a mdnsAnswer) error {
		if a.rcode != "NOERROR" || !slices.Equal(a.addrs, want) {
			return fmt.Errorf("got %v, want NOERROR %v", a, want)
		}
		return nil
	}
}

// mdnsHas is a check that the answer is NOERROR and includes addr.
func mdnsHas(addr netip.Addr) func(mdnsAnswer) error {
	return func(a mdnsAnswer) error {
		if a.rcode != "NOERROR" || !slices.Contains(a.addrs, addr) {
			return fmt.Errorf("got %v, want NOERROR with %v", a, addr)
		}
		return nil
	}
}

func mdnsNXDOMAIN(a mdnsAnswer) error {
	if a.rcode != "NXDOMAIN" || len(a.addrs) != 0 {
		return fmt.Errorf("got %v, want NXDOMAIN", a)
	}
	return nil
}

// mdnsSeen brackets when a poller first saw a change, from the start of the
// measurement: after lo (the end of its last poll that did not see it; dig
// sends its query at the end of its run, after process start-up) and at most
// hi (the end of the first poll that did).
type mdnsSeen struct{ lo, hi time.Duration }

func (s mdnsSeen) String() string {
	return fmt.Sprintf("%d-%d ms", s.lo.Milliseconds(), s.hi.Milliseconds())
}

// mdnsWaitAll polls name/qtype on the resolver of every observer in parallel
// until check holds on all of them, and returns, per observer, when it first
// held. It never touches t, so it may run on any goroutine; failures come
// back as the error.
func mdnsWaitAll(ctx context.Context, start time.Time, observers []*lab.Node, port int, name, qtype string, check func(mdnsAnswer) error) ([]mdnsSeen, error) {
	ctx, cancel := context.WithDeadline(ctx, start.Add(mdnsBound))
	defer cancel()
	took := make([]mdnsSeen, len(observers))
	errs := make([]error, len(observers))
	var wg sync.WaitGroup
	for i, n := range observers {
		wg.Go(func() {
			var last error
			for {
				a, err := mdnsLookup(ctx, n, port, name, qtype)
				if err == nil {
					if err = check(a); err == nil {
						took[i].hi = time.Since(start)
						return
					}
				}
				took[i].lo = time.Since(start)
				if ctx.Err() == nil || last == nil {
					last = err
				}
				select {
				case <-ctx.Done():
					errs[i] = fmt.Errorf("%s on %s after %v: %w", qtype, n.Name, mdnsBound, last)
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
	return took, errors.Join(errs...)
}

// mdnsSlowest is when a change had been seen everywhere: the slowest
// observer's bracket.
func mdnsSlowest(ss []mdnsSeen) mdnsSeen {
	var m mdnsSeen
	for _, s := range ss {
		m.lo, m.hi = max(m.lo, s.lo), max(m.hi, s.hi)
	}
	return m
}

func mdnsMS(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// mdnsSpread formats min/median/max of the upper and of the lower bounds.
func mdnsSpread(ss []mdnsSeen) string {
	f := func(get func(mdnsSeen) time.Duration) string {
		ds := make([]time.Duration, len(ss))
		for i, s := range ss {
			ds[i] = get(s)
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return fmt.Sprintf("%d/%d/%d", ds[0].Milliseconds(), ds[len(ds)/2].Milliseconds(), ds[len(ds)-1].Milliseconds())
	}
	return fmt.Sprintf("at most %s ms, at least %s ms (min/median/max, n=%d)",
		f(func(s mdnsSeen) time.Duration { return s.hi }), f(func(s mdnsSeen) time.Duration { return s.lo }), len(ss))
}

// mdnsOthers is nodes without n.
func mdnsOthers(nodes []*lab.Node, n *lab.Node) []*lab.Node {
	return slices.DeleteFunc(slices.Clone(nodes), func(o *lab.Node) bool { return o == n })
}

// TestMDNSFiveNodes runs the publisher and an mdnsnodes resolver on five
// nodes and checks the full mesh of names, then measures what the issue
// promises to keep under a second: a node joining, a node leaving (SIGTERM,
// goodbye) and a node's address changing, each until every other node's
// resolver answers accordingly. Only correctness within mdnsBound is
// asserted; the timings are logged.
func TestMDNSFiveNodes(t *testing.T) {
	testStart := time.Now()
	l := lab.New(t, lab.Config{Prefix: "mdns5", Nodes: 5, TeardownGrace: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	nodes := l.Nodes()
	corefile := mdnsCorefile(t, 53, readyPort, 9153, "")
	startMDNSResolvers(t, nodes, "coredns", corefile, readyPort)
	for _, n := range nodes {
		n.Start("mdns-publisher", mdnsPublisherArgs(t))
	}

	meshStart := time.Now()
	checkMesh := func(t *testing.T, from []*lab.Node, targets []*lab.Node) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, len(targets))
		for i, target := range targets {
			wg.Go(func() {
				_, err4 := mdnsWaitAll(ctx, time.Now(), mdnsOthers(from, target), 53, mdnsName(target.Name), "A", mdnsExactly(target.IPv4))
				_, err6 := mdnsWaitAll(ctx, time.Now(), mdnsOthers(from, target), 53, mdnsName(target.Name), "AAAA", mdnsExactly(target.IPv6))
				errs[i] = errors.Join(err4, err6)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("Node names not resolved everywhere:\n%v", err)
		}
	}
	checkMesh(t, nodes, nodes)
	t.Logf("Full mesh (5 nodes x 4 others x A/AAAA) resolved %v after the publishers started", time.Since(meshStart).Round(time.Millisecond))
	// The figures below include up to one poll (a dig process in each of five
	// namespaces at once); this says how coarse that makes them.
	pollStart := time.Now()
	if _, err := mdnsWaitAll(ctx, pollStart, nodes, 53, mdnsName(nodes[0].Name), "A", mdnsExactly(nodes[0].IPv4)); err != nil {
		t.Fatal(err)
	}
	t.Logf("measure: one parallel poll of 5 resolvers takes %s (the resolution of the figures below)", mdnsMS(time.Since(pollStart)))

	// Each round adds a fresh node (a genuinely new name, as a scale-up
	// would) and then stops it again.
	const rounds = 3
	var joins, leaves []mdnsSeen
	for r := range rounds {
		late := l.AddNode(fmt.Sprintf("late%d", r))
		if r == 0 {
			// The first late node is a full node: its own resolver must learn
			// the nodes that were there before it (by its first query).
			startMDNSResolvers(t, []*lab.Node{late}, "coredns", corefile, readyPort)
		}
		start := time.Now()
		pub := late.Start("mdns-publisher", mdnsPublisherArgs(t))
		took, err := mdnsWaitAll(ctx, start, nodes, 53, mdnsName(late.Name), "A", mdnsExactly(late.IPv4))
		if err != nil {
			t.Fatalf("Round %d: %s not resolvable on every node: %v", r, late.Name, err)
		}
		joins = append(joins, mdnsSlowest(took))
		t.Logf("measure: round %d: join of %s resolvable (A) on all 5 others after %v (per node %v)", r, late.Name, mdnsSlowest(took), took)
		if r == 0 {
			checkMesh(t, append(slices.Clone(nodes), late), nodes)
			t.Logf("The late node's resolver serves the 5 earlier nodes")
		}

		start = time.Now()
		if err := pub.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		took, err = mdnsWaitAll(ctx, start, nodes, 53, mdnsName(late.Name), "A", mdnsNXDOMAIN)
		if err != nil {
			t.Fatalf("Round %d: %s still resolvable after its SIGTERM: %v", r, late.Name, err)
		}
		leaves = append(leaves, mdnsSlowest(took))
		t.Logf("measure: round %d: goodbye of %s NXDOMAIN on all 5 others after %v (per node %v)", r, late.Name, mdnsSlowest(took), took)
		waitCtx, waitCancel := context.WithTimeout(ctx, 5*time.Second)
		err = pub.Wait(waitCtx)
		waitCancel()
		if err != nil {
			t.Fatalf("Round %d: publisher on %s did not exit cleanly on SIGTERM: %v\n%s", r, late.Name, err, lab.Tail(pub.LogPath, 10))
		}
		if !strings.Contains(pub.Log(), "goodbye sent") {
			t.Fatalf("Round %d: publisher on %s exited without logging its goodbye:\n%s", r, late.Name, lab.Tail(pub.LogPath, 10))
		}
	}
	t.Logf("measure: join %s; goodbye %s", mdnsSpread(joins), mdnsSpread(leaves))

	// Address change on a running node: the publisher notices within its
	// 250 ms poll and re-announces with the cache-flush bit; the old address
	// goes one second after the flushing announcement (RFC 6762 10.2).
	var changes, flushes []mdnsSeen
	mover := nodes[4]
	for r, host := range []int{150, 151, 152} {
		old, addr := mover.IPv4, lab.Host4(host)
		start := time.Now()
		if err := mover.ReplaceAddr(netip.PrefixFrom(old, 24), netip.PrefixFrom(addr, 24)); err != nil {
			t.Fatal(err)
		}
		took, err := mdnsWaitAll(ctx, start, mdnsOthers(nodes, mover), 53, mdnsName(mover.Name), "A", mdnsHas(addr))
		if err != nil {
			t.Fatalf("Round %d: new address %v of %s not served everywhere: %v", r, addr, mover.Name, err)
		}
		changes = append(changes, mdnsSlowest(took))
		took, err = mdnsWaitAll(ctx, start, mdnsOthers(nodes, mover), 53, mdnsName(mover.Name), "A", mdnsExactly(addr))
		if err != nil {
			t.Fatalf("Round %d: old address %v of %s still served: %v", r, old, mover.Name, err)
		}
		flushes = append(flushes, mdnsSlowest(took))
		t.Logf("measure: round %d: %s %v -> %v: new address served on all 4 others after %v, old one gone after %v",
			r, mover.Name, old, addr, changes[r], flushes[r])
	}
	t.Logf("measure: address change, new served %s; old gone %s", mdnsSpread(changes), mdnsSpread(flushes))
	// The IPv6 address did not change and must not have been flushed with
	// the IPv4 one.
	if _, err := mdnsWaitAll(ctx, time.Now(), mdnsOthers(nodes, mover), 53, mdnsName(mover.Name), "AAAA", mdnsExactly(mover.IPv6)); err != nil {
		t.Fatalf("AAAA of %s after its IPv4 changes: %v", mover.Name, err)
	}
	t.Logf("Whole test %v", time.Since(testStart).Round(time.Millisecond))
}

// avahiBusConf is a private system bus for one lab node's avahi-daemon: the
// host's bus (if any) is another network's, and avahi-daemon only talks to a
// system bus. The policy is wide open because only the test uses it.
const avahiBusConf = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
`

// avahiConf keeps avahi-daemon on the lab link and off everything it would
// otherwise do on a host (wide-area DNS, rlimits that fail in a namespace).
const avahiConf = `[server]
use-ipv4=yes
use-ipv6=yes
allow-interfaces=eth0
enable-dbus=yes
[wide-area]
enable-wide-area=no
[publish]
publish-hinfo=no
publish-workstation=no
[reflector]
[rlimits]
`

// avahiScript runs in a private mount namespace: a tmpfs on /run keeps
// avahi-daemon's pid file and socket (/run/avahi-daemon) off the host's /run,
// where another avahi-daemon would make it refuse to start.
const avahiScript = `set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/avahi-daemon
dbus-daemon --config-file="$1" --nofork --nopidfile &
i=0
while [ ! -S "$2" ]; do
	i=$((i+1)); [ $i -lt 100 ] || { echo "dbus-daemon did not create $2" >&2; exit 1; }
	sleep 0.05
done
exec avahi-daemon --no-drop-root --no-chroot -f "$3"
`

// TestMDNSAvahiInterop checks both directions against Avahi, the mDNS stack
// of most Linux hosts: a node announced by avahi-publish is served by
// mdnsnodes, and our publisher's node is resolved and browsed by Avahi's tools.
func TestMDNSAvahiInterop(t *testing.T) {
	for _, cmd := range []string{"dbus-daemon", "avahi-daemon", "avahi-publish", "avahi-browse", "avahi-resolve"} {
		if _, err := exec.LookPath(cmd); err != nil {
			t.Fatalf("%s not found (Debian packages dbus, avahi-daemon, avahi-utils; run hack/install-deps.sh): %v", cmd, err)
		}
	}
	l := lab.New(t, lab.Config{Prefix: "mdnsav", Nodes: 3, TeardownGrace: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	avNode, resolver, pubNode := l.Nodes()[0], l.Nodes()[1], l.Nodes()[2]

	dir := t.TempDir()
	sock := filepath.Join(dir, "bus.sock")
	busEnv := "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + sock
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	busConf := write("bus.conf", fmt.Sprintf(avahiBusConf, sock))
	avConf := write("avahi-daemon.conf", avahiConf)
	daemon := avNode.Start("avahi-daemon", []string{"unshare", "--mount", "--propagation", "private",
		"sh", "-c", avahiScript, "avahi", busConf, sock, avConf}, lab.WithEnv(busEnv))
	lab.Eventually(t, 20*time.Second, 50*time.Millisecond, "avahi-daemon started", func() error {
		if daemon.Exited() {
			return fmt.Errorf("avahi-daemon exited: %v\n%s", daemon.Err(), daemon.Log())
		}
		if !strings.Contains(daemon.Log(), "Server startup complete") {
			return lab.ErrNotYet
		}
		return nil
	})

	startMDNSResolvers(t, []*lab.Node{resolver}, "coredns", mdnsCorefile(t, 53, readyPort, 9153, ""), readyPort)

	t.Run("avahi-publish is served by mdnsnodes", func(t *testing.T) {
		addr := lab.Host4(150)
		start := time.Now()
		var pubs []*lab.Process
		for name, argv := range map[string][]string{
			"avahi-publish-a": {"avahi-publish", "-a", "avnode.local", addr.String()},
			"avahi-publish-s": {"avahi-publish", "-s", "-H", "avnode.local", "ocp4 Workstation-avnode", "_workstation._tcp", "42424", "cluster=ocp4"},
		} {
			// StartErr: Start would fail the parent test from this subtest.
			p, err := avNode.StartErr(name, argv, lab.WithEnv(busEnv))
			if err != nil {
				t.Fatal(err)
			}
			pubs = append(pubs, p)
		}
		lab.Eventually(t, mdnsBound, 50*time.Millisecond, "avahi-publish established", func() error {
			for _, p := range pubs {
				if p.Exited() {
					return fmt.Errorf("%s exited: %v\n%s", p.Name, p.Err(), p.Log())
				}
				if !strings.Contains(p.Log(), "Established under name") {
					return fmt.Errorf("%s: %w", p.Name, lab.ErrNotYet)
				}
			}
			return nil
		})
		took, err := mdnsWaitAll(ctx, start, []*lab.Node{resolver}, 53, mdnsName("avnode"), "A", mdnsExactly(addr))
		if err != nil {
			t.Fatalf("Avahi's node not served: %v", err)
		}
		t.Logf("measure: avnode served by mdnsnodes %s after avahi-publish started", took[0])
		// Avahi announced no IPv6 address for it: NODATA, not NXDOMAIN.
		if _, err := mdnsWaitAll(ctx, time.Now(), []*lab.Node{resolver}, 53, mdnsName("avnode"), "AAAA", mdnsExactly()); err != nil {
			t.Fatalf("AAAA of Avahi's node: %v", err)
		}
	})

	t.Run("our publisher is resolved and browsed by avahi", func(t *testing.T) {
		if _, err := pubNode.StartErr("mdns-publisher", mdnsPublisherArgs(t)); err != nil {
			t.Fatal(err)
		}
		avahi := func(ctx context.Context, argv ...string) (string, error) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			res, err := avNode.Run(ctx, append([]string{"env", busEnv}, argv...)...)
			return res.Stdout, err
		}
		host := pubNode.Name + ".local"
		for _, c := range []struct {
			flag string
			want netip.Addr
		}{{"-4", pubNode.IPv4}, {"-6", pubNode.IPv6}} {
			want := host + "\t" + c.want.String()
			lab.Eventually(t, mdnsBound, 100*time.Millisecond, "avahi-resolve "+c.flag+" -n "+host, func() error {
				out, err := avahi(ctx, "avahi-resolve", c.flag, "-n", host)
				if err != nil {
					return err
				}
				if strings.TrimSpace(out) != want {
					return fmt.Errorf("got %q, want %q", out, want)
				}
				return nil
			})
		}
		// -k keeps the raw service type instead of Avahi's display name.
		wantBrowse := fmt.Sprintf(`=;eth0;IPv4;ocp4\032Workstation-%s;_workstation._tcp;local;%s;%s;42424;"cluster=ocp4"`, pubNode.Name, host, pubNode.IPv4)
		lab.Eventually(t, mdnsBound, 100*time.Millisecond, "avahi-browse lists "+host, func() error {
			out, err := avahi(ctx, "avahi-browse", "-rtpk", "_workstation._tcp")
			if err != nil {
				return err
			}
			for _, line := range strings.Split(out, "\n") {
				if line == wantBrowse {
					return nil
				}
			}
			return fmt.Errorf("no line %q in:\n%s", wantBrowse, out)
		})
	})
}

var mdnsRejectedRE = regexp.MustCompile(`(?m)^coredns_mdnsnodes_announcements_rejected_total\{[^}]*reason="([a-z]+)"[^}]*\} (\S+)$`)

// mdnsGoodbyeGrace is how long a cache keeps a record after its goodbye
// (mdns.GoodbyeGrace, RFC 6762 10.1).
const mdnsGoodbyeGrace = time.Second

// mdnsRejected reads a resolver's rejected-announcement counters by reason.
func mdnsRejected(ctx context.Context, n *lab.Node, promPort int) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := n.HTTPGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", promPort))
	if err != nil {
		return nil, err
	}
	m := map[string]float64{}
	for _, s := range mdnsRejectedRE.FindAllStringSubmatch(body, -1) {
		v, err := strconv.ParseFloat(s[2], 64)
		if err != nil {
			return nil, fmt.Errorf("metric %q: %w", s[0], err)
		}
		m[s[1]] += v
	}
	// The counters appear with their first rejection; the gauge shows that
	// this is an mdnsnodes resolver's endpoint at all.
	if !strings.Contains(body, "\ncoredns_mdnsnodes_nodes{") {
		return nil, fmt.Errorf("no coredns_mdnsnodes_nodes on port %d", promPort)
	}
	return m, nil
}

// TestMDNSSpoofing has a rogue host on the link announce what it must not be
// able to make the resolvers serve. One node runs two resolvers side by side:
// "open" (no key, as most clusters run) and "keyed" (key FILE, publishers
// sign). The open resolver is also the control that each rogue packet did
// arrive and would have worked where nothing stops it; the rejected counters
// show which rule refused it.
func TestMDNSSpoofing(t *testing.T) {
	l := lab.New(t, lab.Config{Prefix: "mdnssp", Nodes: 3, TeardownGrace: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	observer, victim, rogueNode := l.Nodes()[0], l.Nodes()[1], l.Nodes()[2]

	dir := t.TempDir()
	rogue := filepath.Join(dir, "rogue")
	if out, err := exec.Command("go", "build", "-o", rogue, lab.Path(t, "test/e2e/internal/rogue")).CombinedOutput(); err != nil {
		t.Fatalf("build rogue: %v\n%s", err, out)
	}
	keyFile := filepath.Join(dir, "mdns.key")
	if err := os.WriteFile(keyFile, []byte("e2e-shared-mdns-key-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	type resolver struct {
		name                 string
		port, ready, metrics int
	}
	open := resolver{"open", 53, readyPort, 9153}
	keyed := resolver{"keyed", 5301, readyPort + 1, 9154}
	startMDNSResolvers(t, []*lab.Node{observer}, "coredns-open", mdnsCorefile(t, open.port, open.ready, open.metrics, ""), open.ready)
	startMDNSResolvers(t, []*lab.Node{observer}, "coredns-keyed", mdnsCorefile(t, keyed.port, keyed.ready, keyed.metrics, keyFile), keyed.ready)
	obs := []*lab.Node{observer}

	// The rogue records the victim's first signed announcement, as anyone on
	// the link can, to replay it after the victim has left.
	captured := filepath.Join(dir, "captured.bin")
	capture := rogueNode.Start("rogue-capture", []string{rogue, "-mode", "capture", "-host", victim.Name, "-out", captured})
	lab.Eventually(t, 10*time.Second, 20*time.Millisecond, "rogue capture listening", func() error {
		if capture.Exited() {
			return fmt.Errorf("capture exited: %v\n%s", capture.Err(), capture.Log())
		}
		if !strings.Contains(capture.Log(), "listening") {
			return lab.ErrNotYet
		}
		return nil
	})
	victimPub := victim.Start("mdns-publisher", mdnsPublisherArgs(t, "--key", keyFile))
	for _, r := range []resolver{open, keyed} {
		if _, err := mdnsWaitAll(ctx, time.Now(), obs, r.port, mdnsName(victim.Name), "A", mdnsExactly(victim.IPv4)); err != nil {
			t.Fatalf("The signed victim is not served by the %s resolver: %v", r.name, err)
		}
	}
	capCtx, capCancel := context.WithTimeout(ctx, mdnsBound)
	err := capture.Wait(capCtx)
	capCancel()
	if err != nil {
		t.Fatalf("No signed announcement of %s captured: %v\n%s", victim.Name, err, capture.Log())
	}
	capturedAt := time.Now()

	rejected := func(t *testing.T, r resolver) map[string]float64 {
		t.Helper()
		m, err := mdnsRejected(ctx, observer, r.metrics)
		if err != nil {
			t.Fatalf("%s resolver: %v", r.name, err)
		}
		return m
	}
	// waitRejected waits until the resolver has refused at least one more
	// announcement for one of reasons than in before: then the rogue's
	// packets have been processed and what it serves can be checked.
	waitRejected := func(t *testing.T, r resolver, before map[string]float64, reasons ...string) {
		t.Helper()
		lab.Eventually(t, mdnsBound, 20*time.Millisecond, r.name+" rejects for "+strings.Join(reasons, "/"), func() error {
			m, err := mdnsRejected(ctx, observer, r.metrics)
			if err != nil {
				return err
			}
			for _, reason := range reasons {
				if m[reason] > before[reason] {
					return nil
				}
			}
			return fmt.Errorf("rejected counters %v, before %v", m, before)
		})
	}
	// served checks once, now, what the resolver answers.
	served := func(t *testing.T, r resolver, label string, check func(mdnsAnswer) error) {
		t.Helper()
		qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
		defer qcancel()
		a, err := mdnsLookup(qctx, observer, r.port, mdnsName(label), "A")
		if err == nil {
			err = check(a)
		}
		if err != nil {
			t.Fatalf("%s resolver, %s: %v", r.name, label, err)
		}
	}
	announce := func(t *testing.T, args ...string) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		if res, err := rogueNode.Run(rctx, append([]string{rogue, "-mode", "announce"}, args...)...); err != nil {
			t.Fatalf("rogue %v: %v\n%s", args, err, res.Stdout)
		}
	}

	t.Run("another node's name with another address", func(t *testing.T) {
		o, k := rejected(t, open), rejected(t, keyed)
		announce(t, "-host", victim.Name, "-addr", lab.Host4(166).String())
		waitRejected(t, open, o, "conflict")
		waitRejected(t, keyed, k, "unsigned")
		served(t, open, victim.Name, mdnsExactly(victim.IPv4))
		served(t, keyed, victim.Name, mdnsExactly(victim.IPv4))
	})

	t.Run("reserved name api-int", func(t *testing.T) {
		o, k := rejected(t, open), rejected(t, keyed)
		announce(t, "-host", "api-int", "-addr", lab.Host4(167).String())
		waitRejected(t, open, o, "reserved")
		waitRejected(t, keyed, k, "reserved")
		served(t, open, "api-int", mdnsNXDOMAIN)
		served(t, keyed, "api-int", mdnsNXDOMAIN)
	})

	t.Run("another cluster", func(t *testing.T) {
		o, k := rejected(t, open), rejected(t, keyed)
		announce(t, "-host", "rogue-c", "-cluster", "ocp5", "-addr", lab.Host4(168).String())
		waitRejected(t, open, o, "cluster")
		waitRejected(t, keyed, k, "cluster")
		served(t, open, "rogue-c", mdnsNXDOMAIN)
		served(t, keyed, "rogue-c", mdnsNXDOMAIN)
	})

	t.Run("unsigned with a key configured", func(t *testing.T) {
		k := rejected(t, keyed)
		addr := lab.Host4(169)
		announce(t, "-host", "rogue-d", "-addr", addr.String())
		if _, err := mdnsWaitAll(ctx, time.Now(), obs, open.port, mdnsName("rogue-d"), "A", mdnsExactly(addr)); err != nil {
			t.Fatalf("Control: the open resolver does not serve the unsigned rogue-d either: %v", err)
		}
		waitRejected(t, keyed, k, "unsigned")
		served(t, keyed, "rogue-d", mdnsNXDOMAIN)
	})

	t.Run("stale signed announcement", func(t *testing.T) {
		k := rejected(t, keyed)
		addr := lab.Host4(170)
		// Signed with the right key a minute ago: what a replay of a captured
		// packet looks like once the window (30 s) has passed.
		announce(t, "-host", "rogue-e", "-addr", addr.String(), "-key", keyFile, "-age", "60s")
		if _, err := mdnsWaitAll(ctx, time.Now(), obs, open.port, mdnsName("rogue-e"), "A", mdnsExactly(addr)); err != nil {
			t.Fatalf("Control: the open resolver does not serve rogue-e either: %v", err)
		}
		waitRejected(t, keyed, k, "stale")
		served(t, keyed, "rogue-e", mdnsNXDOMAIN)
	})

	t.Run("forged goodbye for a live node", func(t *testing.T) {
		k := rejected(t, keyed)
		addrs := victim.IPv4.String() + "," + victim.IPv6.String()
		// Repeating the node's own records first makes the rogue one of the
		// senders an unsigned cache takes a goodbye from (RFC 6762 9 treats
		// identical data from another sender as no conflict).
		announce(t, "-host", victim.Name, "-addr", addrs, "-count", "1")
		announce(t, "-host", victim.Name, "-addr", addrs, "-count", "1", "-goodbye")
		waitRejected(t, keyed, k, "unsigned")
		// Without a key nothing tells the rogue from the node; the node's
		// publisher hears the goodbye too and re-announces inside the
		// cache's one-second goodbye grace, so even the open resolver keeps it.
		// Served again at once: the forger sends one goodbye per family and the
		// second may land after the node's first answer, which its next
		// re-announcement (at most 100 ms later) repairs.
		wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err := mdnsWaitAll(wctx, time.Now(), obs, open.port, mdnsName(victim.Name), "A", mdnsExactly(victim.IPv4))
		wcancel()
		if err != nil {
			t.Fatalf("The open resolver lost %s after a forged goodbye: %v", victim.Name, err)
		}
		// Past the one-second goodbye grace, so a removal would show.
		time.Sleep(mdnsGoodbyeGrace + 200*time.Millisecond)
		served(t, keyed, victim.Name, mdnsExactly(victim.IPv4))
		served(t, open, victim.Name, mdnsExactly(victim.IPv4))
		if !strings.Contains(victimPub.Log(), "said goodbye for our records") {
			t.Errorf("The victim's publisher did not notice the forged goodbye:\n%s", lab.Tail(victimPub.LogPath, 10))
		}
	})

	t.Run("replayed signed announcement", func(t *testing.T) {
		if err := victimPub.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		for _, r := range []resolver{open, keyed} {
			if _, err := mdnsWaitAll(ctx, time.Now(), obs, r.port, mdnsName(victim.Name), "A", mdnsNXDOMAIN); err != nil {
				t.Fatalf("%s resolver still serves %s after its goodbye: %v", r.name, victim.Name, err)
			}
		}
		k := rejected(t, keyed)
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := rogueNode.Run(rctx, rogue, "-mode", "replay", "-in", captured)
		rcancel()
		if err != nil {
			t.Fatalf("rogue replay: %v\n%s", err, res.Stdout)
		}
		t.Logf("Replayed an announcement captured %v earlier", time.Since(capturedAt).Round(time.Millisecond))
		if _, err := mdnsWaitAll(ctx, time.Now(), obs, open.port, mdnsName(victim.Name), "A", mdnsExactly(victim.IPv4)); err != nil {
			t.Fatalf("Control: the open resolver does not take the replay either: %v", err)
		}
		// Inside the window the nonce gives it away, after it the timestamp.
		waitRejected(t, keyed, k, "replay", "stale")
		served(t, keyed, victim.Name, mdnsNXDOMAIN)
	})

	t.Logf("Rejected by the open resolver: %v", rejected(t, open))
	t.Logf("Rejected by the keyed resolver: %v", rejected(t, keyed))
}
