//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
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
	if fi, err := os.Stat("/sys/fs/cgroup/k8s.io"); err == nil && fi.IsDir() {
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
