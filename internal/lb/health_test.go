package lb

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestProberWithKeepalived runs the rendered keepalived.conf in a real
// keepalived, in a network namespace made for the test, and a Prober on a
// local HTTP check: healthy → the node takes the VIP; unhealthy → FAULT and
// the VIP leaves the interface. This checks the template's track_file and
// that keepalived sees the prober's atomic (rename) writes.
func TestProberWithKeepalived(t *testing.T) {
	tools := labTools(t)
	ns := tools.Wrap[len(tools.Wrap)-1]
	// keepalived puts an instance in FAULT while its interface has no IPv4 address.
	for _, args := range [][]string{{"-n", ns, "link", "set", "eth1", "up"}, {"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "addr", "add", "198.51.100.11/24", "dev", "eth0"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	dir := t.TempDir()
	cs := spec(false)
	cs.IngressVIPs = nil
	cs.TrackDir = dir
	c := mustModel(cs)
	p, err := Desired(Snapshot{Nodes: []Node{{Name: "master-0", ControlPlane: true, Addresses: ips("198.51.100.11")}},
		APIServers: []netip.AddrPort{ap("198.51.100.11:6443")}}, c)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := RenderKeepalived(p)
	if err != nil {
		t.Fatal(err)
	}
	confPath := filepath.Join(dir, "keepalived.conf")
	writeTestFile(t, confPath, string(conf))

	var healthy atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "keepalived", "-n", "-l", "-D", "-f", confPath,
		"-p", filepath.Join(dir, "k.pid"), "-r", filepath.Join(dir, "v.pid"))
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

	hasVIP := func() (string, bool) {
		b, _ := exec.Command("ip", "-n", ns, "-4", "addr", "show", "dev", "eth0").CombinedOutput()
		return string(b), strings.Contains(string(b), "192.0.2.5/32")
	}
	verdicts := make(chan bool, 10)
	pr := &Prober{URL: srv.URL, Paths: []string{TrackPath(c, "api")}, Interval: 50 * time.Millisecond, Rise: 2, Fall: 2,
		Changed: func(h bool) { verdicts <- h }}
	go func() { _ = pr.Run(ctx) }()

	// Unhealthy at first: keepalived created the track file as 1 (FAULT).
	if v := <-verdicts; v {
		t.Fatal("First verdict healthy while the check fails")
	}
	time.Sleep(500 * time.Millisecond) // > 3 advert intervals: it would have become MASTER
	if s, ok := hasVIP(); ok {
		t.Fatalf("VIP taken while unhealthy:\n%s", s)
	}
	healthy.Store(true)
	if v := <-verdicts; !v {
		t.Fatal("No healthy verdict")
	}
	waitFor(t, func() (string, bool) { return hasVIP() })
	b, _ := os.ReadFile(TrackPath(c, "api"))
	if string(b) != "0\n" {
		t.Errorf("Track file = %q, want 0", b)
	}
	healthy.Store(false)
	if v := <-verdicts; v {
		t.Fatal("No unhealthy verdict")
	}
	waitFor(t, func() (string, bool) { s, ok := hasVIP(); return s, !ok })
}

// TestProberRefusedFailsAtOnce: a port that refuses connections fails the
// check at once, between probes and without Fall failures in a row. The
// probe interval is an hour and Fall 3, so only the connect checks can
// produce the unhealthy verdict.
func TestProberRefusedFailsAtOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "api.health")
	verdicts := make(chan bool, 10)
	pr := &Prober{URL: srv.URL + "/haproxy_ready", Paths: []string{path}, Interval: time.Hour, Watch: 20 * time.Millisecond,
		Rise: 1, Fall: 3, Changed: func(h bool) { verdicts <- h }}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() { _ = pr.Run(ctx) }()
	select {
	case v := <-verdicts:
		if !v {
			t.Fatal("first verdict unhealthy while the check passes")
		}
	case <-ctx.Done():
		t.Fatal("no verdict")
	}
	srv.Close() // the listener goes: connections are refused
	select {
	case v := <-verdicts:
		if v {
			t.Fatal("second verdict healthy after the port closed")
		}
	case <-ctx.Done():
		t.Fatal("a refused port never failed the check")
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "1\n" {
		t.Errorf("track file = %q, %v; want 1", b, err)
	}
}

// TestProberStoppingFailsAtOnce: a daemon that says it stops fails its
// check at the next watch, while its port still answers every probe, and
// passes again once the file is gone (a stop called off, or the next
// daemon started).
func TestProberStoppingFailsAtOnce(t *testing.T) {
	var probes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { probes.Add(1) }))
	defer srv.Close()
	dir := t.TempDir()
	path, stop := filepath.Join(dir, "api.health"), filepath.Join(dir, HAProxyStopping)
	verdicts := make(chan bool, 10)
	pr := &Prober{URL: srv.URL + "/haproxy_ready", Paths: []string{path}, Stopping: stop, Interval: 30 * time.Millisecond,
		Watch: 10 * time.Millisecond, Rise: 2, Fall: 3, Changed: func(h bool) { verdicts <- h }}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() { _ = pr.Run(ctx) }()
	want := func(healthy bool, track string) {
		t.Helper()
		select {
		case v := <-verdicts:
			if v != healthy {
				t.Fatalf("verdict %v, want %v", v, healthy)
			}
		case <-ctx.Done():
			t.Fatalf("no verdict %v", healthy)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != track {
			t.Fatalf("track file = %q, %v; want %q", b, err, track)
		}
	}
	want(true, "0\n")
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	want(false, "1\n")
	// Probes would pass (the server answers): the file alone holds it.
	before := probes.Load()
	time.Sleep(200 * time.Millisecond)
	select {
	case v := <-verdicts:
		t.Fatalf("verdict %v while the stopping file is there", v)
	default:
	}
	if n := probes.Load(); n != before {
		t.Errorf("%d probes sent while the daemon said it stops; want none", n-before)
	}
	if err := os.Remove(stop); err != nil {
		t.Fatal(err)
	}
	want(true, "0\n")

	// With Stops, that verdict goes to it instead of Changed(false); a
	// failure of another kind still goes to Changed.
	stops := make(chan struct{}, 10)
	pr2 := &Prober{URL: srv.URL + "/haproxy_ready", Paths: []string{path}, Stopping: stop, Interval: 30 * time.Millisecond,
		Watch: 10 * time.Millisecond, Rise: 2, Fall: 3, Changed: func(h bool) { verdicts <- h }, Stops: func() { stops <- struct{}{} }}
	cancel()
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() { _ = pr2.Run(ctx) }()
	want(true, "0\n")
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stops:
	case v := <-verdicts:
		t.Fatalf("verdict %v to Changed, want Stops", v)
	case <-ctx.Done():
		t.Fatal("no Stops")
	}
	if err := os.Remove(stop); err != nil {
		t.Fatal(err)
	}
	want(true, "0\n")
	srv.Close()
	want(false, "1\n")
}

// TestProberKeepsHysteresis: a bad answer from a port that is open is
// doubt, not death: one 503 between successes moves nothing, two in a row
// do.
func TestProberKeepsHysteresis(t *testing.T) {
	var n atomic.Int32
	bad := map[int32]bool{3: true, 6: true, 7: true}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if bad[n.Add(1)] {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "api.health")
	var got []bool
	verdicts := make(chan bool, 10)
	pr := &Prober{URL: srv.URL, Paths: []string{path}, Interval: 10 * time.Millisecond, Watch: 2 * time.Millisecond,
		Rise: 2, Fall: 2, Changed: func(h bool) { verdicts <- h }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = pr.Run(ctx); close(done) }()
	deadline := time.After(30 * time.Second)
	for n.Load() < 10 {
		select {
		case v := <-verdicts:
			got = append(got, v)
		case <-deadline:
			t.Fatalf("only %d probes in 30 s", n.Load())
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	<-done
	for len(verdicts) > 0 {
		got = append(got, <-verdicts)
	}
	// Probes 1-2 ok → healthy; 3 bad alone → nothing; 4-5 ok; 6-7 bad →
	// unhealthy; 8-9 ok → healthy.
	want := []bool{true, false, true}
	if len(got) < len(want) || !slices.Equal(got[:3], want) {
		t.Errorf("verdicts = %v, want %v", got, want)
	}
}

func TestHostPort(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"http://127.0.0.1:9454/haproxy_ready", "127.0.0.1:9454"},
		{"http://[::1]:1936/healthz/ready", "[::1]:1936"},
		{"http://localhost/healthz", "localhost:80"},
		{"https://127.0.0.1/readyz", "127.0.0.1:443"},
		{"unix:///run/x.sock", ""},
		{"::bad", ""},
	} {
		if got := hostPort(tc.url); got != tc.want {
			t.Errorf("hostPort(%q) = %q, want %q", tc.url, got, tc.want)
		}
	}
}
