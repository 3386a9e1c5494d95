//go:build e2e

package lab_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/test/e2e/lab"
)

func ping(ctx context.Context, from *lab.Node, to netip.Addr) error {
	_, err := from.Run(ctx, "ping", "-c", "1", "-W", "1", "-n", "-q", to.String())
	return err
}

// TestLabNetwork checks the harness itself: connectivity over both families,
// hostnames, address changes, link failures, late nodes, process control and
// a teardown that leaves nothing behind.
func TestLabNetwork(t *testing.T) {
	l := lab.New(t, lab.Config{Prefix: "idnst", Nodes: 2, Client: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n0, n1, c := l.Nodes()[0], l.Nodes()[1], l.Client()
	if c == nil || c.IPv4 != lab.Host4(201) || n1.IPv6 != lab.Host6(12) {
		t.Fatalf("Unexpected address plan: client %v, node1 %v", c, n1.IPv6)
	}

	t.Run("connectivity", func(t *testing.T) {
		for _, from := range []*lab.Node{n0, n1, c} {
			for _, to := range []*lab.Node{n0, n1, c} {
				if from == to {
					continue
				}
				for _, a := range []netip.Addr{to.IPv4, to.IPv6} {
					if err := ping(ctx, from, a); err != nil {
						t.Errorf("Ping %s → %s (%s): %v", from.Name, to.Name, a, err)
					}
				}
			}
		}
	})

	t.Run("isolated", func(t *testing.T) {
		res, err := n0.Run(ctx, "ip", "route", "show", "default")
		if err != nil || strings.TrimSpace(res.Stdout) != "" {
			t.Errorf("Node has a default route %q (%v)", res.Stdout, err)
		}
	})

	t.Run("hostname", func(t *testing.T) {
		p := n1.Start("hostname", []string{"hostname"})
		if err := p.Wait(ctx); err != nil {
			t.Fatalf("Hostname: %v", err)
		}
		if got := strings.TrimSpace(p.Log()); got != "node1" {
			t.Errorf("Hostname in node1 is %q", got)
		}
	})

	t.Run("address change", func(t *testing.T) {
		old4, old6 := n1.Prefix4(), n1.Prefix6()
		new4 := netip.PrefixFrom(lab.Host4(50), 24)
		new6 := netip.PrefixFrom(lab.Host6(50), 64)
		if err := n1.ReplaceAddr(old4, new4); err != nil {
			t.Fatal(err)
		}
		if err := n1.ReplaceAddr(old6, new6); err != nil {
			t.Fatal(err)
		}
		if n1.IPv4 != new4.Addr() || n1.IPv6 != new6.Addr() {
			t.Fatalf("Node addresses not updated: %v %v", n1.IPv4, n1.IPv6)
		}
		if has, _ := n1.HasAddr(old4.Addr()); has {
			t.Errorf("Old address %v still on node1", old4)
		}
		for _, a := range []netip.Addr{new4.Addr(), new6.Addr()} {
			if err := ping(ctx, n0, a); err != nil {
				t.Errorf("Ping new address %v: %v", a, err)
			}
		}
		if err := ping(ctx, n0, old4.Addr()); err == nil {
			t.Errorf("Old address %v still answers", old4)
		}
		vip := netip.PrefixFrom(lab.Host4(100), 32)
		if err := n0.AddAddr(vip); err != nil {
			t.Fatal(err)
		}
		if has, err := n0.HasAddr(vip.Addr()); !has || err != nil {
			t.Errorf("HasAddr(%v) = %v, %v after AddAddr", vip, has, err)
		}
		if err := n0.DelAddr(vip); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("link down and unplug", func(t *testing.T) {
		if err := n0.LinkDown(); err != nil {
			t.Fatal(err)
		}
		if err := ping(ctx, c, n0.IPv4); err == nil {
			t.Errorf("Node answers with its link down")
		}
		if err := n0.LinkUp(); err != nil {
			t.Fatal(err)
		}
		// keep_addr_on_down: the IPv6 address survives the link going down.
		lab.Eventually(t, 5*time.Second, 50*time.Millisecond, "node0 reachable after link up", func() error {
			if err := ping(ctx, c, n0.IPv6); err != nil {
				return err
			}
			return ping(ctx, c, n0.IPv4)
		})
		if err := n0.Unplug(); err != nil {
			t.Fatal(err)
		}
		if err := ping(ctx, c, n0.IPv4); err == nil {
			t.Errorf("Node answers while unplugged")
		}
		if err := n0.Plug(); err != nil {
			t.Fatal(err)
		}
		lab.Eventually(t, 5*time.Second, 50*time.Millisecond, "node0 reachable after plug", func() error {
			return ping(ctx, c, n0.IPv4)
		})
	})

	t.Run("late node", func(t *testing.T) {
		n2 := l.AddNode("late")
		if n2.IPv4 != lab.Host4(13) || n2.Index != 2 || len(l.Nodes()) != 3 {
			t.Fatalf("Late node: %v index %d, %d nodes", n2.IPv4, n2.Index, len(l.Nodes()))
		}
		if err := ping(ctx, n2, n0.IPv6); err != nil {
			t.Error(err)
		}
	})

	t.Run("processes", func(t *testing.T) {
		p := n0.Start("sleep-term", []string{"sleep", "60"})
		if err := p.Stop(3 * time.Second); err != nil {
			t.Fatal(err)
		}
		var ee *exec.ExitError
		if err := p.Err(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Errorf("Stop: process ended with %v, want SIGTERM", err)
		}
		// A process that ignores SIGTERM is killed after the grace.
		p = n0.Start("stubborn", []string{"sh", "-c", `trap "" TERM; echo ready; while :; do sleep 1; done`})
		lab.Eventually(t, 5*time.Second, 20*time.Millisecond, "stubborn ready", func() error {
			if !strings.Contains(p.Log(), "ready") {
				return lab.ErrNotYet
			}
			return nil
		})
		start := time.Now()
		if err := p.Stop(300 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("Stop with SIGKILL took %v", d)
		}
		p = n0.Start("usr1", []string{"sh", "-c", `trap "echo got-usr1; exit 7" USR1; echo ready; while :; do sleep 0.05; done`})
		lab.Eventually(t, 5*time.Second, 20*time.Millisecond, "usr1 ready", func() error {
			if !strings.Contains(p.Log(), "ready") {
				return lab.ErrNotYet
			}
			return nil
		})
		if err := p.Signal(syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(ctx); !errors.As(err, &ee) || ee.ExitCode() != 7 {
			t.Errorf("After SIGUSR1: %v, want exit 7", err)
		}
		p = n0.Start("crash", []string{"sleep", "60"})
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
		if !p.Exited() {
			t.Error("Kill returned before the process exited")
		}
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		res, err := n0.Run(short, "sleep", "5")
		if err == nil || !errors.Is(err, context.DeadlineExceeded) || res.Duration > 3*time.Second {
			t.Errorf("Run past its deadline: %v after %v", err, res.Duration)
		}
	})

	t.Run("teardown", func(t *testing.T) {
		sleeper := c.Start("sleeper", []string{"sleep", "600"})
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if !sleeper.Exited() {
			t.Error("Process survived Close")
		}
		for _, n := range append(l.Nodes(), c) {
			if _, err := os.Stat(filepath.Join("/run/netns", n.NS)); err == nil {
				t.Errorf("Namespace %s survived Close", n.NS)
			}
		}
		if _, err := os.Stat(filepath.Join("/run/netns", l.SwitchNS())); err == nil {
			t.Errorf("Switch namespace survived Close")
		}
		t.Logf("Lab up %v, teardown %v", l.UpDuration, l.TeardownDuration)
	})
}

// TestLabStaleCleanup leaves namespaces behind as a killed run would (owner PID
// gone, a process still inside) and checks that the next lab removes them.
func TestLabStaleCleanup(t *testing.T) {
	lab.RequirePrereqs(t)
	// A PID that just exited stands for the killed owner.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf("idnss-%d-1-node0", dead.Process.Pid)
	if out, err := exec.Command("ip", "netns", "add", stale).CombinedOutput(); err != nil {
		t.Fatalf("Ip netns add: %v: %s", err, out)
	}
	orphan := exec.Command("ip", "netns", "exec", stale, "sleep", "600")
	orphan.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- orphan.Wait() }()
	// A stale process has long since entered its namespace.
	lab.Eventually(t, 5*time.Second, 10*time.Millisecond, "orphan in its namespace", func() error {
		out, err := exec.Command("ip", "netns", "pids", stale).Output()
		if err != nil || !strings.Contains(string(out), fmt.Sprint(orphan.Process.Pid)) {
			return lab.ErrNotYet
		}
		return nil
	})
	t.Cleanup(func() {
		_ = syscall.Kill(-orphan.Process.Pid, syscall.SIGKILL)
		_ = exec.Command("ip", "netns", "del", stale).Run()
	})

	l := lab.New(t, lab.Config{Prefix: "idnss", Nodes: 1})
	if _, err := os.Stat(filepath.Join("/run/netns", stale)); err == nil {
		t.Errorf("Stale namespace %s survived New", stale)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Error("Process in the stale namespace survived New")
	}
	if _, err := os.Stat(filepath.Join("/run/netns", l.Nodes()[0].NS)); err != nil {
		t.Errorf("The new lab's own namespace is missing: %v", err)
	}
}
