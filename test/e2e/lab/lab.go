package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
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
	// markerDir holds one file per live lab owner: "<prefix>-<pid>" with the
	// owner's start time, so a reused PID is not mistaken for the owner.
	markerDir = "/run/netns-lab"
	netnsDir  = "/run/netns"
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
			l.DumpLogs(40)
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

// DumpLogs writes the last lines of every process log to the test log.
func (l *Lab) DumpLogs(lines int) {
	l.mu.Lock()
	procs := slices.Clone(l.procs)
	l.mu.Unlock()
	for _, p := range procs {
		l.t.Logf("--- %s/%s (%s), last %d lines:\n%s", p.Node.Name, p.Name, p.LogPath, lines, Tail(p.LogPath, lines))
	}
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

// CleanStale deletes namespaces named "<prefix>-<pid>-…" whose owner process
// is gone (or whose PID now belongs to another process), killing whatever still
// runs in them. New calls it; it returns how many namespaces it deleted.
func CleanStale(prefix string) (int, error) {
	ents, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `-([0-9]+)-[0-9]+-`)
	var stale []string
	deadOwners := map[string]bool{}
	for _, e := range ents {
		m := re.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		owner := prefix + "-" + m[1]
		if ownerAlive(owner, pid) {
			continue
		}
		stale = append(stale, e.Name())
		deadOwners[owner] = true
	}
	// Markers of owners that left no namespace behind.
	if ms, err := os.ReadDir(markerDir); err == nil {
		mre := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `-([0-9]+)$`)
		for _, m := range ms {
			if sm := mre.FindStringSubmatch(m.Name()); sm != nil {
				pid, _ := strconv.Atoi(sm[1])
				if !ownerAlive(m.Name(), pid) {
					deadOwners[m.Name()] = true
				}
			}
		}
	}
	var errs []error
	if len(stale) > 0 {
		errs = append(errs, teardown(stale, time.Second, nil))
	}
	for o := range deadOwners {
		if err := os.Remove(filepath.Join(markerDir, o)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return len(stale), errors.Join(errs...)
}

// ownerAlive reports whether the process that created owner's namespaces runs.
// Without a marker a live PID counts as the owner: better to leave a stale
// namespace than to delete a running lab's.
func ownerAlive(owner string, pid int) bool {
	if pid == os.Getpid() {
		return true
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	got, err := startTime(pid)
	if errors.Is(err, errGone) || errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		return true
	}
	want, err := os.ReadFile(filepath.Join(markerDir, owner))
	if err != nil {
		return true
	}
	return strings.TrimSpace(string(want)) == got
}

// startTime returns field 22 of /proc/PID/stat, the process start time in
// clock ticks since boot: with the PID it identifies a process uniquely. A
// zombie (killed, not yet reaped) counts as gone.
func startTime(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command name (field 2) may hold spaces and parentheses; fields after
	// the last ')' are plain.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", fmt.Errorf("bad /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return "", fmt.Errorf("short /proc/%d/stat", pid)
	}
	if f[0] == "Z" || f[0] == "X" {
		return "", errGone
	}
	return f[19], nil
}

var errGone = errors.New("process exited")

func writeMarker(owner string) error {
	st, err := startTime(os.Getpid())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(markerDir, 0o755); err != nil {
		return fmt.Errorf("marker dir: %w", err)
	}
	return os.WriteFile(filepath.Join(markerDir, owner), []byte(st+"\n"), 0o644)
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

// ipCmd runs `ip ARGS…`.
func ipCmd(args ...string) error { return runIP("", args...) }

// ipBatch runs several ip commands in namespace ns with one process.
func ipBatch(ns string, cmds ...string) error {
	return runIP(strings.Join(cmds, "\n")+"\n", "-n", ns, "-batch", "-")
}

func runIP(stdin string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// nsSysctl sets sysctls inside namespace ns. With optional, keys the kernel
// does not have are ignored.
func nsSysctl(ns string, optional bool, kvs ...string) error {
	args := []string{"netns", "exec", ns, "sysctl", "-q", "-w"}
	if optional {
		args = append(args, "-e")
	}
	return ipCmd(append(args, kvs...)...)
}

// The signal registry: while a lab is open, SIGINT and SIGTERM tear every open
// lab down before the test binary exits, so Ctrl-C leaves nothing behind.
var registry struct {
	sync.Mutex
	labs map[*Lab]struct{}
	ch   chan os.Signal
}

func register(l *Lab) {
	registry.Lock()
	defer registry.Unlock()
	if registry.labs == nil {
		registry.labs = map[*Lab]struct{}{}
		registry.ch = make(chan os.Signal, 1)
		go onSignal(registry.ch)
	}
	if len(registry.labs) == 0 {
		notifySignals(registry.ch)
	}
	registry.labs[l] = struct{}{}
}

func unregister(l *Lab) {
	registry.Lock()
	defer registry.Unlock()
	delete(registry.labs, l)
	last := true
	for o := range registry.labs {
		if o.owner == l.owner {
			last = false
		}
	}
	if last {
		_ = os.Remove(filepath.Join(markerDir, l.owner))
	}
	if len(registry.labs) == 0 {
		// Restore the default behaviour of SIGINT/SIGTERM.
		signal.Stop(registry.ch)
	}
}

func notifySignals(ch chan os.Signal) { signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM) }

func onSignal(ch chan os.Signal) {
	for sig := range ch {
		registry.Lock()
		labs := make([]*Lab, 0, len(registry.labs))
		for l := range registry.labs {
			labs = append(labs, l)
		}
		registry.Unlock()
		fmt.Fprintf(os.Stderr, "lab: got %v, tearing down %d lab(s)\n", sig, len(labs))
		for _, l := range labs {
			if err := l.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "lab: teardown of %s: %v\n", l.prefix, err)
			}
		}
		code := 1
		if s, ok := sig.(syscall.Signal); ok {
			code = 128 + int(s)
		}
		os.Exit(code)
	}
}
