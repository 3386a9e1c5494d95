package vrrp

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/lb/netnstest"

	"golang.org/x/sys/unix"
)

// startKeepalived runs a real keepalived with conf in namespace ns until
// the test ends (SIGTERM, then SIGKILL after 3 s); its output is logged
// when the test failed.
func startKeepalived(t *testing.T, ctx context.Context, ns, conf string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("keepalived"); err != nil {
		t.Fatalf("keepalived not found (run hack/install-deps.sh as root): %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "keepalived.conf")
	writeFile(t, path, conf)
	argv := append([]string{"netns", "exec", ns, "keepalived", "-n", "-l", "-D"}, args...)
	argv = append(argv, "-f", path, "-p", filepath.Join(dir, "k.pid"), "-r", filepath.Join(dir, "v.pid"))
	cmd := exec.CommandContext(ctx, "ip", argv...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(unix.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("keepalived output:\n%s", out.String())
		}
	})
}

// runIn opens a connection on a thread inside namespace ns (its sockets
// belong there) and runs it until ctx ends; Run's result arrives on the
// returned channel. The thread is never unlocked, so Go discards it after.
func runIn[C interface{ Run(context.Context) error }](t testing.TB, ctx context.Context, ns string, open func() (C, error)) (C, <-chan error) {
	t.Helper()
	type opened struct {
		c   C
		err error
	}
	got := make(chan opened, 1)
	runErr := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netnstest.Enter(ns); err != nil {
			got <- opened{err: err}
			return
		}
		c, err := open()
		got <- opened{c: c, err: err}
		if err == nil {
			runErr <- c.Run(ctx)
		}
	}()
	o := <-got
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.c, runErr
}

// inNS runs f on a thread inside namespace ns (its sockets, netlink calls
// and child processes belong there).
func inNS(t testing.TB, ns string, f func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := netnstest.Enter(ns); err != nil {
			errc <- err
			return
		}
		f()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
