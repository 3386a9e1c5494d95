//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/plugintest"
	"github.com/infradns/infradns/test/e2e/lab"
)

// hostCoreDNS is bin/coredns running on the host (loopback only, no lab
// namespace), for the tests that need a real kube-apiserver but no network.
type hostCoreDNS struct {
	started time.Time
	pid     int
	exited  chan error // receives once; Exited puts it back
}

// startHostCoreDNS writes conf to dir/Corefile and runs bin/coredns with it;
// its output goes to dir/coredns.log, shown when the test fails. It is
// killed at cleanup.
func startHostCoreDNS(t *testing.T, dir, conf string) *hostCoreDNS {
	t.Helper()
	corefile := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(corefile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "coredns.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(lab.Binary(t, "coredns"), "-conf", corefile)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c := &hostCoreDNS{started: time.Now(), exited: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	c.pid = cmd.Process.Pid
	go func() { c.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
		logf.Close()
		if t.Failed() {
			lab.Keep(t, "coredns.log", logPath)
		}
	})
	return c
}

// Signal sends sig to coredns.
func (c *hostCoreDNS) Signal(sig syscall.Signal) error { return syscall.Kill(c.pid, sig) }

// Exited reports whether coredns has exited, and how.
func (c *hostCoreDNS) Exited() (bool, error) {
	select {
	case err := <-c.exited:
		c.exited <- err
		return true, err
	default:
		return false, nil
	}
}

func freeUDPPort(t *testing.T) int { return freePort(t, "udp") }

func freeTCPPort(t *testing.T) int { return freePort(t, "tcp") }

// freePort is a port on 127.0.0.1 free for network, below the kernel's
// ephemeral range (plugintest.FreePort says why).
func freePort(t *testing.T, network string) int { return plugintest.FreePort(t, network) }
