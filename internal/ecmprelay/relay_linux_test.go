package ecmprelay

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/lb/netnstest"
)

// relayLab is a routed fabric in namespaces: a switch namespace routing
// between nodes in subnets of their own and a client, spreading the VIPs
// over the nodes (ECMP, hashed on ports), each node serving HTTP on a
// wildcard listener and running a Relay whose peers are the other nodes.
type relayLab struct {
	sw, client string
	nodes      []string
	addr4      []netip.Addr
	addr6      []netip.Addr
	relays     []*Relay
	vip4, vip6 netip.Addr
}

func newRelayLab(t *testing.T, underlay6 bool, n int) *relayLab {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("nft not found (run hack/install-deps.sh as root): %v", err)
	}
	l := &relayLab{vip4: netip.MustParseAddr("10.9.100.1"), vip6: netip.MustParseAddr("fd09:100::1")}
	mk := func(suffix string) string {
		ns := fmt.Sprintf("idnse-%d-%s", os.Getpid(), suffix)
		_ = exec.Command("ip", "netns", "del", ns).Run()
		netnstest.Run(t, "netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		sysctl(t, ns, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
		netnstest.Run(t, "-n", ns, "link", "set", "lo", "up")
		return ns
	}
	l.sw = mk("sw")
	sysctl(t, l.sw, "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
		"net.ipv4.fib_multipath_hash_policy=1", "net.ipv6.fib_multipath_hash_policy=1")
	wire := func(ns string, i int) {
		port := fmt.Sprintf("p%d", i)
		netnstest.Run(t, "-n", l.sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
		netnstest.Run(t, "-n", l.sw, "addr", "add", fmt.Sprintf("10.9.%d.1/24", i), "dev", port)
		netnstest.Run(t, "-n", l.sw, "addr", "add", fmt.Sprintf("fd09:%d::1/64", i), "dev", port, "nodad")
		netnstest.Run(t, "-n", l.sw, "link", "set", port, "up")
		netnstest.Run(t, "-n", ns, "addr", "add", fmt.Sprintf("10.9.%d.2/24", i), "dev", "eth0")
		netnstest.Run(t, "-n", ns, "addr", "add", fmt.Sprintf("fd09:%d::2/64", i), "dev", "eth0", "nodad")
		netnstest.Run(t, "-n", ns, "link", "set", "eth0", "up")
		netnstest.Run(t, "-n", ns, "route", "add", "default", "via", fmt.Sprintf("10.9.%d.1", i))
		netnstest.Run(t, "-n", ns, "-6", "route", "add", "default", "via", fmt.Sprintf("fd09:%d::1", i))
	}
	for i := range n {
		l.nodes = append(l.nodes, mk(fmt.Sprintf("n%d", i+1)))
		l.addr4 = append(l.addr4, netip.MustParseAddr(fmt.Sprintf("10.9.%d.2", i+1)))
		l.addr6 = append(l.addr6, netip.MustParseAddr(fmt.Sprintf("fd09:%d::2", i+1)))
		// A node whose 'all' filter is strict, as many distributions set it.
		sysctl(t, l.nodes[i], "net.ipv4.conf.all.rp_filter=1")
		wire(l.nodes[i], i+1)
		netnstest.Run(t, "-n", l.nodes[i], "route", "add", "local", l.vip4.String()+"/32", "dev", "lo", "table", "local")
		netnstest.Run(t, "-n", l.nodes[i], "-6", "route", "add", "local", l.vip6.String()+"/128", "dev", "lo", "table", "local")
		serve(t, l.nodes[i], fmt.Sprintf("n%d", i+1))
	}
	l.client = mk("c")
	wire(l.client, 200)
	l.spread()
	for i := range l.nodes {
		r := &Relay{Failed: func(err error) { t.Errorf("node %d: %v", i+1, err) }}
		var self, peers []netip.Addr
		for j := range l.nodes {
			a := []netip.Addr{l.addr4[j], l.addr6[j]}
			if underlay6 {
				a = a[1:]
			}
			if j == i {
				self = a
			} else {
				peers = append(peers, a...)
			}
		}
		p, err := NewPlan(self, peers)
		if err != nil {
			t.Fatal(err)
		}
		in(t, l.nodes[i], func() error { return r.Update(p, []netip.Addr{l.vip4, l.vip6}) })
		l.relays = append(l.relays, r)
		ns := l.nodes[i]
		t.Cleanup(func() {
			in(t, ns, r.Close)
			if out, err := exec.Command("ip", "-n", ns, "link", "show", Device).CombinedOutput(); err == nil {
				t.Errorf("%s still there after Close: %s", Device, out)
			}
		})
	}
	return l
}

// spread routes the VIPs through every node, hash-threshold multipath (a
// Linux or FRR ToR's default).
func (l *relayLab) spread() {
	l.route(l.vip4, 0)
	l.route(l.vip6, 0)
}

// route routes vip through the nodes from the first-th on.
func (l *relayLab) route(vip netip.Addr, first int) {
	args := []string{"-n", l.sw, "route", "replace", netip.PrefixFrom(vip, vip.BitLen()).String()}
	if vip.Is6() {
		args = slices.Insert(args, 2, "-6")
	}
	for i := first; i < len(l.nodes); i++ {
		gw := l.addr4[i]
		if vip.Is6() {
			gw = l.addr6[i]
		}
		args = append(args, "nexthop", "via", gw.String())
	}
	_ = exec.Command("ip", args...).Run()
}

// withdraw routes vip through the other nodes only: the first has left.
func (l *relayLab) withdraw(t *testing.T, vip netip.Addr) {
	t.Helper()
	l.route(vip, 1)
}

// resilient routes vip through a resilient next-hop group of the nodes
// from the first-th on (replacing the group keeps the buckets of the
// nodes that stay where they were).
func (l *relayLab) resilient(t *testing.T, vip netip.Addr, first int) {
	t.Helper()
	fam, base := "-4", 10
	if vip.Is6() {
		fam, base = "-6", 20
	}
	var ids []string
	for i := first; i < len(l.nodes); i++ {
		gw := l.addr4[i]
		if vip.Is6() {
			gw = l.addr6[i]
		}
		id := strconv.Itoa(base + i)
		netnstest.Run(t, "-n", l.sw, fam, "nexthop", "replace", "id", id, "via", gw.String(), "dev", fmt.Sprintf("p%d", i+1))
		ids = append(ids, id)
	}
	group := strconv.Itoa(base + 9)
	netnstest.Run(t, "-n", l.sw, "nexthop", "replace", "id", group, "group", strings.Join(ids, "/"), "type", "resilient", "buckets", "64", "idle_timer", "0")
	netnstest.Run(t, "-n", l.sw, fam, "route", "replace", netip.PrefixFrom(vip, vip.BitLen()).String(), "nhid", group)
}

func sysctl(t *testing.T, ns string, kv ...string) {
	t.Helper()
	for _, s := range kv {
		if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", s).CombinedOutput(); err != nil {
			t.Fatalf("sysctl %s in %s: %v: %s", s, ns, err, out)
		}
	}
}

// in runs f on a thread inside namespace ns; the thread is never unlocked,
// so Go discards it after.
func in(t *testing.T, ns string, f func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netnstest.Enter(ns); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	if err := <-errc; err != nil {
		t.Fatalf("in %s: %v", ns, err)
	}
}

// serve answers every request with name, keeping connections open, on
// port 8080 of every address of ns (a wildcard listener, as haproxy's).
func serve(t *testing.T, ns, name string) {
	t.Helper()
	var ln net.Listener
	in(t, ns, func() (err error) {
		ln, err = net.Listen("tcp", "[::]:8080")
		return err
	})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

type conn struct {
	c  net.Conn
	br *bufio.Reader
}

// dial opens n connections to vip from the client.
func (l *relayLab) dial(t *testing.T, vip netip.Addr, n int) []*conn {
	t.Helper()
	var out []*conn
	in(t, l.client, func() error {
		for range n {
			c, err := net.DialTimeout("tcp", netip.AddrPortFrom(vip, 8080).String(), 2*time.Second)
			if err != nil {
				return err
			}
			out = append(out, &conn{c: c, br: bufio.NewReader(c)})
		}
		return nil
	})
	t.Cleanup(func() {
		for _, c := range out {
			c.c.Close()
		}
	})
	return out
}

// ask makes one request on c and returns who answered.
func (c *conn) ask() (string, error) {
	if err := c.c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c.c, "GET / HTTP/1.1\r\nHost: vip\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestRelayLeave: connections open to a VIP through the first node, which
// then leaves (its route withdrawn at the switch, the VIP still on its lo,
// as during a drain), are served by it when it told its peer first, and
// reset by the peer when it did not. The peer's own connections are never
// touched. IPv4 and IPv6 VIPs over an IPv4 and over an IPv6 underlay,
// strict rp_filter.
// placed asks on each connection which node serves it: the node of each,
// and how many each node has.
func placed(t *testing.T, conns []*conn) (on []string, count map[string]int) {
	t.Helper()
	on, count = make([]string, len(conns)), map[string]int{}
	for i, c := range conns {
		who, err := c.ask()
		if err != nil {
			t.Fatalf("connection %d before: %v", i, err)
		}
		on[i], count[who] = who, count[who]+1
	}
	return on, count
}

// failures asks on each connection again: how many failed per node they
// were on, and their errors. One answered by another node is an error.
func failures(t *testing.T, conns []*conn, on []string) (map[string]int, []string) {
	t.Helper()
	failed := map[string]int{}
	var errs []string
	for i, c := range conns {
		who, err := c.ask()
		switch {
		case err != nil:
			failed[on[i]]++
			errs = append(errs, err.Error())
		case who != on[i]:
			t.Errorf("connection %d of %s answered by %s", i, on[i], who)
		}
	}
	return failed, errs
}

func TestRelayLeave(t *testing.T) {
	for _, underlay6 := range []bool{false, true} {
		t.Run(map[bool]string{false: "IPv4 underlay", true: "IPv6 underlay"}[underlay6], func(t *testing.T) {
			testRelayLeave(t, underlay6)
		})
	}
}

func testRelayLeave(t *testing.T, underlay6 bool) {
	l := newRelayLab(t, underlay6, 2)
	if got := l.relays[0].Plan().Local.Is6(); got != underlay6 {
		t.Fatalf("underlay IPv6 %v, want %v", got, underlay6)
	}
	for _, tc := range []struct {
		name  string
		v6    bool
		leave bool
	}{
		// Not told first: the message's entry lasts past its case.
		{"IPv4, not told", false, false},
		{"IPv4, told", false, true},
		{"IPv6, not told", true, false},
		{"IPv6, told", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vip := l.vip4
			if tc.v6 {
				vip = l.vip6
			}
			l.spread()
			conns := l.dial(t, vip, 30)
			on, count := placed(t, conns)
			if count["n1"] == 0 || count["n2"] == 0 {
				t.Fatalf("connections per node %v: want both nodes to have some", count)
			}
			if tc.leave {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				answered, peers := l.relays[0].Leave(ctx, []netip.Addr{vip}, 3*time.Second)
				cancel()
				if answered != 1 || peers != 1 {
					t.Fatalf("Leave: %d of %d peers answered, want 1 of 1", answered, peers)
				}
			}
			l.withdraw(t, vip)
			failed, errs := failures(t, conns, on)
			t.Logf("connections per node %v; failed after the withdrawal %v", count, failed)
			if failed["n2"] > 0 {
				t.Errorf("%d connections of the node that stays failed: %v", failed["n2"], errs)
			}
			if tc.leave && failed["n1"] > 0 {
				t.Errorf("%d of %d connections of the leaving node failed although it told its peer: %v", failed["n1"], count["n1"], errs)
			}
			if !tc.leave && failed["n1"] != count["n1"] {
				t.Errorf("%d of %d connections of the leaving node failed without the message: want all (reset by the peer)", failed["n1"], count["n1"])
			}
			if !tc.leave {
				for _, e := range errs {
					if !strings.Contains(e, "reset") && !strings.Contains(e, "EOF") {
						t.Errorf("without the message: %q, want a reset by the peer, not a timeout", e)
					}
				}
			}
		})
	}
}

// TestRelayUpdate: the same plan again changes nothing (a plan comes at
// every change of the cluster), new peers rebuild the device with one
// forwarding entry and one neighbour per family for each, and an empty
// plan removes the device and the tables.
func TestRelayUpdate(t *testing.T) {
	ns := netnstest.New(t, "eru")
	netnstest.Run(t, "-n", ns, "addr", "add", "10.0.0.1/24", "dev", "eth0")
	netnstest.Run(t, "-n", ns, "link", "set", "eth0", "up")
	ip := func(args ...string) string {
		out, _ := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
		return string(out)
	}
	index := func() string {
		out, err := exec.Command("ip", "-n", ns, "-o", "link", "show", Device).Output()
		if f := strings.Fields(string(out)); err == nil && len(f) > 0 {
			return f[0]
		}
		return ""
	}
	r := &Relay{Failed: func(err error) { t.Error(err) }}
	t.Cleanup(func() { in(t, ns, r.Close) })
	self := addrs("10.0.0.1")
	vips := addrs("10.91.100.1")
	plan := func(peers ...string) Plan {
		p, err := NewPlan(self, addrs(peers...))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	in(t, ns, func() error { return r.Update(plan("10.0.0.2"), vips) })
	first := index()
	if first == "" {
		t.Fatalf("no %s after the first plan", Device)
	}
	in(t, ns, func() error { return r.Update(plan("10.0.0.2"), vips) })
	if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-n", "net.ipv4.conf."+Device+".rp_filter").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "2" {
		t.Errorf("rp_filter of %s: %q %v, want 2 (loose)", Device, out, err)
	}
	if got := index(); got != first {
		t.Errorf("the same plan rebuilt the device (%s, was %s)", got, first)
	}
	in(t, ns, func() error { return r.Update(plan("10.0.0.3", "10.0.0.2"), vips) })
	if got := index(); got == first || got == "" {
		t.Errorf("new peers: device %q, want a new one (was %s)", got, first)
	}
	out, err := exec.Command("bridge", "-n", ns, "fdb", "show", "dev", Device).CombinedOutput()
	if err != nil {
		t.Fatalf("bridge fdb: %v: %s", err, out)
	}
	for _, want := range []string{"02:49:0a:00:00:02 dst 10.0.0.2", "02:49:0a:00:00:03 dst 10.0.0.3"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("forwarding entries:\n%s\nwant %q", out, want)
		}
	}
	neigh := ip("neigh", "show", "dev", Device, "nud", "permanent") + ip("-6", "neigh", "show", "dev", Device, "nud", "permanent")
	for _, want := range []string{"169.254.91.1 lladdr 02:49:0a:00:00:02", "169.254.91.2 lladdr 02:49:0a:00:00:03", "fe80:91::1 lladdr 02:49:0a:00:00:02", "fe80:91::2 lladdr 02:49:0a:00:00:03"} {
		if !strings.Contains(neigh, want) {
			t.Errorf("neighbours:\n%s\nwant %q", neigh, want)
		}
	}
	if out, err := exec.Command("ip", "netns", "exec", ns, "nft", "list", "table", "ip", Table).CombinedOutput(); err != nil {
		t.Errorf("no table %s: %v: %s", Table, err, out)
	}
	in(t, ns, func() error { return r.Update(Plan{}, vips) })
	if got := index(); got != "" {
		t.Errorf("an empty plan left %s", Device)
	}
	if out, err := exec.Command("ip", "netns", "exec", ns, "nft", "list", "tables").CombinedOutput(); err != nil || strings.Contains(string(out), Table) {
		t.Errorf("an empty plan left the tables: %s %v", out, err)
	}
}

// TestRelayLeaveResilient: three nodes, the first leaves after telling the
// others. With the switch's hash-threshold multipath the others'
// connections that the withdrawal moves between them are reset (counted);
// with a resilient next-hop group they stay, and with the relay no
// connection at all fails.
func TestRelayLeaveResilient(t *testing.T) {
	l := newRelayLab(t, false, 3)
	for _, tc := range []struct {
		name      string
		resilient bool
		v6        bool
	}{
		{"hash-threshold, IPv4", false, false},
		{"resilient, IPv4", true, false},
		{"hash-threshold, IPv6", false, true},
		{"resilient, IPv6", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vip := l.vip4
			if tc.v6 {
				vip = l.vip6
			}
			if tc.resilient {
				l.resilient(t, vip, 0)
			} else {
				l.route(vip, 0)
			}
			conns := l.dial(t, vip, 30)
			on, count := placed(t, conns)
			if count["n1"] == 0 {
				t.Fatalf("connections per node %v: none through the node that leaves", count)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			answered, peers := l.relays[0].Leave(ctx, []netip.Addr{vip}, 3*time.Second)
			cancel()
			if answered != 2 || peers != 2 {
				t.Fatalf("Leave: %d of %d peers answered, want 2 of 2", answered, peers)
			}
			if tc.resilient {
				l.resilient(t, vip, 1)
			} else {
				l.withdraw(t, vip)
			}
			failed, _ := failures(t, conns, on)
			t.Logf("connections per node %v; failed after n1 left %v", count, failed)
			if failed["n1"] > 0 {
				t.Errorf("%d of n1's %d connections failed although it told its peers", failed["n1"], count["n1"])
			}
			if tc.resilient && len(failed) > 0 {
				t.Errorf("resilient next hops: connections failed %v, want none (only n1's buckets move, and those are relayed)", failed)
			}
		})
	}
}
