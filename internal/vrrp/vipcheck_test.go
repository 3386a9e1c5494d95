package vrrp

import (
	"context"
	"net/netip"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/lb/netnstest"
)

func TestStale(t *testing.T) {
	present := []netip.Prefix{
		netip.MustParsePrefix("198.51.100.11/24"), // the node's own address
		netip.MustParsePrefix("192.0.2.5/32"),     // a VIP as keepalived adds it
		netip.MustParsePrefix("192.0.2.99/32"),    // someone else's host address
		netip.MustParsePrefix("2001:db8::5/128"),
		netip.MustParsePrefix("192.0.2.10/24"), // a VIP address as a subnet: not ours to remove
	}
	got := Stale(present, addrs("192.0.2.5", "2001:db8::5", "192.0.2.10"))
	want := []netip.Prefix{netip.MustParsePrefix("192.0.2.5/32"), netip.MustParsePrefix("2001:db8::5/128")}
	if !slices.Equal(got, want) {
		t.Errorf("Stale = %v, want %v", got, want)
	}
}

func TestPidAlive(t *testing.T) {
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "keepalived.pid")
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	writeFile(t, pidfile, strconv.Itoa(cmd.Process.Pid)+"\n")
	if !PidAlive(pidfile, "sleep")() {
		t.Error("A running sleep is not alive")
	}
	if PidAlive(pidfile, "keepalived")() {
		t.Error("A pid reused by another program counts as keepalived")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if PidAlive(pidfile, "sleep")() {
		t.Error("A dead process is alive")
	}
	if PidAlive(filepath.Join(dir, "missing.pid"), "sleep")() {
		t.Error("A missing pid file is alive")
	}
}

// TestVIPCheckerRemovesStaleVIPs puts VIPs on an interface in a namespace
// made for the test, as a keepalived killed with SIGKILL leaves them, and
// runs the checker there with keepalived reported dead: the VIPs go, the
// node's own address stays. With keepalived alive, nothing is touched.
func TestVIPCheckerRemovesStaleVIPs(t *testing.T) {
	ns, _ := netnstest.Pair(t, "vip")
	for _, a := range []string{"192.0.2.5/32", "2001:db8::5/128"} {
		if out, err := exec.Command("ip", "-n", ns, "addr", "add", a, "dev", "eth0", "nodad").CombinedOutput(); err != nil {
			if out2, err2 := exec.Command("ip", "-n", ns, "addr", "add", a, "dev", "eth0").CombinedOutput(); err2 != nil {
				t.Fatalf("ip addr add %s: %v: %s %s", a, err, out, out2)
			}
		}
	}
	show := func() string {
		b, _ := exec.Command("ip", "-n", ns, "addr", "show", "dev", "eth0").CombinedOutput()
		return string(b)
	}
	run := func(alive bool, d time.Duration) []netip.Prefix {
		var removed []netip.Prefix
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
			if err := netnstest.Enter(ns); err != nil {
				done <- err
				return
			}
			v := &VIPChecker{Interface: "eth0", VIPs: addrs("192.0.2.5", "2001:db8::5"), Alive: func() bool { return alive },
				Interval: 20 * time.Millisecond, Confirm: 3,
				Removed: func(p netip.Prefix, err error) {
					if err != nil {
						t.Errorf("Removing %s: %v", p, err)
					}
					removed = append(removed, p)
				}}
			done <- v.Run(ctx)
		}()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return removed
	}
	if removed := run(true, 300*time.Millisecond); len(removed) != 0 || !strings.Contains(show(), "192.0.2.5/32") {
		t.Fatalf("Checker touched the VIPs of a live keepalived: %v\n%s", removed, show())
	}
	removed := run(false, time.Second)
	if len(removed) != 2 {
		t.Errorf("Removed %v, want both VIPs", removed)
	}
	s := show()
	if strings.Contains(s, "192.0.2.5/32") || strings.Contains(s, "2001:db8::5/128") {
		t.Errorf("VIPs still on eth0:\n%s", s)
	}
	if !strings.Contains(s, "198.51.100.11/24") {
		t.Errorf("The node's own address was removed:\n%s", s)
	}
}
