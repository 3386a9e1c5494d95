package lb

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lb/netnstest"
)

// keepalivedLab is a namespace with eth0 up for keepalived's VIPs and a
// directory for its files: conf, its pid file and the track file.
type keepalivedLab struct {
	t       *testing.T
	tools   Tools
	ns      string
	spec    cluster.Spec
	snap    Snapshot
	conf    string
	pidfile string
}

func newKeepalivedLab(t *testing.T) *keepalivedLab {
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
	return &keepalivedLab{t: t, tools: tools, ns: ns, spec: c,
		snap: Snapshot{Nodes: []Node{{Name: "master-0", ControlPlane: true, Addresses: ips("198.51.100.11")}},
			APIServers: []netip.AddrPort{ap("198.51.100.11:6443")}},
		conf: filepath.Join(dir, "keepalived.conf"), pidfile: filepath.Join(dir, "keepalived.pid")}
}

// model is the lab's cluster with vip as its API VIP.
func (k *keepalivedLab) model(vip string) *cluster.Model {
	c := k.spec
	c.APIVIPs = ips(vip)
	return mustModel(c)
}

// install writes keepalived.conf for vip the way the controller does, and
// tells no one.
func (k *keepalivedLab) install(vip string) {
	k.t.Helper()
	p, err := Desired(k.snap, k.model(vip))
	if err != nil {
		k.t.Fatal(err)
	}
	b, err := RenderKeepalived(p)
	if err != nil {
		k.t.Fatal(err)
	}
	if _, err := Install(context.Background(), k.tools, Keepalived, k.conf, b); err != nil {
		k.t.Fatal(err)
	}
}

// start runs keepalived on conf until the test ends.
func (k *keepalivedLab) start() {
	t := k.t
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", k.ns, "keepalived", "-n", "-l", "-D", "-f", k.conf,
		"-p", k.pidfile, "-r", filepath.Join(filepath.Dir(k.conf), "vrrp.pid"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer cancel()
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
	})
}

// holds waits until eth0 holds vip and not gone (if set).
func (k *keepalivedLab) holds(vip, gone string) {
	k.t.Helper()
	waitFor(k.t, func() (string, bool) {
		b, _ := exec.Command("ip", "-n", k.ns, "-4", "addr", "show", "dev", "eth0").CombinedOutput()
		s := string(b)
		return s, strings.Contains(s, vip+"/32") && (gone == "" || !strings.Contains(s, gone+"/32"))
	})
}

// TestKeepalivedReload changes the API VIP of a running keepalived the way
// the controller does (Install, then SIGHUP through the pid file) and checks
// the interface follows: the new VIP comes, the old one goes.
func TestKeepalivedReload(t *testing.T) {
	k := newKeepalivedLab(t)
	k.install("192.0.2.5")
	k.start()
	k.holds("192.0.2.5", "")

	k.install("192.0.2.6")
	waitFor(t, func() (string, bool) {
		err := SignalPidfile{Path: k.pidfile, Signal: syscall.SIGHUP, Name: "keepalived"}.Reload(context.Background())
		return "pid file not written yet", err == nil
	})
	// The start-time rule alone (without the command line, which names
	// the pid file here) accepts a real keepalived: it writes the file
	// after it starts.
	pid, written, err := readPidfile(k.pidfile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := readProc(pid)
	if err != nil {
		t.Fatal(err)
	}
	if !namesPidfile(p.cmdline, k.pidfile) {
		t.Errorf("keepalived's command line %q does not name %s", p.cmdline, k.pidfile)
	}
	p.cmdline = nil
	if err := daemonIdentity(p, "keepalived", k.pidfile, written, bootTime()); err != nil {
		t.Errorf("a real keepalived by its start time: %v", err)
	}
	k.holds("192.0.2.6", "192.0.2.5")
}

// TestKeepalivedRunsWhatIsOnDisk: lbconfig wrote keepalived.conf and died
// before its SIGHUP. The next lbconfig renders the same bytes, so nothing
// is written, and still the running keepalived must end up on that file
// (the defect: no change seen, no reload, the old VIP held for ever).
func TestKeepalivedRunsWhatIsOnDisk(t *testing.T) {
	k := newKeepalivedLab(t)
	k.install("192.0.2.5")
	k.start()
	k.holds("192.0.2.5", "") // running, its pid file written
	if _, err := os.Stat(k.pidfile); err != nil {
		t.Fatal(err)
	}

	k.install("192.0.2.6") // and the process that wrote it is gone
	before, err := os.ReadFile(k.conf)
	if err != nil {
		t.Fatal(err)
	}
	written := 0
	c := &Controller{Model: k.model("192.0.2.6"), Validator: k.tools, Log: nopLog{t},
		Outputs: []Output{{Kind: Keepalived, Path: k.conf, Reloader: SignalPidfile{Path: k.pidfile, Signal: syscall.SIGHUP, Name: "keepalived"}}},
		Hooks:   Hooks{Written: func(Kind) { written++ }}}
	if err := c.Apply(context.Background(), k.snap); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(k.conf); written != 0 || string(after) != string(before) {
		t.Fatalf("the new controller wrote keepalived.conf (%d writes): the test needs equal bytes on disk", written)
	}
	k.holds("192.0.2.6", "192.0.2.5")
}
