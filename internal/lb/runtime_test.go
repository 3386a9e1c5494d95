package lb

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestServersAt(t *testing.T) {
	h := HAProxy{Backends: []Backend{
		{Name: "node0_v4", Address: "192.0.2.10:6443"},
		{Name: "node0_v6", Address: "[2001:db8::10]:6443"},
		{Name: "node1_v4", Address: "192.0.2.11:6443"},
		{Name: "node1_192-0-2-11_7443", Address: "192.0.2.11:7443"},
	}}
	for _, tc := range []struct {
		addr string
		want []string
	}{
		{"192.0.2.10", []string{"node0_v4"}},
		{"::ffff:192.0.2.10", []string{"node0_v4"}},
		{"2001:db8::10", []string{"node0_v6"}},
		{"192.0.2.11", []string{"node1_v4", "node1_192-0-2-11_7443"}},
		{"192.0.2.12", nil},
	} {
		if got := ServersAt(h, netip.MustParseAddr(tc.addr)); !slices.Equal(got, tc.want) {
			t.Errorf("ServersAt(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestServerDownCommand(t *testing.T) {
	for _, tc := range []struct {
		backend, server, want string
	}{
		{"ocp4_api", "node0_v4", "set server ocp4_api/node0_v4 health down"},
		{"ocp4_api", "node1_192-0-2-11_7443", "set server ocp4_api/node1_192-0-2-11_7443 health down"},
		{"ocp4_api", "a b", ""},
		{"ocp4_api", "a;shutdown sessions", ""},
		{"ocp4_api", "x\nshow info", ""},
		{"a/b", "c", ""},
		{"", "c", ""},
	} {
		got, err := ServerDownCommand(tc.backend, tc.server)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("ServerDownCommand(%q, %q) = %q, %v; want %q", tc.backend, tc.server, got, err, tc.want)
		}
	}
}

// TestMasterSocketWorkerTakesServerDown runs the real haproxy (master-worker,
// as the static pod does) with one server on a loopback listener: the
// command through the master CLI takes the up server down at once, its
// checks bring it back, and an unknown server is an error.
func TestMasterSocketWorkerTakesServerDown(t *testing.T) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Fatalf("haproxy not found (run hack/install-deps.sh as root): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "haproxy.cfg")
	writeTestFile(t, cfg, fmt.Sprintf(`global
    master-worker
defaults
    mode tcp
    timeout connect 300ms
    timeout client 1m
    timeout server 1m
backend c_api
    default-server inter 100ms fall 2 rise 2
    server node0_v4 %s check
`, l.Addr()))
	sock := filepath.Join(dir, "master.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	startHAProxy(t, nil, cfg, sock)
	m := MasterSocket{Path: sock}
	// srv_op_state, the sixth field of "show servers state": 2 running, 0 stopped.
	state := func() string {
		t.Helper()
		out, err := masterQuery(sock, "@1 show servers state c_api")
		if err != nil {
			return "no answer: " + err.Error()
		}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 5 && f[3] == "node0_v4" {
				return f[5]
			}
		}
		return "no state: " + out
	}
	waitState := func(want, what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := state()
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: server state %s, want %s", what, got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitState("2", "the checks pass on the listener")
	down, err := ServerDownCommand("c_api", "node0_v4")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Worker(ctx, down); err != nil {
		t.Fatal(err)
	}
	if got := state(); got != "0" {
		t.Errorf("right after %q the server's state is %s, want 0 (down)", down, got)
	}
	waitState("2", "the checks bring it back")
	if err := m.Worker(ctx, "set server c_api/nobody health down"); err == nil || !strings.Contains(err.Error(), "No such server") {
		t.Errorf("an unknown server: %v, want haproxy's 'No such server.'", err)
	}
	if err := m.Worker(ctx, "show info\nshutdown sessions server c_api/node0_v4"); err == nil {
		t.Error("two commands in one call were sent")
	}
}
