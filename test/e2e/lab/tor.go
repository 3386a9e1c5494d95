package lab

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/infradns/infradns/internal/tor"
)

// ToRConfig is the BGP side of a routed lab's switch namespace: it peers
// with the nodes and installs what they announce as (ECMP) kernel routes.
// The configuration is internal/tor's, the one the operator guide prints,
// with the lab's faster session timers.
type ToRConfig struct {
	// ASN is the ToR's own AS number.
	ASN   uint32
	Peers []ToRPeer
	// BFD runs single-hop BFD on every session, BFDInterval (default
	// 100 ms, both ways) × BFDMultiplier (default 3).
	BFD           bool
	BFDInterval   time.Duration
	BFDMultiplier int
	// HoldTime and Keepalive default to 3 s and 1 s (the lab's nodes set
	// the same), the connect retry to 1 s.
	HoldTime, Keepalive time.Duration
	// VIPs: only host routes inside these prefixes are accepted, as the
	// guide configures it; empty, every route.
	VIPs []netip.Prefix
	// Resilient makes the switch forward each VIP through a resilient
	// next-hop group built from the routes BIRD learns (see resilient.go),
	// as a switch with resilient hashing does; else BIRD's ECMP routes
	// (hash-threshold) forward. BIRD only.
	Resilient bool
}

// ToRPeer is one node session.
type ToRPeer struct {
	Addr     netip.Addr
	ASN      uint32
	Password string
}

// config is the ToR's configuration for internal/tor.
func (c ToRConfig) config() tor.Config {
	tc := tor.Config{
		ASN:           c.ASN,
		RouterID:      netip.MustParseAddr("10.91.255.1"),
		BFD:           c.BFD,
		BFDInterval:   c.BFDInterval,
		BFDMultiplier: c.BFDMultiplier,
		HoldTime:      cmp.Or(c.HoldTime, 3*time.Second),
		Keepalive:     cmp.Or(c.Keepalive, time.Second),
		ConnectRetry:  time.Second,
		VIPs:          c.VIPs,
	}
	if c.Resilient {
		tc.KernelTable = resilientTable
	}
	for _, p := range c.Peers {
		tc.Peers = append(tc.Peers, tor.Peer{Addr: p.Addr, ASN: p.ASN, Password: p.Password})
	}
	return tc
}

// ToR is a BGP daemon (FRR or BIRD) in one of the lab's namespaces.
type ToR struct {
	kind string
	ns   string
	dir  string
	lab  *Lab
	// table holds the daemon's routes: 0 the main one, else resilientTable.
	table int
}

// Namespace is the network namespace the daemon runs in.
func (t *ToR) Namespace() string { return t.ns }

// Kind is "frr" or "bird".
func (t *ToR) Kind() string { return t.kind }

// frrDaemons are the FRR daemons a speaker needs.
var frrDaemons = []string{"zebra", "bfdd", "bgpd", "staticd"}

// StartFRR starts FRR 8.4 as the ToR with internal/tor's configuration.
func (l *Lab) StartFRR(cfg ToRConfig) (*ToR, error) {
	return l.startFRR(l.sw, tor.FRR(cfg.config()))
}

// StartFRR runs FRR in the node's namespace with conf (an integrated
// frr.conf): a site's own speaker on the node.
func (n *Node) StartFRR(conf string) error {
	_, err := n.lab.startFRR(n.NS, conf)
	return err
}

func (l *Lab) startFRR(ns, conf string) (*ToR, error) {
	for _, d := range frrDaemons {
		if _, err := os.Stat("/usr/lib/frr/" + d); err != nil {
			return nil, fmt.Errorf("FRR is not installed (Debian package frr; make deps): %w", err)
		}
	}
	u, err := user.Lookup("frr")
	if err != nil {
		return nil, fmt.Errorf("FRR's user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// Not under the test's temporary directory: FRR drops to user frr,
	// which must reach its sockets.
	dir, err := os.MkdirTemp("", ns+"-frr-")
	if err != nil {
		return nil, err
	}
	t := &ToR{kind: "frr", ns: ns, dir: dir, lab: l}
	l.t.Cleanup(func() { t.Stop() })
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	for _, f := range []string{"empty.conf", "frr.conf"} {
		data := ""
		if f == "frr.conf" {
			data = conf
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte(data), 0o644); err != nil {
			return nil, err
		}
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	for _, d := range frrDaemons {
		args := []string{"netns", "exec", ns, "/usr/lib/frr/" + d, "-d", "-N", ns, "-u", "frr", "-g", "frr", "-P", "0",
			"--vty_socket", dir, "-z", filepath.Join(dir, "zserv.api"), "-i", filepath.Join(dir, d+".pid"),
			"-f", filepath.Join(dir, "empty.conf"), "--log", "file:" + filepath.Join(dir, d+".log")}
		switch d {
		case "zebra":
			args = append(args, "-s", "90000000")
		case "bfdd":
			args = append(args, "--bfdctl", filepath.Join(dir, "bfdd.sock"))
		}
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("start %s: %w: %s", d, err, out)
		}
	}
	// vtysh needs every daemon's vty socket.
	err = Poll(context.Background(), 10*time.Second, 20*time.Millisecond, func() error {
		for _, d := range frrDaemons {
			if _, err := os.Stat(filepath.Join(dir, d+".vty")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("FRR in %s did not start: %w", ns, err)
	}
	if out, err := exec.Command("vtysh", "--vty_socket", dir, "-f", filepath.Join(dir, "frr.conf")).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("FRR configuration: %w: %s\n%s", err, out, conf)
	}
	return t, nil
}

// StartBIRD starts BIRD 2 as the ToR with internal/tor's configuration:
// one BGP protocol per node, and the kernel protocols merging equal routes
// into ECMP routes.
func (l *Lab) StartBIRD(cfg ToRConfig) (*ToR, error) {
	if _, err := exec.LookPath("bird"); err != nil {
		return nil, fmt.Errorf("BIRD is not installed (Debian package bird2; make deps): %w", err)
	}
	var b strings.Builder
	// Its log beside the lab's process logs, kept when the test fails:
	// the sessions' and BFD's state changes, with milliseconds.
	fmt.Fprintf(&b, "log %q all;\ntimeformat log \"%%T.%%3f\";\ndebug protocols { states };\n", filepath.Join(l.logDir, "tor-bird.log"))
	b.WriteString(tor.BIRD(cfg.config()))
	dir, err := os.MkdirTemp("", l.sw+"-bird-")
	if err != nil {
		return nil, err
	}
	t := &ToR{kind: "bird", ns: l.sw, dir: dir, lab: l}
	if cfg.Resilient {
		t.table = resilientTable
	}
	l.t.Cleanup(func() { t.Stop() })
	conf := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	// A ToR is a box of its own: here it shares the lab's two cores with
	// every node, and a ToR starved for BFD's 300 ms dropped the sessions
	// of two nodes at once while a third one's containers started
	// (TestKubeletBGP). Real-time priority gives it its own CPU back; it
	// uses little of it.
	out, err := exec.Command("chrt", "-f", "10", "ip", "netns", "exec", l.sw, "bird", "-c", conf, "-s", t.birdSock(), "-P", filepath.Join(dir, "bird.pid")).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("start bird: %w: %s\n%s", err, out, b.String())
	}
	if cfg.Resilient {
		if err := t.mirrorResilient(); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func (t *ToR) birdSock() string { return filepath.Join(t.dir, "bird.ctl") }

// Show is the daemon's answer to a command, for test logs: "summary" is
// the session overview of either daemon; anything else goes to vtysh -c or
// birdc as it is.
func (t *ToR) Show(args ...string) string {
	var cmd *exec.Cmd
	switch {
	case t.kind == "frr" && len(args) == 1 && args[0] == "summary":
		cmd = exec.Command("vtysh", "--vty_socket", t.dir, "-c", "show bgp summary", "-c", "show bfd peers brief")
	case t.kind == "frr":
		cmd = exec.Command("vtysh", "--vty_socket", t.dir, "-c", strings.Join(args, " "))
	case len(args) == 1 && args[0] == "summary":
		cmd = exec.Command("birdc", "-s", t.birdSock(), "show", "protocols")
	default:
		cmd = exec.Command("birdc", append([]string{"-s", t.birdSock()}, args...)...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return string(out)
}

// Established counts the BGP sessions in state Established.
func (t *ToR) Established() (int, error) {
	if t.kind == "frr" {
		out, err := exec.Command("vtysh", "--vty_socket", t.dir, "-c", "show bgp summary json").Output()
		if err != nil {
			return 0, fmt.Errorf("vtysh: %w", err)
		}
		return strings.Count(string(out), `"state":"Established"`), nil
	}
	out, err := exec.Command("birdc", "-s", t.birdSock(), "show", "protocols").Output()
	if err != nil {
		return 0, fmt.Errorf("birdc: %w", err)
	}
	return strings.Count(string(out), "Established"), nil
}

// NextHops are the next hops of the daemon's kernel route to prefix in the
// ToR's namespace (BIRD's own table with Resilient, which the switch's
// groups follow), sorted; none without a route.
func (t *ToR) NextHops(prefix netip.Prefix) ([]netip.Addr, error) {
	fam := "-4"
	if prefix.Addr().Is6() {
		fam = "-6"
	}
	out, err := exec.Command("ip", fam, "-n", t.ns, "-j", "route", "show", "table", strconv.Itoa(cmp.Or(t.table, 254)), "exact", prefix.String()).Output()
	if err != nil {
		return nil, fmt.Errorf("ip route show %s: %w", prefix, err)
	}
	var routes []struct {
		Gateway  string `json:"gateway"`
		Nexthops []struct {
			Gateway string `json:"gateway"`
		} `json:"nexthops"`
	}
	if len(strings.TrimSpace(string(out))) > 0 {
		if err := json.Unmarshal(out, &routes); err != nil {
			return nil, fmt.Errorf("ip route: %w: %s", err, out)
		}
	}
	var hs []netip.Addr
	for _, r := range routes {
		gws := []string{r.Gateway}
		for _, n := range r.Nexthops {
			gws = append(gws, n.Gateway)
		}
		for _, g := range gws {
			if a, err := netip.ParseAddr(g); err == nil {
				hs = append(hs, a)
			}
		}
	}
	slices.SortFunc(hs, netip.Addr.Compare)
	return slices.Compact(hs), nil
}

// WaitNextHops polls every 5 ms until the route to prefix has exactly n
// next hops, and returns them.
func (t *ToR) WaitNextHops(ctx context.Context, prefix netip.Prefix, n int) ([]netip.Addr, error) {
	for {
		hs, err := t.NextHops(prefix)
		if err == nil && len(hs) == n {
			return hs, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("%d next hops %v", len(hs), hs)
			}
			return hs, errors.Join(ctx.Err(), err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Stop stops the daemons (by their pid files) and removes their directory
// and FRR's /var/run/frr/NS, which -N creates whatever the paths say.
func (t *ToR) Stop() error {
	pids, _ := filepath.Glob(filepath.Join(t.dir, "*.pid"))
	var procs []int
	for _, p := range pids {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			if syscall.Kill(pid, syscall.SIGTERM) == nil {
				procs = append(procs, pid)
			}
		}
	}
	// zebra removes its routes on the way out; give them a moment.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		procs = slices.DeleteFunc(procs, func(pid int) bool { return syscall.Kill(pid, 0) != nil })
		if len(procs) == 0 {
			break
		}
	}
	for _, pid := range procs {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if t.kind == "frr" {
		_ = os.RemoveAll(filepath.Join("/var/run/frr", t.ns))
	}
	return os.RemoveAll(t.dir)
}
