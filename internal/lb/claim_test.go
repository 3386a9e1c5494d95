package lb

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/cluster"
)

// threeGroups is the model of three ingress VIPs seen from master-2, with
// its plan: home of ingress-2, holding back ingress and ingress-3.
func threeGroups(t *testing.T, dir string) (*cluster.Model, Plan) {
	t.Helper()
	s := spec(false)
	s.Node = "master-2"
	s.TrackDir = dir
	s.IngressVIPs = ips("192.0.2.10", "192.0.2.11", "192.0.2.12")
	m := mustModel(s)
	sn := snap(3, false)
	sn.IngressNodes = []string{"master-1", "master-2", "master-0"}
	p, err := Desired(sn, m)
	if err != nil {
		t.Fatal(err)
	}
	return m, p
}

func TestClaimGate(t *testing.T) {
	dir := t.TempDir()
	m, p := threeGroups(t, dir)
	path := func(g string) string { return TrackPath(m, g) }
	hold := map[string]bool{}
	for _, tf := range p.TrackFiles {
		hold[tf.Path] = tf.Hold
	}
	// master-2 is the third router by name: home of ingress-3 (rotated by 2).
	if hold[path("ingress-3")] || !hold[path("ingress")] || !hold[path("ingress-2")] || hold[path("api")] {
		t.Fatalf("Hold = %v", hold)
	}

	t0 := time.Unix(1000, 0)
	g := NewClaimGate(m, ClaimDelay)
	type want struct{ open, known bool }
	check := func(when string, healthy, now time.Time, w map[string]want) {
		t.Helper()
		for group, exp := range w {
			open, known := g.Open(path(group), healthy, now)
			if open != exp.open || known != exp.known {
				t.Errorf("%s: %s open=%v known=%v, want %+v", when, group, open, known, exp)
			}
		}
	}
	// Before any plan: the API group follows its check; spread groups are
	// left as they are.
	check("before a plan", t0, t0, map[string]want{
		"api": {true, true}, "ingress": {false, false}, "ingress-3": {false, false},
	})
	g.Update(p, t0)
	check("assigned now", t0, t0, map[string]want{
		"api": {true, true}, "ingress-3": {true, true}, "ingress": {false, true}, "ingress-2": {false, true},
	})
	check("just before the delay", t0, t0.Add(ClaimDelay-time.Millisecond), map[string]want{"ingress": {false, true}})
	check("after the delay", t0, t0.Add(ClaimDelay), map[string]want{"ingress": {true, true}, "ingress-2": {true, true}})
	// The check passed later than the assignment: the wait counts from it.
	check("healthy late", t0.Add(3*time.Second), t0.Add(ClaimDelay+time.Second), map[string]want{"ingress": {false, true}})
	// A later plan keeps the first assignment's time.
	g.Update(p, t0.Add(time.Hour))
	check("re-planned", t0, t0.Add(ClaimDelay), map[string]want{"ingress": {true, true}})
	// No longer assigned here: closed, so it comes back closed.
	g.Update(Plan{TrackFiles: p.TrackFiles[:1]}, t0.Add(time.Hour))
	check("unassigned", t0, t0.Add(2*time.Hour), map[string]want{"ingress": {false, true}, "ingress-3": {false, true}})
}

// TestClaimGateKeepsClaims: a CoreDNS restarted on a node whose keepalived
// holds a group it is not home to (after a failover) finds the group's file
// at 0 and must not close it: that would drop the VIP for nothing.
func TestClaimGateKeepsClaims(t *testing.T) {
	dir := t.TempDir()
	m, p := threeGroups(t, dir)
	if err := os.WriteFile(TrackPath(m, "ingress"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	g := NewClaimGate(m, ClaimDelay)
	g.Update(p, t0)
	if open, known := g.Open(TrackPath(m, "ingress"), t0, t0); !open || !known {
		t.Errorf("claimed group: open=%v known=%v, want open", open, known)
	}
	if open, _ := g.Open(TrackPath(m, "ingress-2"), t0, t0); open {
		t.Error("a group whose file says 1 opened at once")
	}
	// The next snapshot's plan must not close it either.
	g.Update(p, t0.Add(time.Second))
	if open, _ := g.Open(TrackPath(m, "ingress"), t0, t0.Add(time.Second)); !open {
		t.Error("a later plan closed the group keepalived holds")
	}
}

// TestProberGate: the prober writes what the gate says per file, and
// leaves a file alone while the gate knows nothing of it.
func TestProberGate(t *testing.T) {
	dir := t.TempDir()
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	open, held, unknown := filepath.Join(dir, "open"), filepath.Join(dir, "held"), filepath.Join(dir, "unknown")
	verdicts := make(chan bool, 10)
	// The client's timeout is not the interval: under -race on a loaded
	// machine a 20 ms timeout failed a probe and flipped the verdict.
	p := &Prober{URL: srv.URL, Paths: []string{open, held, unknown}, Interval: 20 * time.Millisecond, Rise: 1, Fall: 1,
		Client: &http.Client{Timeout: 5 * time.Second},
		Open: func(path string, _, _ time.Time) (bool, bool) {
			return path == open, path != unknown
		},
		Changed: func(h bool) { verdicts <- h },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	if !<-verdicts {
		t.Fatal("first verdict unhealthy")
	}
	cancel()
	<-done
	for path, want := range map[string]string{open: "0\n", held: "1\n"} {
		if b, err := os.ReadFile(path); err != nil || string(b) != want {
			t.Errorf("%s = %q (%v), want %q", filepath.Base(path), b, err, want)
		}
	}
	if _, err := os.Stat(unknown); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the file the gate does not know was written: %v", err)
	}
}

// TestProberStopWritesNothing: a probe cut short by the stop is no verdict;
// writing "1" on the way out would drop the VIP for nothing.
func TestProberStopWritesNothing(t *testing.T) {
	dir := t.TempDir()
	inFlight := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		inFlight <- struct{}{}
		<-r.Context().Done()
	}))
	defer srv.Close()
	path := filepath.Join(dir, "track")
	p := &Prober{URL: srv.URL, Paths: []string{path}, Interval: time.Second, Rise: 1, Fall: 1,
		Client: &http.Client{Timeout: 10 * time.Second}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	<-inFlight
	cancel()
	<-done
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the stop wrote a verdict: %v", err)
	}
}
