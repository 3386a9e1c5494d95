package lab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// DefaultPrefix is the namespace prefix when Config.Prefix is empty.
const DefaultPrefix = "idns"

// Iface is the name of every node's lab interface.
const Iface = "eth0"

// Address plan (see the package documentation).
var (
	Subnet4 = netip.MustParsePrefix("198.51.100.0/24")
	Subnet6 = netip.MustParsePrefix("2001:db8:1::/64")
)

const (
	firstNodeHost        = 11
	firstClientHost      = 201
	maxNodes             = 89 // hosts 11..99; 100..199 are left for VIPs
	maxClients           = 50
	defaultTeardownGrace = 3 * time.Second
	netnsDir             = "/run/netns"
)

// Host4 returns the lab IPv4 address with host part h (1..254).
func Host4(h int) netip.Addr {
	b := Subnet4.Addr().As4()
	b[3] = byte(h)
	return netip.AddrFrom4(b)
}

// Host6 returns the lab IPv6 address written like Host4's: Host6(11) is 2001:db8:1::11.
func Host6(h int) netip.Addr {
	return netip.MustParseAddr(fmt.Sprintf("2001:db8:1::%d", h))
}

// Config describes a lab.
type Config struct {
	// Prefix starts every namespace name. Use one per test suite: stale cleanup
	// deletes only namespaces with this prefix whose owner process is gone.
	// A lower-case letter, then up to 11 letters or digits; default DefaultPrefix.
	Prefix string
	// Nodes is the number of cluster nodes New creates, named node0, node1, …
	// More can be added later with AddNode.
	Nodes int
	// Client adds a namespace named "client" on the same bridge that is not a
	// cluster node (Lab.Client).
	Client bool
	// Routed gives every node and client a subnet of its own behind the
	// switch namespace, which routes between them (a ToR) instead of
	// bridging them: see RoutedSubnet4.
	Routed bool
	// TeardownGrace is how long teardown waits between SIGTERM and SIGKILL
	// (default 3 s). Daemons with a drain delay, such as CoreDNS's health
	// lameduck, use all of it; a lab that does not need graceful exits can set
	// it lower.
	TeardownGrace time.Duration
}

// Lab is one isolated L2 network of node namespaces.
type Lab struct {
	t      testing.TB
	prefix string // "<Prefix>-<pid>-<seq>"
	owner  string // "<Prefix>-<pid>", the marker name
	sw     string // switch namespace
	logDir string
	grace  time.Duration
	routed bool

	mu      sync.Mutex
	nodes   []*Node
	clients []*Node
	procs   []*Process
	nextIdx int
	closed  bool

	closeOnce sync.Once
	closeErr  error

	// UpDuration is how long New took to build the network.
	UpDuration time.Duration
	// TeardownDuration is how long Close took (zero before Close).
	TeardownDuration time.Duration
}

var labSeq atomic.Int64

// validPrefix has no '-', so that one prefix never matches another's names
// in CleanStale ("ab" and "ab-1" would both fit "ab-<pid>-<seq>-").
var validPrefix = regexp.MustCompile(`^[a-z][a-z0-9]{0,11}$`)

var validName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// New builds a lab and registers its teardown with t.Cleanup. It fails t when
// the machine cannot host one (not root, tools missing) or setup fails.
func New(t testing.TB, cfg Config) *Lab {
	t.Helper()
	RequirePrereqs(t)
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if !validPrefix.MatchString(cfg.Prefix) {
		t.Fatalf("lab: bad prefix %q: a lower-case letter, then up to 11 letters or digits", cfg.Prefix)
	}
	if cfg.Nodes < 0 || cfg.Nodes > maxNodes {
		t.Fatalf("lab: %d nodes; want 0..%d", cfg.Nodes, maxNodes)
	}
	start := time.Now()
	pid := os.Getpid()
	l := &Lab{
		t:      t,
		owner:  fmt.Sprintf("%s-%d", cfg.Prefix, pid),
		logDir: t.TempDir(),
		grace:  cfg.TeardownGrace,
		routed: cfg.Routed,
	}
	if l.grace <= 0 {
		l.grace = defaultTeardownGrace
	}
	l.prefix = fmt.Sprintf("%s-%d", l.owner, labSeq.Add(1))
	l.sw = l.prefix + "-sw"

	if err := writeMarker(l.owner); err != nil {
		t.Fatalf("lab: %v", err)
	}
	if n, err := CleanStale(cfg.Prefix); err != nil {
		t.Logf("lab: stale cleanup: %v", err)
	} else if n > 0 {
		t.Logf("lab: deleted %d stale namespaces with prefix %q left by killed runs", n, cfg.Prefix)
	}

	register(l)
	t.Cleanup(func() {
		if t.Failed() {
			l.KeepLogs()
		}
		if err := l.Close(); err != nil {
			t.Errorf("lab: teardown: %v", err)
		}
		t.Logf("lab %s: teardown took %v", l.prefix, l.TeardownDuration.Round(time.Millisecond))
	})

	if err := l.setupSwitch(); err != nil {
		t.Fatalf("lab: switch: %v", err)
	}
	for i := range cfg.Nodes {
		if _, err := l.addHost(fmt.Sprintf("node%d", i), false); err != nil {
			t.Fatalf("lab: %v", err)
		}
	}
	if cfg.Client {
		if _, err := l.addHost("client", true); err != nil {
			t.Fatalf("lab: %v", err)
		}
	}
	l.UpDuration = time.Since(start)
	t.Logf("lab %s: %d nodes up in %v (logs in %s)", l.prefix, cfg.Nodes, l.UpDuration.Round(time.Millisecond), l.logDir)
	return l
}

// Name is the lab's unique namespace prefix, "<Prefix>-<pid>-<seq>".
func (l *Lab) Name() string { return l.prefix }

// SwitchNS is the name of the namespace holding the bridge.
func (l *Lab) SwitchNS() string { return l.sw }

// LogDir is the directory holding one log file per started process.
func (l *Lab) LogDir() string { return l.logDir }

// Nodes returns the cluster nodes in the order they were added.
func (l *Lab) Nodes() []*Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.nodes)
}

// Node returns the node or client called name, or nil.
func (l *Lab) Node(name string) *Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range append(slices.Clone(l.nodes), l.clients...) {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Client returns the first client namespace, or nil when there is none.
func (l *Lab) Client() *Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.clients) == 0 {
		return nil
	}
	return l.clients[0]
}

// AddNode adds a cluster node to a running lab (a node joining late). name is
// also its hostname.
func (l *Lab) AddNode(name string) *Node {
	l.t.Helper()
	n, err := l.addHost(name, false)
	if err != nil {
		l.t.Fatalf("lab: %v", err)
	}
	return n
}

// AddClient adds a namespace on the bridge that is not a cluster node.
func (l *Lab) AddClient(name string) *Node {
	l.t.Helper()
	n, err := l.addHost(name, true)
	if err != nil {
		l.t.Fatalf("lab: %v", err)
	}
	return n
}

func (l *Lab) setupSwitch() error {
	if err := ipCmd("netns", "add", l.sw); err != nil {
		return err
	}
	if l.routed {
		if err := ipBatch(l.sw, "link set lo up"); err != nil {
			return err
		}
		// The L4 hash spreads one client's connections over every next hop
		// of an ECMP route; the default (L3) sends them all to one.
		return nsSysctl(l.sw, false,
			"net.ipv4.ip_forward=1",
			"net.ipv6.conf.all.forwarding=1",
			"net.ipv4.fib_multipath_hash_policy=1",
			"net.ipv6.fib_multipath_hash_policy=1",
			"net.ipv6.conf.all.accept_dad=0",
			"net.ipv6.conf.default.accept_dad=0",
		)
	}
	if err := ipBatch(l.sw,
		"link set lo up",
		"link add br0 type bridge stp_state 0 forward_delay 0 mcast_snooping 0",
		"link set br0 up",
	); err != nil {
		return err
	}
	// Per-namespace since Linux 5.3; absent when br_netfilter is not loaded,
	// and then there is nothing to turn off.
	return nsSysctl(l.sw, true,
		"net.bridge.bridge-nf-call-iptables=0",
		"net.bridge.bridge-nf-call-ip6tables=0",
		"net.bridge.bridge-nf-call-arptables=0",
	)
}

func (l *Lab) addHost(name string, client bool) (*Node, error) {
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("bad node name %q: lower-case letters, digits and '-'", name)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errors.New("lab is closed")
	}
	for _, n := range append(slices.Clone(l.nodes), l.clients...) {
		if n.Name == name {
			l.mu.Unlock()
			return nil, fmt.Errorf("node %q exists", name)
		}
	}
	var host int
	var port string
	if client {
		if len(l.clients) >= maxClients {
			l.mu.Unlock()
			return nil, errors.New("too many clients")
		}
		host = firstClientHost + len(l.clients)
		port = fmt.Sprintf("c%d", len(l.clients))
	} else {
		if l.nextIdx >= maxNodes {
			l.mu.Unlock()
			return nil, errors.New("too many nodes")
		}
		host = firstNodeHost + l.nextIdx
		port = fmt.Sprintf("v%d", l.nextIdx)
	}
	n := &Node{
		Name:   name,
		NS:     l.prefix + "-" + name,
		Host:   host,
		Client: client,
		IPv4:   Host4(host),
		IPv6:   Host6(host),
		MAC:    net.HardwareAddr{0x02, 0x1d, 0, 0, 0, byte(host)},
		port:   port,
		lab:    l,
	}
	if l.routed {
		sub := l.nextIdx + 1 // node i: subnet i+1
		if client {
			sub = firstRoutedClient + len(l.clients)
		}
		n.IPv4, n.Gateway4 = routedAddr4(sub, 2), routedAddr4(sub, 1)
		n.IPv6, n.Gateway6 = routedAddr6(sub, 2), routedAddr6(sub, 1)
	}
	// Registered before it exists so that Close deletes a half-built node too.
	if client {
		l.clients = append(l.clients, n)
	} else {
		l.nodes = append(l.nodes, n)
		n.Index = l.nextIdx
		l.nextIdx++
	}
	l.mu.Unlock()

	if err := n.setup(); err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	return n, nil
}

func (n *Node) setup() error {
	sw := n.lab.sw
	if n.lab.routed {
		return n.setupRouted()
	}
	if err := ipCmd("netns", "add", n.NS); err != nil {
		return err
	}
	// Defaults first: eth0 is created afterwards and inherits them, so DAD never
	// runs on it and a link-down keeps its IPv6 address.
	if err := nsSysctl(n.NS, false,
		"net.ipv6.conf.all.accept_dad=0",
		"net.ipv6.conf.default.accept_dad=0",
		"net.ipv6.conf.all.keep_addr_on_down=1",
		"net.ipv6.conf.default.keep_addr_on_down=1",
		"net.ipv4.conf.all.arp_ignore=1",
		"net.ipv4.conf.default.arp_ignore=1",
		// Deleting the primary IPv4 address would otherwise delete every other
		// address of its subnet too (ReplaceAddr, VIPs in the node subnet).
		"net.ipv4.conf.all.promote_secondaries=1",
		"net.ipv4.conf.default.promote_secondaries=1",
		"net.ipv4.ip_nonlocal_bind=1",
		"net.ipv6.ip_nonlocal_bind=1",
	); err != nil {
		return err
	}
	if err := ipBatch(sw,
		fmt.Sprintf("link add %s type veth peer name %s netns %s", n.port, Iface, n.NS),
		fmt.Sprintf("link set %s master br0", n.port),
		fmt.Sprintf("link set %s up", n.port),
	); err != nil {
		return err
	}
	return ipBatch(n.NS,
		"link set lo up",
		fmt.Sprintf("link set %s address %s", Iface, n.MAC),
		fmt.Sprintf("addr add %s/24 dev %s", n.IPv4, Iface),
		fmt.Sprintf("addr add %s/64 dev %s nodad", n.IPv6, Iface),
		fmt.Sprintf("link set %s up", Iface),
		// Without a route for multicast, IPv4 group joins fail with "no such
		// device"; there is deliberately no default route.
		fmt.Sprintf("route add 224.0.0.0/4 dev %s", Iface),
	)
}

// Close stops every process in the lab's namespaces (SIGTERM, then SIGKILL
// after Config.TeardownGrace) and deletes the namespaces. It is safe to call
// more than once and runs automatically at the end of the test.
func (l *Lab) Close() error {
	l.closeOnce.Do(func() {
		start := time.Now()
		l.mu.Lock()
		l.closed = true
		nss := []string{}
		for _, n := range append(slices.Clone(l.nodes), l.clients...) {
			nss = append(nss, n.NS)
		}
		nss = append(nss, l.sw)
		procs := slices.Clone(l.procs)
		l.mu.Unlock()
		l.closeErr = teardown(nss, l.grace, procs)
		l.TeardownDuration = time.Since(start)
		unregister(l)
	})
	return l.closeErr
}

// KeepLogs copies the process logs of a failed test out of its temporary
// directory (which the test removes) and says where, in one line (Keep).
func (l *Lab) KeepLogs() {
	Keep(l.t, "lab "+l.prefix+": process logs", l.logDir+"/.")
}

// Keep copies the files or directories at paths (a directory ending in
// "/." gives its contents; anything else is named after its whole path) to
// a new directory under the system's temporary
// one that outlives the test, and logs one line saying where. The logs of a
// failed test go there, not to the test log: CI shows the last lines before
// a test's FAIL, and those must be the test's own failure messages.
func Keep(t testing.TB, what string, paths ...string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "infradns-e2e-"+strings.ReplaceAll(t.Name(), "/", "_")+"-")
	for _, p := range paths {
		if err != nil {
			break
		}
		to := dir
		if !strings.HasSuffix(p, "/.") {
			// Several nodes' logs often share a base name.
			to = filepath.Join(dir, strings.ReplaceAll(strings.TrimPrefix(p, "/"), "/", "_"))
		}
		if out, cerr := exec.Command("cp", "-a", p, to).CombinedOutput(); cerr != nil {
			err = fmt.Errorf("%v: %s", cerr, out)
		}
	}
	if err != nil {
		t.Logf("%s: not kept: %v", what, err)
		return
	}
	t.Logf("%s of the failed run kept in %s", what, dir)
}

// Tail returns the last n lines of the file at path (or why it could not).
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// teardown kills every process in the namespaces, and the process groups of
// own (which may still be on their way into a namespace), then deletes the
// namespaces.
func teardown(nss []string, grace time.Duration, own []*Process) error {
	var errs []error
	alive := func() []int {
		pids := pidsIn(nss)
		for _, p := range own {
			if !p.Exited() {
				pids = append(pids, -p.Pid())
			}
		}
		return pids
	}
	pids := alive()
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for len(pids) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		pids = alive()
	}
	if len(pids) > 0 {
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		deadline = time.Now().Add(2 * time.Second)
		for len(pids) > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			pids = alive()
		}
		if len(pids) > 0 {
			errs = append(errs, fmt.Errorf("processes %v survived SIGKILL", pids))
		}
	}
	var existing []string
	for _, ns := range nss {
		if _, err := os.Stat(filepath.Join(netnsDir, ns)); err == nil {
			existing = append(existing, ns)
		}
	}
	if len(existing) > 0 {
		lines := make([]string, len(existing))
		for i, ns := range existing {
			lines[i] = "netns del " + ns
		}
		if err := runIP(strings.Join(lines, "\n")+"\n", "-force", "-batch", "-"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pidsIn returns the processes whose network namespace is one of nss, like
// `ip netns pids` but with one scan of /proc for all of them. Zombies have no
// namespace links and are not listed.
func pidsIn(nss []string) []int {
	type key struct{ dev, ino uint64 }
	want := map[key]bool{}
	for _, ns := range nss {
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join(netnsDir, ns), &st) == nil {
			want[key{uint64(st.Dev), st.Ino}] = true
		}
	}
	if len(want) == 0 {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st) != nil {
			continue
		}
		if want[key{uint64(st.Dev), st.Ino}] {
			pids = append(pids, pid)
		}
	}
	return pids
}

// RequirePrereqs fails t unless the machine can host a lab: root, and the
// ip, unshare and sysctl commands.
func RequirePrereqs(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("lab: the network-namespace lab needs root (run as root, e.g. sudo make e2e)")
	}
	for cmd, pkg := range map[string]string{"ip": "iproute2", "unshare": "util-linux", "sysctl": "procps"} {
		if _, err := exec.LookPath(cmd); err != nil {
			t.Fatalf("lab: %s not found (Debian package %s; run make deps)", cmd, pkg)
		}
	}
}
