// Package netnstest makes network namespaces for tests that need real
// sockets and real tools (keepalived -t checks that its interface exists;
// VRRP and netlink code needs a link of its own). Every namespace it makes is
// named idnsv-PID-SUFFIX and deleted when the test ends; nothing in the root
// namespace is touched. It needs root and iproute2.
package netnstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// New makes a namespace holding lo (up) and a veth pair eth0/eth1 (down,
// no addresses), and returns its name.
func New(t testing.TB, suffix string) string {
	t.Helper()
	ns := name(t, suffix)
	Run(t, "netns", "add", ns)
	Run(t, "-n", ns, "link", "set", "lo", "up")
	Run(t, "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1")
	return ns
}

// Pair makes two namespaces joined by a veth pair, eth0 in each, up, with
// the lab addresses 198.51.100.11/24 and .12/24, 2001:db8:1::11/64 and ::12/64
// (no DAD) and a multicast route, and returns their names.
func Pair(t testing.TB, suffix string) (a, b string) {
	t.Helper()
	a, b = name(t, suffix+"-a"), name(t, suffix+"-b")
	Run(t, "netns", "add", a)
	Run(t, "netns", "add", b)
	Run(t, "-n", a, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", b)
	for i, ns := range []string{a, b} {
		for _, s := range []string{"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"} {
			if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", s).CombinedOutput(); err != nil {
				t.Fatalf("sysctl %s: %v: %s", s, err, out)
			}
		}
		Run(t, "-n", ns, "link", "set", "lo", "up")
		Run(t, "-n", ns, "addr", "add", fmt.Sprintf("198.51.100.%d/24", 11+i), "dev", "eth0")
		Run(t, "-n", ns, "addr", "add", fmt.Sprintf("2001:db8:1::%d/64", 11+i), "dev", "eth0", "nodad")
		Run(t, "-n", ns, "link", "set", "eth0", "up")
		Run(t, "-n", ns, "route", "add", "224.0.0.0/4", "dev", "eth0")
	}
	return a, b
}

// Run runs ip with args and fails the test on an error.
func Run(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// Enter moves the calling thread into the namespace. Call it from a
// goroutine that has called runtime.LockOSThread and never unlocks, so Go
// discards the thread when the goroutine ends.
func Enter(ns string) error {
	f, err := os.Open(filepath.Join("/run/netns", ns))
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
}

func name(t testing.TB, suffix string) string {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("ip not found (run hack/install-deps.sh as root): %v", err)
	}
	ns := fmt.Sprintf("idnsv-%d-%s", os.Getpid(), suffix)
	_ = exec.Command("ip", "netns", "del", ns).Run() // a leftover of a killed run
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	return ns
}
