package lab

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// markerDir holds one file per live lab owner: "<prefix>-<pid>" with the
// owner's start time, so a reused PID is not mistaken for the owner.
const markerDir = "/run/netns-lab"

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
