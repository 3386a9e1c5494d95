package lb

import (
	"context"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/lb/netnstest"
)

// TestKeepalivedReload changes the API VIP of a running keepalived the way
// the controller does (Install, then SIGHUP through the pid file) and checks
// the interface follows: the new VIP comes, the old one goes.
func TestKeepalivedReload(t *testing.T) {
	tools := labTools(t)
	ns := tools.Wrap[len(tools.Wrap)-1]
	netnstest.Run(t, "-n", ns, "link", "set", "eth1", "up")
	netnstest.Run(t, "-n", ns, "link", "set", "eth0", "up")
	netnstest.Run(t, "-n", ns, "addr", "add", "198.51.100.11/24", "dev", "eth0")
	dir := t.TempDir()
	c := spec(false)
	c.IngressVIPs = nil
	c.TrackDir = dir
	writeTestFile(t, TrackPath(mustModel(c), "api"), "0\n") // healthy
	s := Snapshot{Nodes: []Node{{Name: "master-0", ControlPlane: true, Addresses: ips("198.51.100.11")}},
		APIServers: []netip.AddrPort{ap("198.51.100.11:6443")}}
	conf := filepath.Join(dir, "keepalived.conf")
	install := func(vip string) {
		t.Helper()
		c.APIVIPs = ips(vip)
		p, err := Desired(s, mustModel(c))
		if err != nil {
			t.Fatal(err)
		}
		b, err := RenderKeepalived(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Install(context.Background(), tools, Keepalived, conf, b); err != nil {
			t.Fatal(err)
		}
	}
	install("192.0.2.5")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pidfile := filepath.Join(dir, "keepalived.pid")
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "keepalived", "-n", "-l", "-D", "-f", conf,
		"-p", pidfile, "-r", filepath.Join(dir, "vrrp.pid"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("keepalived output:\n%s", out.String())
		}
	}()
	addrs := func() string {
		b, _ := exec.Command("ip", "-n", ns, "-4", "addr", "show", "dev", "eth0").CombinedOutput()
		return string(b)
	}
	waitFor(t, func() (string, bool) { s := addrs(); return s, strings.Contains(s, "192.0.2.5/32") })

	install("192.0.2.6")
	waitFor(t, func() (string, bool) {
		err := SignalPidfile{Path: pidfile, Signal: syscall.SIGHUP, Name: "keepalived"}.Reload(ctx)
		return "pid file not written yet", err == nil
	})
	// The start-time rule alone (without the command line, which names
	// the pid file here) accepts a real keepalived: it writes the file
	// after it starts.
	pid, written, err := readPidfile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := readProc(pid)
	if err != nil {
		t.Fatal(err)
	}
	if !namesPidfile(p.cmdline, pidfile) {
		t.Errorf("keepalived's command line %q does not name %s", p.cmdline, pidfile)
	}
	p.cmdline = nil
	if err := daemonIdentity(p, "keepalived", pidfile, written, bootTime()); err != nil {
		t.Errorf("a real keepalived by its start time: %v", err)
	}
	waitFor(t, func() (string, bool) {
		s := addrs()
		return s, strings.Contains(s, "192.0.2.6/32") && !strings.Contains(s, "192.0.2.5/32")
	})
}
