package lbconfig

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/health" // whose busy address fails a reload after lbconfig's OnStartup

	"github.com/infradns/infradns/internal/bgp"
	"github.com/infradns/infradns/internal/cluster"
)

type corefile string

func (c corefile) Body() []byte       { return []byte(c) }
func (c corefile) Path() string       { return "Corefile" }
func (c corefile) ServerType() string { return "dns" }

// realCoreDNS makes caddy.Start build the dns server type as the infradns
// binary does: lbconfig right after ready (coredns/ orders it so), so its
// OnStartup runs before health's, which binds the health address; on any
// free port. (A busy prometheus address fails no reload in CoreDNS 1.15:
// its listen error is logged and dropped.)
func realCoreDNS(t *testing.T) {
	t.Helper()
	dirs, port := dnsserver.Directives, dnsserver.Port
	if !slices.Contains(dirs, pluginName) {
		i := slices.Index(dirs, "ready")
		if i < 0 || slices.Index(dirs, "health") < i {
			t.Fatalf("ready (lbconfig's anchor) must come before health: %v", dirs)
		}
		dnsserver.Directives = slices.Concat(dirs[:i+1:i+1], []string{pluginName}, dirs[i+1:])
	}
	dnsserver.Port = "0"
	t.Cleanup(func() { dnsserver.Directives, dnsserver.Port = dirs, port })
}

// busyAddr is a TCP address something listens on until the test ends.
func busyAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// shutdown is what CoreDNS does on SIGTERM: stop the servers, run the
// shutdown hooks.
func shutdown(t *testing.T, inst *caddy.Instance) {
	t.Helper()
	inst.Stop()
	for _, err := range inst.ShutdownCallbacks() {
		t.Errorf("shutdown: %v", err)
	}
}

// eventually polls cond (a bound for a stuck instance, not a timing
// assertion) and fails with its last word.
func eventually(t *testing.T, what string, cond func() (string, bool)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, ok := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s; last: %s", what, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readOrEmpty(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// TestFailedReloadFiles: a Corefile reload that fails after lbconfig's
// OnStartup (here health cannot bind its address) discards the new
// instance without its OnShutdown. The old instance keeps the files and
// keeps acting; the discarded one never writes or reloads, not even once
// the old one stops on the next good reload, whose instance then acts
// (the defect: the discarded instance waited for the path lock, took it
// first when the old instance let go, wrote the failed configuration and
// left the good one waiting for ever).
func TestFailedReloadFiles(t *testing.T) {
	realCoreDNS(t)
	dir := t.TempDir()
	cfg, reloads, gate := filepath.Join(dir, "haproxy.cfg"), filepath.Join(dir, "reloads"), filepath.Join(dir, "go")
	// Each Corefile names itself in its reload command and gives its own
	// backend; A's reload fails until the gate file exists, so A is still
	// retrying when the failed reload comes.
	core := func(name, backend, extra string) corefile {
		return corefile(fmt.Sprintf(`.:0 {
	lbconfig {
		cluster ocp4
		node master-0
		api-vip 192.0.2.5
		interface lo
		node-ip 198.51.100.11
		track-dir %[1]s
		backends %[2]s
		haproxy %[1]s/haproxy.cfg
		reload haproxy sh -c "test -e %[1]s/go && echo %[3]s >> %[1]s/reloads"
	}
	%[4]s
}`, dir, backend, name, extra))
	}
	inst, err := caddy.Start(core("A", "198.51.100.21:6443", ""))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "A writes", func() (string, bool) {
		s := readOrEmpty(cfg)
		return s, strings.Contains(s, "198.51.100.21:6443")
	})

	if _, err := inst.Restart(core("B", "198.51.100.22:6443", "health "+busyAddr(t))); err == nil {
		t.Fatal("the reload with a busy health address did not fail")
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "A, still running, retries its reload", func() (string, bool) {
		s := readOrEmpty(reloads)
		return s, s == "A\n"
	})

	inst, err = inst.Restart(core("C", "198.51.100.23:6443", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, inst)
	eventually(t, "C writes and reloads", func() (string, bool) {
		s := readOrEmpty(cfg) + readOrEmpty(reloads)
		return s, strings.Contains(s, "198.51.100.23:6443") && strings.HasSuffix(s, "C\n")
	})
	if s := readOrEmpty(reloads); s != "A\nC\n" {
		t.Errorf("reloads by %q, want A then C: the discarded B acted", s)
	}
}

// fakeSpeakers stands for the embedded speaker: each speaker made is named
// by its AS number, and what each is told is logged in order.
type fakeSpeakers struct {
	mu  sync.Mutex
	log []string
}

func (f *fakeSpeakers) add(s string) {
	f.mu.Lock()
	f.log = append(f.log, s)
	f.mu.Unlock()
}

func (f *fakeSpeakers) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.log, "; ")
}

type fakeSpeaker struct {
	f   *fakeSpeakers
	asn uint32
}

func (s fakeSpeaker) Announce(_ context.Context, r []netip.Prefix) error {
	s.f.add(fmt.Sprintf("%d announce %v", s.asn, r))
	return nil
}
func (s fakeSpeaker) Sessions() []bgp.Session { return nil }
func (s fakeSpeaker) Close(context.Context) error {
	s.f.add(fmt.Sprintf("%d close", s.asn))
	return nil
}

// fakeBGP gives the process's announcer a fake speaker that logs to sp,
// no local routes, and the hand-over relay ho (nil: one that does nothing)
// until the test ends.
func fakeBGP(t *testing.T, sp *fakeSpeakers, ho handOver) {
	speakerFor = func(cfg cluster.BGP) (bgp.Speaker, error) {
		sp.add(fmt.Sprintf("%d new", cfg.ASN))
		return fakeSpeaker{f: sp, asn: cfg.ASN}, nil
	}
	if ho == nil {
		ho = nopHandOver{}
	}
	localVIPs, newHandOver = noLocal{}, func() handOver { return ho }
	t.Cleanup(func() {
		speakerFor, localVIPs, newHandOver = newSpeaker, bgp.LocalVIPs(bgp.LocalRoutes{}), realHandOver
		// The announced series are the fake's: gone with it (the metrics
		// test counts the series the package's other tests leave).
		announcedMu.Lock()
		clear(announcedNow)
		announcedMu.Unlock()
		bgpAnnounced.Reset()
	})
}

type noLocal struct{}

func (noLocal) Hold([]netip.Prefix) error { return nil }

// TestFailedReloadBGP: in BGP mode the failed reload's instance has new
// BGP settings. It must not touch the shared speaker: the old instance's
// speaker keeps announcing, and only the next good reload's settings
// replace it (the defect: the discarded instance had already switched the
// speaker to the failed configuration's settings).
func TestFailedReloadBGP(t *testing.T) {
	realCoreDNS(t)
	sp := &fakeSpeakers{}
	fakeBGP(t, sp, nil)
	dir := t.TempDir()
	core := func(asn int, extra string) corefile {
		return corefile(fmt.Sprintf(`.:0 {
	lbconfig {
		cluster ocp4
		node master-0
		api-vip 192.0.2.5
		node-ip 198.51.100.11
		track-dir %[1]s
		backends 198.51.100.21:6443
		health-check api none
		vip-mode bgp
		bgp-asn %[2]d
		bgp-router-id 198.51.100.11
		bgp-peer 198.51.100.1 64500
	}
	%[3]s
}`, dir, asn, extra))
	}
	announced := func(asn int) func() (string, bool) {
		return func() (string, bool) {
			s := sp.String()
			return s, strings.HasSuffix(s, fmt.Sprintf("%d announce [192.0.2.5/32]", asn))
		}
	}
	inst, err := caddy.Start(core(64512, ""))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "A announces", announced(64512))

	if _, err := inst.Restart(core(64514, "health "+busyAddr(t))); err == nil {
		t.Fatal("the reload with a busy health address did not fail")
	}
	inst, err = inst.Restart(core(64516, ""))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "C announces", announced(64516))
	shutdown(t, inst)
	if s := sp.String(); strings.Contains(s, "64514") {
		t.Errorf("the discarded instance's settings reached the speaker: %s", s)
	}
	// The old speaker closes before the new one announces; the last
	// instance's stop withdraws and closes. (Whether the first apply came
	// before the plan, announcing nothing, is timing.)
	want := "64512 new; 64512 announce [192.0.2.5/32]; 64516 new; 64512 close; 64516 announce [192.0.2.5/32]; 64516 announce []; 64516 close"
	if s := strings.Replace(sp.String(), "64512 announce []; ", "", 1); s != want {
		t.Errorf("speakers:\n got %s\nwant %s", s, want)
	}
}

// TestFailedReloadFromNoLBConfig: the running Corefile has no lbconfig, so
// no old lbconfig hears that the reload failed. The failed reload's
// lbconfig must still never act (the defect: with no lock holder it wrote
// and reloaded at once), and the next good reload's lbconfig acts.
func TestFailedReloadFromNoLBConfig(t *testing.T) {
	realCoreDNS(t)
	dir := t.TempDir()
	cfg, reloads := filepath.Join(dir, "haproxy.cfg"), filepath.Join(dir, "reloads")
	core := func(name, backend, extra string) corefile {
		return corefile(fmt.Sprintf(`.:0 {
	lbconfig {
		cluster ocp4
		node master-0
		api-vip 192.0.2.5
		interface lo
		node-ip 198.51.100.11
		track-dir %[1]s
		backends %[2]s
		haproxy %[1]s/haproxy.cfg
		reload haproxy sh -c "echo %[3]s >> %[1]s/reloads"
	}
	%[4]s
}`, dir, backend, name, extra))
	}
	// No health here: CoreDNS's health plugin re-runs its OnStartup on a
	// failed reload beside its running goroutines (a data race of its own).
	inst, err := caddy.Start(corefile(".:0 {\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inst.Restart(core("B", "198.51.100.22:6443", "health "+busyAddr(t))); err == nil {
		t.Fatal("the reload with a busy health address did not fail")
	}
	inst, err = inst.Restart(core("C", "198.51.100.23:6443", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, inst)
	eventually(t, "C writes and reloads", func() (string, bool) {
		s := readOrEmpty(cfg) + readOrEmpty(reloads)
		return s, strings.Contains(s, "198.51.100.23:6443") && strings.HasSuffix(s, "C\n")
	})
	if s := readOrEmpty(reloads); s != "C\n" {
		t.Errorf("reloads by %q, want C alone: the discarded B acted", s)
	}
}
