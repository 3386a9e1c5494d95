//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// vrrpStarveEnv sets each phase's window of TestVRRPStarvedByWeight (a Go
// duration; 20 s in make test).
const vrrpStarveEnv = "INFRADNS_STARVE"

// TestVRRPStarvedByWeight measures the timers' margin under CPU starvation
// as a kubelet arranges it: every node's keepalived in a cgroup with the
// CPU shares of its pod's request, beside a workload in a cgroup of 1500m
// (shares 1536) that saturates both cores. A backup takes the VIP when the
// holder's adverts stop for its master-down interval (~191 ms at 60 ms
// adverts), so the largest gap between the holder's adverts, as another
// host hears them, is the margin used up. Two phases: 20m (shares 20, the
// request before issue 28) and the manifest's 100m (shares 102). With 100m
// no VRRP state may change; the gaps of both are logged (issue 28 saw
// 129-166 ms at 20m over 3 × 180 s).
func TestVRRPStarvedByWeight(t *testing.T) {
	window := 20 * time.Second
	if s := os.Getenv(vrrpStarveEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive Go duration", vrrpStarveEnv, s)
		}
		window = d
	}
	cg := newCPUCgroups(t)
	v := startVRRPLab(t, vrrpStatic)
	h := v.waitSettled("before the load")

	heard := v.hearAdverts()

	for _, phase := range []struct {
		request string
		shares  int
	}{{"20m", 20}, {"100m", 102}} {
		holder := v.nodes[h].n.IPv4.String()
		var pids []int
		for i, vn := range v.nodes {
			// keepalived's parent and its VRRP child (the one that sends).
			pids = append(pids, vn.keepalived.Pid())
			if b, err := os.ReadFile(v.vrrpPid(i)); err == nil {
				if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					pids = append(pids, p)
				}
			}
		}
		cg.set("keepalived", phase.shares, pids...)
		stop := cg.load("load", 1536, 3)
		before := v.transitions()
		heard.clear()
		t0 := time.Now()
		time.Sleep(window)
		times := heard.from(holder)
		n := v.transitions() - before
		var reqs, fails int
		for _, r := range v.probes() {
			if !r.start.Before(t0) && r.end.Before(t0.Add(window)) {
				reqs++
				if !r.ok {
					fails++
				}
			}
		}
		stop()
		cg.set("", 0, pids...) // back to the root group
		var gaps []time.Duration
		for i := 1; i < len(times); i++ {
			gaps = append(gaps, times[i].Sub(times[i-1]))
		}
		slices.Sort(gaps)
		if len(gaps) < 10 {
			t.Fatalf("keepalived at %s: %d adverts heard from the holder %s in %v", phase.request, len(times), holder, window)
		}
		q := func(p float64) int64 { return vrrpMS(gaps[int(p*float64(len(gaps)-1))]) }
		t.Logf("measure: keepalived at %s (shares %d) beside a 1500m workload saturating both cores for %v: %d VRRP state changes; the holder's advert gaps p50/p99/max %d/%d/%d ms (%d adverts; a backup takes over after ~191 ms); client: %d of %d requests failed",
			phase.request, phase.shares, window, n, q(0.5), q(0.99), q(1), len(times), fails, reqs)
		if phase.shares >= 102 && n != 0 {
			t.Errorf("keepalived at the manifest's %s: %d VRRP state changes under a saturating 1500m workload, want 0", phase.request, n)
		}
		h = v.waitSettled("after the load at " + phase.request)
	}
}

// cpuCgroups are cgroups of the cpu controller made for one test (v1
// cpu.shares, or v2 cpu.weight converted as the kubelet converts them),
// removed at cleanup.
type cpuCgroups struct {
	t      *testing.T
	root   string // the hierarchy's root
	parent string // this test's group
	v2     bool
	mu     sync.Mutex
	procs  []*exec.Cmd
}

func newCPUCgroups(t *testing.T) *cpuCgroups {
	t.Helper()
	c := &cpuCgroups{t: t}
	switch {
	case fileExists("/sys/fs/cgroup/cpu/cpu.shares"):
		c.root = "/sys/fs/cgroup/cpu"
	case fileExists("/sys/fs/cgroup/cgroup.controllers"):
		b, _ := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
		if !slices.Contains(strings.Fields(string(b)), "cpu") {
			t.Fatalf("cgroup v2 without the cpu controller (%q): this test needs it, as the kubelet does", b)
		}
		c.root, c.v2 = "/sys/fs/cgroup", true
	default:
		t.Fatal("no cgroup cpu controller at /sys/fs/cgroup/cpu (v1) or /sys/fs/cgroup (v2): this test needs one, as the kubelet does")
	}
	c.parent = filepath.Join(c.root, fmt.Sprintf("infradns-e2e-%d", os.Getpid()))
	if c.v2 {
		_ = os.WriteFile(filepath.Join(c.root, "cgroup.subtree_control"), []byte("+cpu"), 0o644)
	}
	if err := os.Mkdir(c.parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		t.Fatal(err)
	}
	if c.v2 {
		if err := os.WriteFile(filepath.Join(c.parent, "cgroup.subtree_control"), []byte("+cpu"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(c.close)
	return c
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// set puts pids into the child group name with shares ("": the root group).
func (c *cpuCgroups) set(name string, shares int, pids ...int) {
	c.t.Helper()
	dir := c.root
	if name != "" {
		dir = filepath.Join(c.parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			c.t.Fatal(err)
		}
		file, val := "cpu.shares", strconv.Itoa(shares)
		if c.v2 {
			// The kubelet's conversion (cgroup v2: cpu.weight in [1, 10000]).
			file, val = "cpu.weight", strconv.Itoa(1+((shares-2)*9999)/262142)
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(val), 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
	for _, p := range pids {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(p)), 0o644); err != nil && !errors.Is(err, syscall.ESRCH) {
			c.t.Fatalf("pid %d into %s: %v", p, dir, err)
		}
	}
}

// load starts n busy loops in the child group name with shares; the
// returned func stops them.
func (c *cpuCgroups) load(name string, shares, n int) (stop func()) {
	c.t.Helper()
	var cmds []*exec.Cmd
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			c.t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		c.mu.Lock()
		c.procs = append(c.procs, cmd)
		c.mu.Unlock()
		c.set(name, shares, cmd.Process.Pid)
	}
	return func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
}

// close kills the loads, moves whatever is left to the root group and
// removes the groups.
func (c *cpuCgroups) close() {
	c.mu.Lock()
	for _, cmd := range c.procs {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	c.mu.Unlock()
	entries, _ := os.ReadDir(c.parent)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(c.parent, e.Name())
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			for _, p := range strings.Fields(string(b)) {
				_ = os.WriteFile(filepath.Join(c.root, "cgroup.procs"), []byte(p), 0o644)
			}
		}
		if err := os.Remove(dir); err != nil {
			c.t.Logf("cgroup %s: %v", dir, err)
		}
	}
	if err := os.Remove(c.parent); err != nil {
		c.t.Logf("cgroup %s: %v", c.parent, err)
	}
}
