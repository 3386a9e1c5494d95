//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The real-kubelet labs' containers live in cgroups runc makes under
// k8s.io in every cgroup hierarchy (cgroupfs driver, containerd's k8s.io
// namespace). The labs' teardown kills containerd and its shims with the
// containers, so nobody deletes those cgroups: each lab left ~100 empty
// ones on the host, and after a day of runs ~2,400 were there. Every
// kubelet's cAdvisor reads them all at its start and keeps them under
// housekeeping: a kubelet then took 25 s from "Registering Raw factory" to
// its container manager's start, and a kubeadm node registered so late
// that kubelet's CSINode initialisation spent its ~140-s backoff before
// the node went Ready (TestKubeadm 300 s instead of 160 s), while the
// three kubelets' housekeeping loaded the machine the VIPs' timers run on.

// klCgroupID is a container's cgroup name: its 64-hex containerd ID.
var klCgroupID = regexp.MustCompile(`^[0-9a-f]{64}$`)

// klCgroupParents are the k8s.io directories of the host's cgroup
// hierarchies (v1: one per controller; v2: the unified tree).
func klCgroupParents() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io")
	if dirExists("/sys/fs/cgroup/k8s.io") {
		dirs = append(dirs, "/sys/fs/cgroup/k8s.io")
	}
	return dirs
}

// klContainerCgroups lists the container cgroups under the k8s.io
// directories by name, with the oldest modification time seen for each.
func klContainerCgroups() map[string]time.Time {
	found := map[string]time.Time{}
	for _, parent := range klCgroupParents() {
		entries, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || !klCgroupID.MatchString(e.Name()) {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue
			}
			if t, ok := found[e.Name()]; !ok || fi.ModTime().Before(t) {
				found[e.Name()] = fi.ModTime()
			}
		}
	}
	return found
}

// klRemoveCgroups removes the container cgroups named in ids from every
// hierarchy, killing what still runs in them first when kill is set (only
// for cgroups this test's own containerds made). It returns how many it
// removed from every hierarchy and the errors of the others.
func klRemoveCgroups(ids []string, kill bool) (int, []string) {
	parents := klCgroupParents()
	if kill {
		for _, id := range ids {
			for _, parent := range parents {
				b, _ := os.ReadFile(filepath.Join(parent, id, "cgroup.procs"))
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
		}
	}
	removed := 0
	var errs []string
	for _, id := range ids {
		ok := true
		for _, parent := range parents {
			dir := filepath.Join(parent, id)
			var err error
			// A killed process leaves its cgroup a moment after the signal.
			for try := 0; ; try++ {
				if err = syscall.Rmdir(dir); err != syscall.EBUSY || !kill || try == 50 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil && err != syscall.ENOENT {
				ok = false
				errs = append(errs, dir+": "+err.Error())
			}
		}
		if ok {
			removed++
		}
	}
	return removed, errs
}

// klReapCgroups removes the empty container cgroups earlier runs left
// (older than a minute: a container being created elsewhere has had its
// process in it long before), and, once the lab's teardown has killed its
// containers, the cgroups this test's containerds made. Called before the
// lab starts, so its cleanup runs after the lab's teardown.
func klReapCgroups(t *testing.T) {
	t.Helper()
	before := klContainerCgroups()
	var stale []string
	for id, mod := range before {
		if time.Since(mod) > time.Minute {
			stale = append(stale, id)
		}
	}
	if len(stale) > 0 {
		n, errs := klRemoveCgroups(stale, false)
		t.Logf("removed %d empty container cgroups earlier runs left under k8s.io (%d still in use)", n, len(stale)-n)
		_ = errs // a cgroup still in use is someone's container: left alone
	}
	t.Cleanup(func() {
		var ours []string
		for id := range klContainerCgroups() {
			if _, ok := before[id]; !ok {
				ours = append(ours, id)
			}
		}
		n, errs := klRemoveCgroups(ours, true)
		t.Logf("removed the %d container cgroups this lab's containerds made (of %d)", n, len(ours))
		if len(errs) > 0 {
			t.Errorf("container cgroups of this lab left on the host: %s", strings.Join(errs, "; "))
		}
	})
}

// klWeighPods gives the k8s.io cgroup, under which every lab node's
// containers run (cgroupfs, cgroupsPerQOS off), the CPU weight kubelet
// gives a node's kubepods cgroup: its CPUs' (1024 shares each, cgroup v1;
// 100 weight each, v2), here for nodes nodes, until the test ends. At the
// default 1024 shares the pods of the whole lab weighed as much as one
// busy thread of any other test: with four busy loops beside it (make
// test's parallel phase runs the API-outage tests and a saturating VRRP
// soak there) the BGP lab's lbconfig containers, at 20m (20 shares) each,
// were starved past three BFD intervals and the ToR withdrew healthy nodes
// (2 of 2 runs; 0 of 2 at 6,144 shares). No real node runs its pods so.
func klWeighPods(t *testing.T, nodes int) {
	t.Helper()
	type knob struct{ file, value string }
	var k knob
	switch {
	case dirExists("/sys/fs/cgroup/cpu"):
		if err := os.MkdirAll("/sys/fs/cgroup/cpu/k8s.io", 0o755); err != nil {
			t.Fatalf("cgroup k8s.io: %v", err)
		}
		k = knob{"/sys/fs/cgroup/cpu/k8s.io/cpu.shares", strconv.Itoa(nodes * runtime.NumCPU() * 1024)}
	default:
		if err := os.MkdirAll("/sys/fs/cgroup/k8s.io", 0o755); err != nil {
			t.Fatalf("cgroup k8s.io: %v", err)
		}
		k = knob{"/sys/fs/cgroup/k8s.io/cpu.weight", strconv.Itoa(min(10000, nodes*runtime.NumCPU()*100))}
	}
	old, err := os.ReadFile(k.file)
	if err != nil {
		t.Fatalf("the lab's pods' CPU weight: %v (the cpu controller must be enabled for k8s.io)", err)
	}
	if err := os.WriteFile(k.file, []byte(k.value), 0o644); err != nil {
		t.Fatalf("the lab's pods' CPU weight: %s = %s: %v", k.file, k.value, err)
	}
	t.Logf("the lab's pods weigh %s (%s), as %d nodes' kubepods", k.value, k.file, nodes)
	t.Cleanup(func() { _ = os.WriteFile(k.file, old, 0o644) })
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
