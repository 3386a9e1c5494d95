package lb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMasterSocketReload reloads a real haproxy in master-worker mode through
// its master CLI and checks the master counts one reload and runs a new worker.
func TestMasterSocketReload(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, sock := startMasterWorker(t, ctx)
	before := waitFor(t, func() (string, bool) {
		s, err := masterQuery(sock, "show proc")
		return s, err == nil && strings.Contains(s, "worker")
	})
	if err := (MasterSocket{Path: sock}).Reload(ctx); err != nil {
		t.Fatal(err)
	}
	after := waitFor(t, func() (string, bool) {
		s, err := masterQuery(sock, "show proc")
		return s, err == nil && strings.Contains(s, "master          1 [failed: 0]")
	})
	if procPID(before, "worker") == procPID(after, "worker") {
		t.Errorf("Same worker after the reload:\n%s", after)
	}
	if err := (MasterSocket{Path: filepath.Join(dir, "nosuch.sock")}).Reload(ctx); err == nil {
		t.Error("Expected an error for a missing socket")
	}
}

// TestMasterSocketReloadBurst reloads a real haproxy back to back, as
// lbconfig does when changes follow each other: the master re-executes
// itself on each reload and, for up to ~150 ms, refuses connections or resets
// those queued on its old socket. That is a reload in progress, not a failed
// one (it counted as a failure and raised InfradnsReloadFailing): each
// reload must be taken.
func TestMasterSocketReloadBurst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, sock := startMasterWorker(t, ctx)
	waitFor(t, func() (string, bool) {
		s, err := masterQuery(sock, "show proc")
		return s, err == nil && strings.Contains(s, "worker")
	})
	const n = 20
	for i := range n {
		if err := (MasterSocket{Path: sock}).Reload(ctx); err != nil {
			t.Fatalf("reload %d of %d: %v", i+1, n, err)
		}
	}
	// Reloads that reach the master while it re-executes may be taken
	// together: each was read, and the last one read the newest file.
	out := waitFor(t, func() (string, bool) {
		s, err := masterQuery(sock, "show proc")
		m := masterReloadsRE.FindStringSubmatch(s)
		return s, err == nil && m != nil && m[1] != "0" && m[2] == "0"
	})
	t.Logf("%d reloads back to back: %s", n, masterReloadsRE.FindString(out))
}

var masterReloadsRE = regexp.MustCompile(`master +([0-9]+) \[failed: ([0-9]+)\]`)

// startMasterWorker runs haproxy in master-worker mode with a master socket,
// stopped when the test ends.
func startMasterWorker(t *testing.T, ctx context.Context) (dir, sock string) {
	t.Helper()
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Fatalf("haproxy not found (run hack/install-deps.sh as root): %v", err)
	}
	dir = t.TempDir()
	port := freePort(t)
	cfg := filepath.Join(dir, "haproxy.cfg")
	writeTestFile(t, cfg, fmt.Sprintf(`global
    master-worker
defaults
    mode tcp
    timeout connect 1s
    timeout client 1s
    timeout server 1s
frontend f
    bind 127.0.0.1:%d
    default_backend b
backend b
    server s 127.0.0.1:1
`, port))
	sock = filepath.Join(dir, "master.sock")
	cmd := exec.CommandContext(ctx, "haproxy", "-W", "-db", "-f", cfg, "-S", sock)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("haproxy output:\n%s", out.String())
		}
	})
	return dir, sock
}

// TestSignalPidfile signals a real process found through a pid file and
// checks that process is the one that got the signal.
func TestSignalPidfile(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	pidfile := filepath.Join(dir, "sleep.pid")
	writeTestFile(t, pidfile, strconv.Itoa(cmd.Process.Pid)+"\n")
	if err := (SignalPidfile{Path: pidfile, Signal: syscall.SIGUSR1, Name: "sleep"}).Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGUSR1 {
		t.Errorf("Process ended with %v, want SIGUSR1", err)
	}
	writeTestFile(t, pidfile, "garbage")
	if err := (SignalPidfile{Path: pidfile, Signal: syscall.SIGHUP, Name: "sleep"}).Reload(context.Background()); err == nil {
		t.Error("Expected an error for a pid file without a pid")
	}
}

func TestCommandReload(t *testing.T) {
	if err := (Command{Argv: []string{"false"}}).Reload(context.Background()); err == nil {
		t.Error("Expected an error from a failing command")
	}
	if err := (Command{Argv: []string{"true"}}).Reload(context.Background()); err != nil {
		t.Error(err)
	}
}

func masterQuery(sock, q string) (string, error) {
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, q+"\n"); err != nil {
		return "", err
	}
	_ = c.(*net.UnixConn).CloseWrite()
	b, err := io.ReadAll(c)
	return string(b), err
}

// startHAProxy runs haproxy in master-worker mode on cfg, its master CLI on
// sock, behind the argv prefix wrap (ip netns exec NS, or none), for the
// rest of the test: stopped with SIGTERM (killed 5 s later) when it ends,
// its output logged if it failed. The channel receives its exit.
func startHAProxy(t *testing.T, wrap []string, cfg, sock string) <-chan error {
	t.Helper()
	argv := append(slices.Clone(wrap), "haproxy", "-W", "-db", "-f", cfg, "-S", sock)
	cmd := exec.Command(argv[0], argv[1:]...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		close(done)
		exited <- err
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("haproxy output:\n%s", out.String())
		}
	})
	return exited
}

// procPID is the pid of the first process of role ("master", "worker")
// in the master CLI's "show proc", "" when there is none.
func procPID(showProc, role string) string {
	for _, l := range strings.Split(showProc, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == role {
			return f[0]
		}
	}
	return ""
}

// waitFor polls cond for up to 10 s (a bound for a stuck process, not a
// timing assertion) and returns its last value.
func waitFor(t *testing.T, cond func() (string, bool)) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, ok := cond()
		if ok {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("Condition not met within 10 s; last: %q", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func writeTestFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReloadNotRunning: a daemon that is not there yet is told apart from a
// failed reload, and only then.
func TestReloadNotRunning(t *testing.T) {
	dir := t.TempDir()
	// A socket file nobody listens on any more.
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	// The pid of a process that has exited.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(dir, "gone.pid")
	os.WriteFile(gone, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	garbage := filepath.Join(dir, "garbage.pid")
	os.WriteFile(garbage, []byte("x"), 0o644)
	// A pid another program has now.
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	reused := filepath.Join(dir, "reused.pid")
	os.WriteFile(reused, []byte(strconv.Itoa(other.Process.Pid)), 0o644)

	tests := []struct {
		name       string
		r          Reloader
		notRunning bool
	}{
		{"no master socket", MasterSocket{Path: filepath.Join(dir, "none.sock")}, true},
		{"nobody on the socket", MasterSocket{Path: stale}, true},
		{"no pid file", SignalPidfile{Path: filepath.Join(dir, "none.pid"), Signal: syscall.SIGHUP, Name: "keepalived"}, true},
		{"process gone", SignalPidfile{Path: gone, Signal: syscall.SIGHUP, Name: "true"}, true},
		{"pid now another program's", SignalPidfile{Path: reused, Signal: syscall.SIGHUP, Name: "keepalived"}, true},
		{"pid file garbage", SignalPidfile{Path: garbage, Signal: syscall.SIGHUP, Name: "keepalived"}, false},
		{"command fails", Command{Argv: []string{"false"}}, false},
	}
	for _, tc := range tests {
		err := tc.r.Reload(context.Background())
		if err == nil || errors.Is(err, ErrNotRunning) != tc.notRunning {
			t.Errorf("%s: %v, want an error that is ErrNotRunning=%v", tc.name, err, tc.notRunning)
		}
	}
}

// TestHAProxyRunsWhatIsOnDisk: lbconfig wrote haproxy.cfg and died before
// telling haproxy's master. The next lbconfig renders the same bytes and
// writes nothing; the running haproxy must still end up on that file (the
// defect: no change seen, no reload, the old listeners kept for ever).
func TestHAProxyRunsWhatIsOnDisk(t *testing.T) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Fatalf("haproxy not found (run hack/install-deps.sh as root): %v", err)
	}
	dir := t.TempDir()
	cfgFor := func(port int) string {
		return fmt.Sprintf(`global
    master-worker
defaults
    mode tcp
    timeout connect 1s
    timeout client 1s
    timeout server 1s
frontend f
    bind 127.0.0.1:%d
    default_backend b
backend b
    server s 127.0.0.1:1
`, port)
	}
	oldPort, newPort := freePort(t), freePort(t)
	cfg := filepath.Join(dir, "haproxy.cfg")
	writeTestFile(t, cfg, cfgFor(oldPort))
	sock := filepath.Join(dir, "master.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	startHAProxy(t, nil, cfg, sock)
	listening := func(port int) (string, bool) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err != nil {
			return err.Error(), false
		}
		c.Close()
		return "", true
	}
	waitFor(t, func() (string, bool) { return listening(oldPort) })
	waitFor(t, func() (string, bool) { // the master socket is up
		s, err := masterQuery(sock, "show proc")
		return s, err == nil && strings.Contains(s, "worker")
	})

	writeTestFile(t, cfg, cfgFor(newPort)) // and the process that wrote it is gone
	tpl, err := ParseTemplates("", cfgFor(newPort))
	if err != nil {
		t.Fatal(err)
	}
	written := 0
	c := &Controller{Model: config(false), Templates: tpl, Validator: rejectValidator{}, Log: nopLog{t},
		Outputs: []Output{{Kind: HAProxyCfg, Path: cfg, Reloader: MasterSocket{Path: sock}}},
		Hooks:   Hooks{Written: func(Kind) { written++ }}}
	if err := c.Apply(ctx, snap(3, false)); err != nil {
		t.Fatal(err)
	}
	if written != 0 {
		t.Fatalf("the new controller wrote haproxy.cfg: the test needs equal bytes on disk")
	}
	waitFor(t, func() (string, bool) { return listening(newPort) })
}
