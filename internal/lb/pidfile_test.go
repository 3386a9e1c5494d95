package lb

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// daemonLike starts a copy of sleep named name (its comm is the file's
// name), or the script body as name, and returns it with a func that kills
// it and reports the signal that ended it.
func daemonLike(t *testing.T, name string, script string, args ...string) (*exec.Cmd, func() syscall.Signal) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, name)
	if script != "" {
		writeTestFile(t, bin, script)
	} else {
		sleep, err := exec.LookPath("sleep")
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(sleep)
		if err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, bin, string(b))
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a script's sleep goes with it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := func() syscall.Signal {
		// SIGKILL now: if the reload sent its (fatal, unhandled) signal
		// before, the process already died of that one.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() {
			return 0
		}
		return ws.Signal()
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	// Until the exec is done /proc shows the test's name, and a shell
	// blocks every signal while it starts (one sent then would be
	// delivered after the SIGKILL that ends the case): wait for the name
	// and a sleeping process that blocks nothing.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
		st := string(b)
		if strings.Contains(st, "Name:\t"+name+"\n") && strings.Contains(st, "State:\tS") && strings.Contains(st, "SigBlk:\t0000000000000000\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never ran:\n%s", name, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cmd, ended
}

// TestSignalPidfileIdentity: the reload signals only the daemon its pid file
// names. Real processes: a sleep whose pid is in keepalived's pid file (a
// pid reused by another program) is never signalled; a process named
// keepalived that started after its pid file was written (a pid reused by
// another keepalived-named program, or by a later one) is not either,
// unless its command line names the pid file; one started before is.
func TestSignalPidfileIdentity(t *testing.T) {
	hour := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name, comm, script string
		args               []string
		// written: the pid file's mtime (zero: now, after the start).
		written time.Time
		want    string // "": signalled
	}{
		{name: "another program", comm: "sleep", args: []string{"30"}, want: `is "sleep", not keepalived`},
		{name: "keepalived, started after its pid file", comm: "keepalived", args: []string{"30"}, written: hour, want: "after"},
		{name: "keepalived, started before its pid file", comm: "keepalived", args: []string{"30"}},
		{name: "keepalived naming the pid file", comm: "keepalived", script: "#!/bin/sh\nsleep 30\n", args: []string{"-p", "PIDFILE"}, written: hour},
		{name: "keepalived naming another pid file", comm: "keepalived", script: "#!/bin/sh\nsleep 30\n", args: []string{"-p", "/run/other.pid"}, written: hour, want: "after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "keepalived.pid")
			for i, a := range tc.args {
				if a == "PIDFILE" {
					tc.args[i] = pidfile
				}
			}
			cmd, ended := daemonLike(t, tc.comm, tc.script, tc.args...)
			writeTestFile(t, pidfile, strconv.Itoa(cmd.Process.Pid)+"\n")
			if !tc.written.IsZero() {
				if err := os.Chtimes(pidfile, tc.written, tc.written); err != nil {
					t.Fatal(err)
				}
			}
			// SIGUSR2, not keepalived's SIGHUP: the identity rules do not
			// depend on the signal, and a test run under nohup (SIGHUP
			// ignored, which every child inherits across exec) would see
			// a delivered SIGHUP do nothing.
			err := SignalPidfile{Path: pidfile, Signal: syscall.SIGUSR2, Name: "keepalived"}.Reload(context.Background())
			got := ended()
			if tc.want == "" {
				if err != nil || got != syscall.SIGUSR2 {
					t.Errorf("Reload = %v, the process ended by %v; want it signalled (SIGUSR2)", err, got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrNotRunning) {
				t.Errorf("Reload = %v, want ErrNotRunning with %q", err, tc.want)
			}
			if got != syscall.SIGKILL {
				t.Errorf("the process ended by %v: it was signalled", got)
			}
		})
	}
}

// TestDaemonIdentity: the rules on what /proc says, at their edges.
func TestDaemonIdentity(t *testing.T) {
	boot := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	written := boot.Add(100 * time.Second) // the pid file's mtime
	at := func(d time.Duration) uint64 { return uint64(d / (time.Second / userHZ)) }
	for _, tc := range []struct {
		name string
		p    procInfo
		want string // "": the daemon
	}{
		{"started, then wrote", procInfo{comm: "keepalived", state: 'S', startTicks: at(99 * time.Second)}, ""},
		{"the same tick", procInfo{comm: "keepalived", state: 'S', startTicks: at(100 * time.Second)}, ""},
		{"within the slack", procInfo{comm: "keepalived", state: 'S', startTicks: at(100*time.Second + startSlack)}, ""},
		{"after the slack", procInfo{comm: "keepalived", state: 'S', startTicks: at(100*time.Second+startSlack) + 1}, "after"},
		{"reused a day later", procInfo{comm: "keepalived", state: 'S', startTicks: at(24 * time.Hour)}, "after"},
		{"reused, named on its command line", procInfo{comm: "keepalived", state: 'S', startTicks: at(24 * time.Hour),
			cmdline: []string{"/usr/sbin/keepalived", "--dont-fork", "-p", "/run/infradns/keepalived/keepalived.pid"}}, ""},
		{"--pid=", procInfo{comm: "keepalived", state: 'S', startTicks: at(24 * time.Hour),
			cmdline: []string{"keepalived", "--pid=/run/infradns/keepalived/keepalived.pid"}}, ""},
		{"-pFILE", procInfo{comm: "keepalived", state: 'S', startTicks: at(24 * time.Hour),
			cmdline: []string{"keepalived", "-p/run/infradns/keepalived/keepalived.pid"}}, ""},
		{"another pid file", procInfo{comm: "keepalived", state: 'S', startTicks: at(24 * time.Hour),
			cmdline: []string{"keepalived", "-p", "/run/keepalived.pid"}}, "after"},
		{"-p as the last word", procInfo{comm: "keepalived", state: 'S', startTicks: at(24 * time.Hour),
			cmdline: []string{"keepalived", "-p"}}, "after"},
		{"another name", procInfo{comm: "bash", state: 'S', startTicks: at(time.Second)}, `is "bash", not keepalived`},
		{"a prefix of the name", procInfo{comm: "keepalive", state: 'S', startTicks: at(time.Second)}, "not keepalived"},
		{"a zombie", procInfo{comm: "keepalived", state: 'Z', startTicks: at(time.Second)}, "dead"},
	} {
		err := daemonIdentity(tc.p, "keepalived", "/run/infradns/keepalived/keepalived.pid", written, boot)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want the daemon", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrNotRunning)):
			t.Errorf("%s: %v, want ErrNotRunning with %q", tc.name, err, tc.want)
		}
	}
}

func TestParseStat(t *testing.T) {
	// Field 22 is the start time; a name with spaces and parentheses.
	line := "4242 (a) (b c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 123456 1000 200 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	p, err := parseStat([]byte(line))
	if err != nil || p.comm != "a) (b c" || p.state != 'S' || p.startTicks != 123456 {
		t.Errorf("parseStat = %+v, %v", p, err)
	}
	for _, bad := range []string{"", "4242 (x", "4242 (x) S 1 2", "4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 notanumber 1"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}
