package vrrp

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
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

// TestPidAliveZombie kills a child and does not reap it: the zombie keeps
// its pid and comm and answers kill(pid, 0), but a keepalived in that state
// holds nothing.
func TestPidAliveZombie(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "keepalived.pid")
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := false
	defer func() {
		if !reaped {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	writeFile(t, pidfile, strconv.Itoa(cmd.Process.Pid)+"\n")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Wait (without reaping) until the kernel made it a zombie.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		if _, st, ok := ProcStat(b); ok && st == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed child never became a zombie: %s", b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := syscall.Kill(cmd.Process.Pid, 0); err != nil {
		t.Fatalf("kill(zombie, 0) = %v: the case under test needs it to succeed", err)
	}
	if PidAlive(pidfile, "sleep")() {
		t.Error("an unreaped, killed sleep (a zombie) is alive")
	}
	_ = cmd.Wait()
	reaped = true
	if PidAlive(pidfile, "sleep")() {
		t.Error("a reaped sleep is alive")
	}
}

func TestProcStat(t *testing.T) {
	for _, tc := range []struct {
		in    string
		comm  string
		state byte
		ok    bool
	}{
		{"1234 (keepalived) S 1 1234 1234 0 -1", "keepalived", 'S', true},
		{"1234 (keepalived) Z 1 1234", "keepalived", 'Z', true},
		{"99 (a (b) c) R 1 2", "a (b) c", 'R', true},
		{"99 (x y) D 1", "x y", 'D', true},
		{"99 keepalived S", "", 0, false},
		{"99 (keepalived)", "", 0, false},
		{"99 (keepalived)S", "", 0, false},
		{"", "", 0, false},
	} {
		comm, state, ok := ProcStat([]byte(tc.in))
		if comm != tc.comm || state != tc.state || ok != tc.ok {
			t.Errorf("ProcStat(%q) = %q, %q, %v; want %q, %q, %v", tc.in, comm, state, ok, tc.comm, tc.state, tc.ok)
		}
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
	run := func(alive bool, d time.Duration, elsewhere func(netip.Addr, time.Time) bool) []netip.Prefix {
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
				Interval: 20 * time.Millisecond, Confirm: 3, HeldElsewhere: elsewhere, Grace: time.Hour,
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
	if removed := run(true, 300*time.Millisecond, nil); len(removed) != 0 || !strings.Contains(show(), "192.0.2.5/32") {
		t.Fatalf("Checker touched the VIPs of a live keepalived: %v\n%s", removed, show())
	}
	// Dead, but nobody else holds the VIPs yet: a connection to them is
	// still refused here at once, so they stay (Grace is an hour).
	never := func(netip.Addr, time.Time) bool { return false }
	if removed := run(false, 300*time.Millisecond, never); len(removed) != 0 || !strings.Contains(show(), "192.0.2.5/32") {
		t.Fatalf("Checker removed VIPs no other node holds: %v\n%s", removed, show())
	}
	// Another node took the IPv4 VIP only.
	v4 := func(a netip.Addr, _ time.Time) bool { return a == netip.MustParseAddr("192.0.2.5") }
	if removed := run(false, 300*time.Millisecond, v4); !slices.Equal(removed, []netip.Prefix{netip.MustParsePrefix("192.0.2.5/32")}) {
		t.Fatalf("Removed %v, want only the VIP held elsewhere\n%s", removed, show())
	}
	removed := run(false, time.Second, nil)
	if len(removed) != 1 || removed[0] != netip.MustParsePrefix("2001:db8::5/128") {
		t.Errorf("Removed %v, want the IPv6 VIP", removed)
	}
	s := show()
	if strings.Contains(s, "192.0.2.5/32") || strings.Contains(s, "2001:db8::5/128") {
		t.Errorf("VIPs still on eth0:\n%s", s)
	}
	if !strings.Contains(s, "198.51.100.11/24") {
		t.Errorf("The node's own address was removed:\n%s", s)
	}
}

func TestHeard(t *testing.T) {
	own := netip.MustParseAddr("198.51.100.11")
	h := &Heard{Own: func(a netip.Addr) bool { return a == own }}
	wake := h.Wake()
	t0 := time.Unix(1000, 0)
	adv := func(src string, prio uint8, vips ...string) Observation {
		return Observation{Source: netip.MustParseAddr(src), Advert: Advert{Version: 3, VRID: 222, Priority: prio, Addresses: addrs(vips...)}}
	}
	woken := func() bool {
		select {
		case <-wake:
			return true
		default:
			return false
		}
	}
	h.Observe(adv("198.51.100.11", 250, "192.0.2.5"), t0)
	h.Observe(adv("198.51.100.12", 0, "192.0.2.5"), t0)
	if woken() {
		t.Error("woken by our own advert or a resignation")
	}
	h.Observe(adv("198.51.100.12", 210, "192.0.2.5"), t0)
	h.Observe(adv("198.51.100.12", 210, "192.0.2.5"), t0) // coalesced, never blocks
	if !woken() || woken() {
		t.Error("want exactly one wake-up after two adverts from another router")
	}
	h = &Heard{Own: func(a netip.Addr) bool { return a == own }}
	h.Observe(adv("198.51.100.11", 250, "192.0.2.5"), t0.Add(time.Second))                // ourselves
	h.Observe(adv("198.51.100.12", 0, "192.0.2.5"), t0.Add(time.Second))                  // a holder resigning
	h.Observe(adv("198.51.100.13", 210, "192.0.2.10"), t0.Add(-time.Second))              // before t0
	h.Observe(adv("198.51.100.13", 210, "2001:db8::5", "192.0.2.9"), t0.Add(time.Second)) // both addresses
	for _, tc := range []struct {
		vip  string
		want bool
	}{
		{"192.0.2.5", false},
		{"192.0.2.10", false},
		{"2001:db8::5", true},
		{"192.0.2.9", true},
		{"192.0.2.77", false},
	} {
		if got := h.Since(netip.MustParseAddr(tc.vip), t0); got != tc.want {
			t.Errorf("Since(%s, t0) = %v, want %v", tc.vip, got, tc.want)
		}
	}
}

func TestHeardFrom(t *testing.T) {
	h := &Heard{Own: func(a netip.Addr) bool { return a == netip.MustParseAddr("198.51.100.11") }}
	t0 := time.Unix(1000, 0)
	adv := func(src string, prio uint8) Observation {
		return Observation{Source: netip.MustParseAddr(src), Advert: Advert{Version: 3, VRID: 222, Priority: prio, Addresses: addrs("192.0.2.5")}}
	}
	h.Observe(adv("198.51.100.11", 250), t0.Add(time.Second)) // ourselves
	h.Observe(adv("198.51.100.12", 0), t0.Add(time.Second))   // resigning
	h.Observe(adv("198.51.100.13", 170), t0.Add(-time.Second))
	h.Observe(adv("198.51.100.14", 210), t0.Add(time.Second))
	if got := h.From(netip.MustParseAddr("192.0.2.5"), t0); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("198.51.100.14")}) {
		t.Errorf("From = %v, want only the router heard after t0", got)
	}
	for i := range 2 * maxHeardSources {
		h.Observe(adv(fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), 100), t0.Add(time.Second))
	}
	// The router heard before t0 holds one of the places.
	if n := len(h.From(netip.MustParseAddr("192.0.2.5"), t0.Add(-time.Hour))); n != maxHeardSources {
		t.Errorf("after %d spoofed sources: %d remembered, want the bound %d", 2*maxHeardSources, n, maxHeardSources)
	}
}

func TestHeardLatest(t *testing.T) {
	h := &Heard{Own: func(a netip.Addr) bool { return a == netip.MustParseAddr("198.51.100.11") }}
	vip := netip.MustParseAddr("192.0.2.5")
	if _, _, ok := h.Latest(vip); ok {
		t.Fatal("Latest says a router was heard before any advert")
	}
	t0 := time.Unix(1000, 0)
	adv := func(src string, prio uint8) Observation {
		return Observation{Source: netip.MustParseAddr(src), Advert: Advert{Version: 3, VRID: 222, Priority: prio, Addresses: addrs("192.0.2.5")}}
	}
	h.Observe(adv("198.51.100.13", 250), t0)
	h.Observe(adv("198.51.100.14", 210), t0.Add(100*time.Millisecond))
	h.Observe(adv("198.51.100.11", 170), t0.Add(time.Second)) // ourselves
	h.Observe(adv("198.51.100.12", 0), t0.Add(time.Second))   // resigning
	h.Observe(adv("198.51.100.11", 0), t0.Add(3*time.Second)) // ourselves, resigning
	from, at, ok := h.Latest(netip.MustParseAddr("::ffff:192.0.2.5"))
	if ok {
		t.Errorf("Latest = %v at %v after a resignation, want none: a graceful hand-over", from, at)
	}
	h.Observe(adv("198.51.100.14", 210), t0.Add(2*time.Second))
	from, at, ok = h.Latest(netip.MustParseAddr("::ffff:192.0.2.5"))
	if !ok || from != netip.MustParseAddr("198.51.100.14") || !at.Equal(t0.Add(2*time.Second)) {
		t.Errorf("Latest = %v at %v (%v), want 198.51.100.14 at t0+2s: not ourselves, advertising again after the resignation", from, at, ok)
	}
	// A resignation of a VIP nobody advertised is not kept.
	h.Observe(Observation{Source: netip.MustParseAddr("198.51.100.15"), Advert: Advert{Version: 3, VRID: 9, Addresses: addrs("192.0.2.99")}}, t0)
	if len(h.resigned) != 1 {
		t.Errorf("%d resignations kept, want 1 (only heard VIPs)", len(h.resigned))
	}
}
