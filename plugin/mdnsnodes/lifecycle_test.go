package mdnsnodes

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/miekg/dns"
)

type corefile string

func (c corefile) Body() []byte       { return []byte(c) }
func (c corefile) Path() string       { return "Corefile" }
func (c corefile) ServerType() string { return "dns" }

// openFDs counts this process's file descriptors and, among them, the UDP
// sockets bound to the mDNS port.
func openFDs(t *testing.T) (total, mdnsSocks int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	for _, f := range []string{"/proc/self/net/udp", "/proc/self/net/udp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) > 9 && strings.HasSuffix(fs[1], ":14E9") && inodes[fs[9]] {
				mdnsSocks++
			}
		}
	}
	return len(ents), mdnsSocks
}

// waitServing returns once every server of inst answers over UDP and TCP.
// dnsserver.Server.Stop only shuts down the dns.Servers that Serve and
// ServePacket have already created, so a Stop that wins the race against a
// just-started instance leaves it serving and Instance.Wait blocks for ever
// (seen in CI); a real CoreDNS is never reloaded within microseconds of start.
func waitServing(t *testing.T, inst *caddy.Instance) {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion("ocp4.example.com.", dns.TypeSOA)
	for _, s := range inst.Servers() {
		for _, c := range []struct{ net, addr string }{{"udp", s.LocalAddr().String()}, {"tcp", s.Addr().String()}} {
			cl := &dns.Client{Net: c.net, Timeout: 200 * time.Millisecond}
			deadline := time.Now().Add(5 * time.Second)
			for {
				if _, _, err := cl.Exchange(m, c.addr); err == nil {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("%s %s not serving: %v", c.net, c.addr, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}

// TestReload starts a real CoreDNS instance whose mdnsnodes listens on the
// loopback interface (its queries never leave the host), reloads it several
// times the way the reload plugin does (new instance up before the old one
// stops, both on port 5353) and stops it: no goroutine or socket may remain.
func TestReload(t *testing.T) {
	testReload(t, corefile("ocp4.example.com {\n mdnsnodes {\n interface lo\n }\n}\n"))
}

// TestReloadWithKubeconfig is TestReload with the API watch on as well: its
// reflectors and client retries must stop with each instance too. The API is
// a port nothing listens on, so the watch keeps retrying throughout.
func TestReloadWithKubeconfig(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: down
  cluster:
    server: https://127.0.0.1:1
users:
- name: nobody
  user:
    token: x
contexts:
- name: down
  context:
    cluster: down
    user: nobody
current-context: down
`), 0o600); err != nil {
		t.Fatal(err)
	}
	testReload(t, corefile("ocp4.example.com {\n mdnsnodes {\n interface lo\n kubeconfig "+kubeconfig+"\n }\n}\n"))
}

func testReload(t *testing.T, input corefile) {
	if !slices.Contains(dnsserver.Directives, pluginName) {
		// The custom build in coredns/ orders the directive; here it only needs to exist.
		dnsserver.Directives = append(dnsserver.Directives, pluginName)
	}
	port := dnsserver.Port
	dnsserver.Port = "0"
	defer func() { dnsserver.Port = port }()

	settle := func() (int, int) {
		time.Sleep(200 * time.Millisecond)
		fds, _ := openFDs(t)
		return runtime.NumGoroutine(), fds
	}
	waitSockets := func(want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, n := openFDs(t)
			if n >= want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d mDNS sockets open, want %d", n, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	g0, f0 := settle()
	inst, err := caddy.Start(input)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitServing(t, inst)
	waitSockets(1) // lo has no IPv6 group membership on some kernels: one family is enough
	// The IPv6 socket opens just after the IPv4 one: count once the number holds.
	_, first := openFDs(t)
	for same := 0; same < 5; same++ {
		time.Sleep(50 * time.Millisecond)
		if _, n := openFDs(t); n != first {
			first, same = n, -1
		}
	}
	for range 5 {
		if inst, err = inst.Restart(input); err != nil {
			t.Fatalf("Restart: %v", err)
		}
		waitServing(t, inst)
		waitSockets(first)
	}
	if _, n := openFDs(t); n != first {
		t.Errorf("%d mDNS sockets after 5 reloads, want %d (one instance's)", n, first)
	}
	// What CoreDNS does on SIGTERM: stop the servers, then run the shutdown hooks.
	if err := inst.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if errs := inst.ShutdownCallbacks(); len(errs) > 0 {
		t.Fatalf("Shutdown callbacks: %v", errs)
	}
	inst.Wait()
	g1, f1 := settle()
	if g1 > g0 || f1 > f0 {
		buf := make([]byte, 1<<20)
		t.Fatalf("After 5 reloads and a stop: %d goroutines (was %d), %d fds+sockets (was %d)\n%s", g1, g0, f1, f0, buf[:runtime.Stack(buf, true)])
	}
}
