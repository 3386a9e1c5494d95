package lb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SignalPidfile sends Signal to the daemon whose pid is in Path:
// keepalived reloads on SIGHUP, haproxy's master on SIGUSR2. Only a process
// that is that daemon gets it (see daemonIdentity): lbconfig runs as root
// with the host's PIDs, and a pid file outlives its process (keepalived
// OOM-killed, its container not yet restarted), so the pid it names may
// have been given to any program since.
type SignalPidfile struct {
	Path   string
	Signal syscall.Signal
	// Name is the daemon's process name (/proc/PID/comm): "keepalived" or
	// "haproxy".
	Name string
}

// Reload reads the pid file, checks the process it names is the daemon,
// and signals it. A process that is not the daemon is ErrNotRunning: the
// daemon is gone and its pid file stale (its container's restart removes
// it), and the reload is retried.
func (s SignalPidfile) Reload(context.Context) error {
	if s.Name == "" {
		return fmt.Errorf("reload: pid file %s: no daemon name to check the process against", s.Path)
	}
	pid, written, err := readPidfile(s.Path)
	if err != nil {
		return fmt.Errorf("reload: %w", notRunning(err))
	}
	err = signalChecked(pid, s.Signal, func() error {
		p, err := readProc(pid)
		if err != nil {
			return err
		}
		return daemonIdentity(p, s.Name, s.Path, written, bootTime())
	})
	if err != nil {
		return fmt.Errorf("reload: signal %v to pid %d from %s: %w", s.Signal, pid, s.Path, notRunning(err))
	}
	return nil
}

// readPidfile reads the pid and the file's modification time (when the
// daemon wrote it). The directory is the daemon's to write, so the file
// is opened without following a symlink or waiting on a pipe.
func readPidfile(path string) (int, time.Time, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, time.Time{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, time.Time{}, err
	}
	if !fi.Mode().IsRegular() {
		return 0, time.Time{}, fmt.Errorf("pid file %s is not a regular file (%v)", path, fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, time.Time{}, err
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil || pid <= 1 {
		return 0, time.Time{}, fmt.Errorf("pid file %s holds %q", path, bytes.TrimSpace(b))
	}
	return pid, fi.ModTime(), nil
}

// procInfo is what /proc says about a process.
type procInfo struct {
	pid   int
	comm  string
	state byte
	// startTicks is field 22 of /proc/PID/stat: when it started, in clock
	// ticks since boot.
	startTicks uint64
	cmdline    []string
}

// errGone is a process that ended between the pid file and /proc.
var errGone = fmt.Errorf("%w (no such process)", ErrNotRunning)

func readProc(pid int) (procInfo, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, fs.ErrNotExist) {
		return procInfo{}, errGone
	}
	if err != nil {
		// Another PID namespace hides the host's /proc: nothing proves
		// who the pid is, so it is not signalled.
		return procInfo{}, fmt.Errorf("cannot check what process %d is: %w", pid, err)
	}
	p, err := parseStat(stat)
	if err != nil {
		return procInfo{}, err
	}
	p.pid = pid
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err == nil {
		p.cmdline = strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")
	}
	return p, nil
}

// parseStat reads /proc/PID/stat: "PID (COMM) STATE PPID ... STARTTIME ...".
// COMM may hold spaces and parentheses, so it ends at the last ')'; the
// fields after it are counted from STATE (field 3).
func parseStat(b []byte) (procInfo, error) {
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+2 >= len(s) {
		return procInfo{}, fmt.Errorf("unreadable /proc stat %q", s)
	}
	f := strings.Fields(s[end+1:])
	const start = 22 - 3
	if len(f) <= start || len(f[0]) != 1 {
		return procInfo{}, fmt.Errorf("unreadable /proc stat %q", s)
	}
	ticks, err := strconv.ParseUint(f[start], 10, 64)
	if err != nil {
		return procInfo{}, fmt.Errorf("unreadable start time in /proc stat %q", s)
	}
	return procInfo{comm: s[open+1 : end], state: f[0][0], startTicks: ticks}, nil
}

// userHZ is the unit of /proc's start times: USER_HZ, 100 on every Linux
// architecture Go builds for (the kernel converts from its own HZ).
const userHZ = 100

// startSlack is how much later than its pid file's mtime a process may
// seem to have started and still be the one that wrote it. The file's
// timestamp comes from the kernel's coarse clock (up to a jiffy, 10 ms,
// behind), the start time is in 10 ms ticks, and the wall clock may have
// been corrected by NTP since: a second covers all three. A pid handed to
// another process within that second of the daemon writing its file would
// need the pid space to wrap in a second; a larger forward step of the
// clock is covered by the command line (daemonIdentity).
const startSlack = time.Second

// daemonIdentity says whether p is the daemon name that wrote pidfile at
// written (its mtime): its name is name, it is not a zombie, and it
// started no later than the file was written (a daemon writes its pid file
// after it starts; a pid given to another process after the daemon died
// starts later). A process whose command line names the pid file
// (keepalived -p FILE, haproxy -p FILE, as the static pods start them) is
// the daemon whatever the clock did. boot is the wall-clock time of boot,
// which /proc's start times count from.
func daemonIdentity(p procInfo, name, pidfile string, written, boot time.Time) error {
	if p.comm != name {
		return staleError(fmt.Sprintf("process %d is %q, not %s", p.pid, p.comm, name))
	}
	if p.state == 'Z' || p.state == 'X' {
		return staleError(fmt.Sprintf("process %d (%s) is dead (state %c)", p.pid, name, p.state))
	}
	if namesPidfile(p.cmdline, pidfile) {
		return nil
	}
	started := boot.Add(time.Duration(p.startTicks) * time.Second / userHZ)
	if started.After(written.Add(startSlack)) {
		return staleError(fmt.Sprintf("process %d (%s) started at %s, after %s was written (%s): its pid was reused (or the clock was stepped forward since; restart %s)",
			p.pid, name, started.Format(time.RFC3339Nano), pidfile, written.Format(time.RFC3339Nano), name))
	}
	return nil
}

// staleError is a pid file whose pid is no longer the daemon's. It is
// ErrNotRunning: the daemon is not there to tell (a restarted container
// removes the file and the new daemon writes its own); the reload is
// retried.
type staleError string

func (e staleError) Error() string        { return string(e) + ": a stale pid file, not signalled" }
func (e staleError) Is(target error) bool { return target == ErrNotRunning }

// namesPidfile: the command line gives pidfile as the pid file (-p FILE,
// -pFILE, --pid FILE, --pid=FILE: keepalived's and haproxy's options).
func namesPidfile(argv []string, pidfile string) bool {
	want := filepath.Clean(pidfile)
	for i, a := range argv {
		var v string
		switch {
		case a == "-p" || a == "--pid":
			if i+1 < len(argv) {
				v = argv[i+1]
			}
		case strings.HasPrefix(a, "--pid="):
			v = strings.TrimPrefix(a, "--pid=")
		case strings.HasPrefix(a, "-p") && !strings.HasPrefix(a, "--"):
			v = strings.TrimPrefix(a, "-p")
		}
		if v != "" && filepath.IsAbs(v) && filepath.Clean(v) == want {
			return true
		}
	}
	return false
}
