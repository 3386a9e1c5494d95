package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// Node is one namespace on the lab bridge: a cluster node, or a client when
// Client is set.
type Node struct {
	Name   string           // node name, also the hostname of its processes
	NS     string           // network namespace name
	Index  int              // position among the cluster nodes (0 for clients)
	Host   int              // host part of its addresses
	Client bool             // not a cluster node
	IPv4   netip.Addr       // address on eth0, /24
	IPv6   netip.Addr       // address on eth0, /64
	MAC    net.HardwareAddr // fixed MAC of eth0
	// Gateway4 and Gateway6 are the switch namespace's addresses on the
	// node's link in a routed lab (its default routes); zero on a bridge.
	Gateway4, Gateway6 netip.Addr

	port string // its veth in the switch namespace
	lab  *Lab
}

// Lab returns the lab the node belongs to.
func (n *Node) Lab() *Lab { return n.lab }

// Prefix4 is the node's IPv4 address with its prefix length.
func (n *Node) Prefix4() netip.Prefix { return netip.PrefixFrom(n.IPv4, 24) }

// Prefix6 is the node's IPv6 address with its prefix length.
func (n *Node) Prefix6() netip.Prefix { return netip.PrefixFrom(n.IPv6, 64) }

// Result is what a one-shot command printed and how it ended.
type Result struct {
	Stdout, Stderr string
	ExitCode       int // -1 when it did not exit normally (killed, timed out, not started)
	Duration       time.Duration
}

// Run runs argv inside the node's namespace and waits for it, bounded by ctx
// (give it a deadline). The error is non-nil when the command could not start,
// was stopped by ctx, or exited non-zero; Result is filled in every case.
func (n *Node) Run(ctx context.Context, argv ...string) (Result, error) {
	if len(argv) == 0 {
		return Result{ExitCode: -1}, errors.New("lab: run: empty command")
	}
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.NS}, argv...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Own process group so a timeout kills what the command started too; and
	// killed with the test binary, whatever happens to it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	start := time.Now()
	err := cmd.Run()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: -1, Duration: time.Since(start)}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return res, fmt.Errorf("lab: %s on %s: %w: %s", strings.Join(argv, " "), n.Name, err, strings.TrimSpace(res.Stderr))
	}
	return res, nil
}

// Dig runs dig in the node with a bounded wait (+time=2 +tries=1) and args.
func (n *Node) Dig(ctx context.Context, args ...string) (Result, error) {
	return n.Run(ctx, append([]string{"dig", "+time=2", "+tries=1"}, args...)...)
}

// HTTPGet fetches url with curl from inside the node and returns the body; a
// status of 400 or more is an error.
func (n *Node) HTTPGet(ctx context.Context, url string) (string, error) {
	res, err := n.Run(ctx, "curl", "-fsS", "-g", "-m", "2", url)
	return res.Stdout, err
}

// LinkDown sets the node's eth0 down (the node turns its NIC off).
func (n *Node) LinkDown() error { return ipCmd("-n", n.NS, "link", "set", Iface, "down") }

// LinkUp sets the node's eth0 up again.
func (n *Node) LinkUp() error { return ipCmd("-n", n.NS, "link", "set", Iface, "up") }

// Unplug sets the switch side of the node's cable down: the node's eth0 stays
// administratively up but loses carrier, as when a cable or switch port fails.
func (n *Node) Unplug() error { return ipCmd("-n", n.lab.sw, "link", "set", n.port, "down") }

// Plug undoes Unplug.
func (n *Node) Plug() error { return ipCmd("-n", n.lab.sw, "link", "set", n.port, "up") }

// AddAddr adds an address to eth0 (IPv6 without DAD).
func (n *Node) AddAddr(p netip.Prefix) error {
	args := []string{"-n", n.NS, "addr", "add", p.String(), "dev", Iface}
	if p.Addr().Is6() {
		args = append(args, "nodad")
	}
	return ipCmd(args...)
}

// DelAddr removes an address from eth0.
func (n *Node) DelAddr(p netip.Prefix) error {
	return ipCmd("-n", n.NS, "addr", "del", p.String(), "dev", Iface)
}

// ReplaceAddr swaps old for new on eth0 (an address change on a running node)
// and updates IPv4/IPv6 when old was the node's address. new is added first, so
// the node is never without an address of that family.
func (n *Node) ReplaceAddr(old, new netip.Prefix) error {
	if err := n.AddAddr(new); err != nil {
		return err
	}
	if err := n.DelAddr(old); err != nil {
		return err
	}
	n.lab.mu.Lock()
	defer n.lab.mu.Unlock()
	switch old.Addr() {
	case n.IPv4:
		n.IPv4 = new.Addr()
	case n.IPv6:
		n.IPv6 = new.Addr()
	}
	return nil
}

// Addrs lists eth0's global addresses.
func (n *Node) Addrs() ([]netip.Prefix, error) {
	out, err := exec.Command("ip", "-n", n.NS, "-j", "addr", "show", "dev", Iface, "scope", "global").Output()
	if err != nil {
		return nil, fmt.Errorf("lab: ip addr show in %s: %w", n.NS, err)
	}
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, fmt.Errorf("lab: parse ip -j addr: %w", err)
	}
	var ps []netip.Prefix
	for _, l := range links {
		for _, a := range l.AddrInfo {
			if a.Local == "" {
				continue // ip -j prints {} for addresses the filter dropped
			}
			ip, err := netip.ParseAddr(a.Local)
			if err != nil {
				return nil, fmt.Errorf("lab: ip -j addr: %w", err)
			}
			ps = append(ps, netip.PrefixFrom(ip, a.PrefixLen))
		}
	}
	return ps, nil
}

// HasAddr reports whether a is on eth0 (a VIP holder check).
func (n *Node) HasAddr(a netip.Addr) (bool, error) {
	ps, err := n.Addrs()
	if err != nil {
		return false, err
	}
	for _, p := range ps {
		if p.Addr() == a {
			return true, nil
		}
	}
	return false, nil
}

// DialContext opens a connection from inside the node's namespace, so that
// the test process can reach a server that only the lab network can see
// (a kube-apiserver on a lab address, for example). The connection keeps
// working from any goroutine: a socket stays in the namespace it was made in.
func (n *Node) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.inNS(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen opens a listener inside the node's namespace.
func (n *Node) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.inNS(func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// inNS runs f on an OS thread moved into the node's namespace, then moves
// the thread back. The thread must survive: a child process started with
// Pdeathsig (kubetest's, for one) is killed when the thread that forked it
// exits, and Go discards a thread still locked when its goroutine ends,
// which may be that very thread. Only if the way back fails is the thread
// left locked, and so discarded, rather than handed to other goroutines in
// the wrong namespace.
func (n *Node) inNS(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer home.Close()
		ns, err := os.Open(filepath.Join(netnsDir, n.NS))
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		err = unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET)
		ns.Close()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("lab: enter %s: %w", n.NS, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- errors.Join(ferr, fmt.Errorf("lab: leave %s: %w", n.NS, err))
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// DropVRRPWith makes the switch drop VRRP (IP protocol 112, both families)
// between n and each of others, both ways, while everything else (ARP,
// unicast, other multicast) still flows: what a switch that filters the
// adverts (IGMP snooping without a querier, an ACL) does. Each node pair
// counts the dropped packets. AllowVRRP undoes it; Lab.Close deletes the
// switch namespace with it.
func (n *Node) DropVRRPWith(others ...*Node) error {
	return n.dropVRRP([]string{"ip protocol 112", "ip6 nexthdr 112"}, others)
}

// DropVRRP6With is DropVRRPWith for IPv6 VRRP only: the IPv4 instances
// still hear each other.
func (n *Node) DropVRRP6With(others ...*Node) error {
	return n.dropVRRP([]string{"ip6 nexthdr 112"}, others)
}

func (n *Node) dropVRRP(matches []string, others []*Node) error {
	var rules strings.Builder
	for _, o := range others {
		for _, dir := range [][2]string{{n.port, o.port}, {o.port, n.port}} {
			for _, m := range matches {
				fmt.Fprintf(&rules, "\t\tiifname %q oifname %q %s counter drop\n", dir[0], dir[1], m)
			}
		}
	}
	conf := fmt.Sprintf("table bridge %s {\n\tchain vrrp {\n\t\ttype filter hook forward priority 0; policy accept;\n%s\t}\n}\n",
		n.vrrpTable(), rules.String())
	return nsStdin(n.lab.sw, conf, "nft", "-f", "-")
}

// AllowVRRP undoes DropVRRPWith.
func (n *Node) AllowVRRP() error {
	return nsStdin(n.lab.sw, "", "nft", "delete", "table", "bridge", n.vrrpTable())
}

func (n *Node) vrrpTable() string { return "drop_vrrp_" + n.port }

// DropAdverts makes the switch drop the IPv4 VRRP adverts n sends that
// also match expr, an nft expression such as "numgen inc mod 10 < 1" (one
// in ten) or "numgen random mod 100 < 2" (2 % at random), where they enter
// the switch: every other host misses the same ones, as when n's link
// loses or delays them. A new call starts the expression's counter again;
// AllowAdverts undoes it.
func (n *Node) DropAdverts(expr string) error {
	conf := fmt.Sprintf("table bridge %[1]s {}\ndelete table bridge %[1]s\ntable bridge %[1]s {\n\tchain in {\n\t\ttype filter hook prerouting priority 0; policy accept;\n\t\tiifname %[2]q ether type ip ip protocol 112 %[3]s counter drop\n\t}\n}\n",
		n.gapTable(), n.port, expr)
	return nsStdin(n.lab.sw, conf, "nft", "-f", "-")
}

// AllowAdverts undoes DropAdverts.
func (n *Node) AllowAdverts() error {
	return nsStdin(n.lab.sw, "", "nft", "delete", "table", "bridge", n.gapTable())
}

func (n *Node) gapTable() string { return "drop_adverts_" + n.port }

// VRRPDropCounters is how many packets DropVRRPWith's rules have dropped.
func (n *Node) VRRPDropCounters() (int, error) {
	var out bytes.Buffer
	cmd := exec.Command("ip", "netns", "exec", n.lab.sw, "nft", "list", "table", "bridge", n.vrrpTable())
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("nft list table %s: %w", n.vrrpTable(), err)
	}
	total := 0
	for _, m := range regexp.MustCompile(`counter packets (\d+)`).FindAllStringSubmatch(out.String(), -1) {
		k, _ := strconv.Atoi(m[1])
		total += k
	}
	return total, nil
}

// ListenVRRP opens a raw socket for IPv4 VRRP (IP protocol 112) in the
// node's namespace, joined to the VRRP group (224.0.0.18) on the lab
// interface: each read returns one advert's IP payload and its source.
func (n *Node) ListenVRRP() (net.PacketConn, error) {
	var c net.PacketConn
	err := n.inNS(func() error {
		ifi, err := net.InterfaceByName(Iface)
		if err != nil {
			return err
		}
		raw, err := net.ListenPacket("ip4:112", "0.0.0.0")
		if err != nil {
			return err
		}
		if err := ipv4.NewPacketConn(raw).JoinGroup(ifi, &net.IPAddr{IP: net.IPv4(224, 0, 0, 18)}); err != nil {
			raw.Close()
			return fmt.Errorf("lab: join 224.0.0.18 on %s: %w", n.Name, err)
		}
		c = raw
		return nil
	})
	return c, err
}
