package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func pfx(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, x := range s {
		out = append(out, Host(netip.MustParseAddr(x)))
	}
	return out
}

var (
	apiGroup = Group{Name: "api", Check: "api", VIPs: []netip.Addr{netip.MustParseAddr("10.91.100.1"), netip.MustParseAddr("fd00:91:100::1")}}
	ingress  = Group{Name: "ingress", Check: "ingress", VIPs: []netip.Addr{netip.MustParseAddr("10.91.100.2")}}
	svcs     = Group{Name: "services", Check: "services", VIPs: []netip.Addr{netip.MustParseAddr("10.91.100.16"), netip.MustParseAddr("fd00:91:100::10")}}
)

func TestStateRoutes(t *testing.T) {
	tests := []struct {
		name      string
		state     State
		routes    []netip.Prefix
		localVIPs []netip.Prefix
	}{
		{"nothing known", State{}, nil, nil},
		// Not held before the check's first pass: a starting node's own
		// lookups of the API VIP go to a node that answers.
		{"eligible, check not known yet", State{Groups: []Group{apiGroup}}, nil, nil},
		{"eligible, check failing, never passed", State{Groups: []Group{apiGroup}, Healthy: map[string]bool{"api": false}}, nil, nil},
		{"eligible and healthy", State{Groups: []Group{apiGroup}, Healthy: map[string]bool{"api": true}},
			pfx("10.91.100.1", "fd00:91:100::1"), pfx("10.91.100.1", "fd00:91:100::1")},
		{"one check failing after it passed", State{Groups: []Group{ingress, apiGroup}, Healthy: map[string]bool{"api": true, "ingress": false}, Passed: map[string]bool{"api": true, "ingress": true}},
			pfx("10.91.100.1", "fd00:91:100::1"), pfx("10.91.100.1", "10.91.100.2", "fd00:91:100::1")},
		{"one check failing, never passed", State{Groups: []Group{ingress, apiGroup}, Healthy: map[string]bool{"api": true, "ingress": false}},
			pfx("10.91.100.1", "fd00:91:100::1"), pfx("10.91.100.1", "fd00:91:100::1")},
		{"healthy but not eligible", State{Groups: []Group{ingress}, Healthy: map[string]bool{"api": true}, Passed: map[string]bool{"api": true}}, nil, nil},
		{"draining", State{Groups: []Group{apiGroup}, Healthy: map[string]bool{"api": true}, Draining: true}, nil, pfx("10.91.100.1", "fd00:91:100::1")},
		{"Services beside the groups", State{Groups: []Group{apiGroup}, Services: []Group{svcs}, Healthy: map[string]bool{"api": true, "services": true}},
			pfx("10.91.100.1", "10.91.100.16", "fd00:91:100::1", "fd00:91:100::10"), pfx("10.91.100.1", "10.91.100.16", "fd00:91:100::1", "fd00:91:100::10")},
		{"Services not known healthy yet", State{Groups: []Group{apiGroup}, Services: []Group{svcs}, Healthy: map[string]bool{"api": true}},
			pfx("10.91.100.1", "fd00:91:100::1"), pfx("10.91.100.1", "fd00:91:100::1")},
		{"Services draining", State{Services: []Group{svcs}, Healthy: map[string]bool{"services": true}, Draining: true}, nil, pfx("10.91.100.16", "fd00:91:100::10")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.state.Routes(); !slices.Equal(got, tc.routes) {
				t.Errorf("Routes = %v, want %v", got, tc.routes)
			}
			if got := tc.state.Local(); !slices.Equal(got, tc.localVIPs) {
				t.Errorf("Local = %v, want %v", got, tc.localVIPs)
			}
		})
	}
}

// events records, in order, what the speaker and the local VIPs were told.
type events struct {
	mu  sync.Mutex
	log []string
	// fail makes the next n announces fail.
	fail int
}

func (e *events) add(s string) {
	e.mu.Lock()
	e.log = append(e.log, s)
	e.mu.Unlock()
}

func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.log, "; ")
}

type fakeSpeaker struct{ *events }

func (f fakeSpeaker) Announce(_ context.Context, r []netip.Prefix) error {
	f.mu.Lock()
	if f.fail > 0 {
		f.fail--
		f.mu.Unlock()
		return errors.New("no session")
	}
	f.mu.Unlock()
	f.add(fmt.Sprint("announce ", r))
	return nil
}
func (f fakeSpeaker) Sessions() []Session           { return nil }
func (f fakeSpeaker) Close(_ context.Context) error { f.add("close"); return nil }

type fakeLocal struct{ *events }

func (f fakeLocal) Hold(v []netip.Prefix) error { f.add(fmt.Sprint("hold ", v)); return nil }

type quiet struct{}

func (quiet) Infof(string, ...any)    {}
func (quiet) Warningf(string, ...any) {}
func (quiet) Errorf(string, ...any)   {}

// TestAnnouncerOrder: a VIP is held before it is announced, withdrawn a
// drain before it is let go, and a stop withdraws, drains, lets go and
// closes, in that order.
func TestAnnouncerOrder(t *testing.T) {
	ev := &events{}
	a := NewAnnouncer(fakeSpeaker{ev}, fakeLocal{ev}, quiet{})
	a.Drain = 50 * time.Millisecond
	now := time.Unix(1000, 0)
	ctx := context.Background()
	step := func(d time.Duration) time.Duration { now = now.Add(d); return a.apply(ctx, now) }

	a.SetGroups([]Group{ingress})
	step(0)
	a.SetHealth("ingress", true)
	step(0)
	want := "announce []; hold [10.91.100.2/32]; announce [10.91.100.2/32]"
	if got := ev.String(); got != want {
		t.Fatalf("bring-up:\n got %s\nwant %s", got, want)
	}

	ev.log = nil
	a.SetGroups(nil) // the router moved away
	next := step(0)
	if got := ev.String(); got != "announce []" || next != 50*time.Millisecond {
		t.Fatalf("leaving: got %q, look again in %v; want the withdraw alone and 50ms", got, next)
	}
	ev.log = nil
	step(20 * time.Millisecond)
	if got := ev.String(); got != "" {
		t.Fatalf("within the drain: %q, want nothing", got)
	}
	step(40 * time.Millisecond)
	if got := ev.String(); got != "hold []" {
		t.Fatalf("after the drain: %q, want the VIP let go", got)
	}

	// Back, with a failing announce: retried, and the VIP held meanwhile.
	ev.log = nil
	ev.fail = 1
	a.SetGroups([]Group{ingress})
	if next := step(0); next != retryInterval {
		t.Fatalf("failed announce: look again in %v, want %v", next, retryInterval)
	}
	step(retryInterval)
	if got := ev.String(); got != "hold [10.91.100.2/32]; announce [10.91.100.2/32]" {
		t.Fatalf("retry: %q", got)
	}

	ev.log = nil
	a.goodbye(time.Second)
	if got := ev.String(); got != "announce []; hold []; close" {
		t.Fatalf("goodbye: %q", got)
	}
}

// TestAnnouncerLeaving: Leaving hears of an announced VIP before its
// withdrawal whenever the node keeps holding it for a drain (it leaves the
// node; a stop) or serving it (its daemon stopping on purpose), with the
// drain; never of a failing check's withdrawal (the VIP's connections have
// nowhere to go) or a VIP never announced.
func TestAnnouncerLeaving(t *testing.T) {
	ev := &events{}
	a := NewAnnouncer(fakeSpeaker{ev}, fakeLocal{ev}, quiet{})
	a.Drain = 50 * time.Millisecond
	a.Leaving = func(ctx context.Context, vips []netip.Addr, held time.Duration) {
		dl, ok := ctx.Deadline()
		ev.add(fmt.Sprintf("leaving %v for %v (deadline %v)", vips, held, ok && time.Until(dl) <= LeaveWait))
	}
	now := time.Unix(1000, 0)
	ctx := context.Background()
	step := func(d time.Duration) { now = now.Add(d); a.apply(ctx, now) }
	a.SetGroups([]Group{ingress})
	a.SetHealth("ingress", true)
	step(0)
	for _, tc := range []struct {
		name string
		do   func()
		want string
	}{
		{"check fails", func() { a.SetHealth("ingress", false); step(0) }, "announce []"},
		{"check passes", func() { a.SetHealth("ingress", true); step(0) }, "announce [10.91.100.2/32]"},
		{"its daemon stops (haproxy's stopping file)", func() { a.SetStopping("ingress"); step(0) },
			"leaving [10.91.100.2] for 50ms (deadline true); announce []"},
		{"still stopping: told once", func() { step(10 * time.Millisecond) }, ""},
		{"a new daemon passes", func() { a.SetHealth("ingress", true); step(0) }, "announce [10.91.100.2/32]"},
		{"the VIP leaves the node", func() { a.SetGroups(nil); step(0) },
			"leaving [10.91.100.2] for 50ms (deadline true); announce []"},
		{"drained", func() { step(60 * time.Millisecond) }, "hold []"},
		{"back, check failing", func() { a.SetHealth("ingress", false); a.SetGroups([]Group{ingress}); step(0) },
			"hold [10.91.100.2/32]"},
		{"leaves again, never announced", func() { a.SetGroups(nil); step(0) }, ""},
		{"drained again", func() { step(60 * time.Millisecond) }, "hold []"},
		{"back", func() { a.SetHealth("ingress", true); a.SetGroups([]Group{ingress}); step(0) },
			"hold [10.91.100.2/32]; announce [10.91.100.2/32]"},
		{"stop", func() { a.goodbye(time.Second) },
			"leaving [10.91.100.2] for 50ms (deadline true); announce []; hold []; close"},
	} {
		ev.log = nil
		tc.do()
		if got := ev.String(); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// TestAnnouncerStopRightAfterStopping: kubelet's SIGTERM comes with
// haproxy's stopping file, so the stopping check's withdrawal and the stop
// race. The peers still hear of the withdrawal though the stop cancelled
// the context it was applied with, and the stop, finding no route left,
// still holds the VIPs for the rest of the drain after that withdrawal
// (let go at once, the SYNs the fabric still sent here were lost).
func TestAnnouncerStopRightAfterStopping(t *testing.T) {
	ev := &events{}
	a := NewAnnouncer(fakeSpeaker{ev}, fakeLocal{ev}, quiet{})
	const drain = 200 * time.Millisecond
	a.Drain = drain
	var told error = errors.New("not told")
	a.Leaving = func(ctx context.Context, vips []netip.Addr, _ time.Duration) {
		told = ctx.Err()
		ev.add(fmt.Sprintf("leaving %v", vips))
	}
	a.SetGroups([]Group{ingress})
	a.SetHealth("ingress", true)
	a.apply(context.Background(), time.Now())

	ev.log = nil
	stopped, cancel := context.WithCancel(context.Background())
	cancel() // the SIGTERM, as the stopping check's withdrawal is applied
	a.SetStopping("ingress")
	a.apply(stopped, time.Now())
	withdrawn := time.Now()
	if got, want := ev.String(), "leaving [10.91.100.2]; announce []"; got != want {
		t.Fatalf("stopping:\n got %s\nwant %s", got, want)
	}
	if told != nil {
		t.Errorf("the peers were told with a context already done (%v): they could not answer", told)
	}

	ev.log = nil
	a.goodbye(time.Second)
	held := time.Since(withdrawn)
	if got, want := ev.String(), "announce []; hold []; close"; got != want {
		t.Fatalf("stop:\n got %s\nwant %s", got, want)
	}
	// A lower bound of a wait the code makes on purpose, not a speed.
	if held < drain-20*time.Millisecond {
		t.Errorf("the VIPs were let go %v after their withdrawal, want the drain (%v)", held, drain)
	}
}

// TestAnnouncerHealth: a failing check withdraws at once and keeps the VIP
// held; passing again re-announces.
func TestAnnouncerHealth(t *testing.T) {
	ev := &events{}
	a := NewAnnouncer(fakeSpeaker{ev}, fakeLocal{ev}, quiet{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx, time.Second) }()
	a.SetGroups([]Group{apiGroup})
	a.SetHealth("api", true)
	waitRoutes(t, a, pfx("10.91.100.1", "fd00:91:100::1"))
	a.SetHealth("api", false)
	waitRoutes(t, a, nil)
	a.SetHealth("api", true)
	waitRoutes(t, a, pfx("10.91.100.1", "fd00:91:100::1"))
	cancel()
	<-done
	if got := ev.String(); strings.Count(got, "hold") != 2 || !strings.HasSuffix(got, "announce []; hold []; close") {
		t.Errorf("events: %s\nwant one hold while healthy or not, and the goodbye", got)
	}
}

// TestAnnouncerServices: the Services' addresses come and go by
// SetServices without a plan, and a new plan (SetGroups) leaves them.
func TestAnnouncerServices(t *testing.T) {
	ev := &events{}
	a := NewAnnouncer(fakeSpeaker{ev}, fakeLocal{ev}, quiet{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx, time.Second) }()
	a.SetGroups([]Group{apiGroup})
	a.SetHealth("api", true)
	a.SetHealth("services", true)
	a.SetServices([]Group{svcs})
	all := pfx("10.91.100.1", "10.91.100.16", "fd00:91:100::1", "fd00:91:100::10")
	waitRoutes(t, a, all)
	a.SetGroups([]Group{apiGroup, ingress})
	a.SetHealth("ingress", true)
	waitRoutes(t, a, pfx("10.91.100.1", "10.91.100.2", "10.91.100.16", "fd00:91:100::1", "fd00:91:100::10"))
	a.SetServices(nil)
	waitRoutes(t, a, pfx("10.91.100.1", "10.91.100.2", "fd00:91:100::1"))
	cancel()
	<-done
}

func waitRoutes(t *testing.T, a *Announcer, want []netip.Prefix) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if slices.Equal(a.Routes(), want) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("routes %v, want %v", a.Routes(), want)
}

// gatedSpeaker is a speaker whose Announce waits for release (one receive
// per call) after saying it has begun, so a test can act in the middle of
// an announce. It records what it did, and a Close that came while an
// announce was in flight.
type gatedSpeaker struct {
	name    string
	ev      *events
	begun   chan struct{}
	release chan struct{}

	mu       sync.Mutex
	inflight bool
}

func newGated(name string, ev *events) *gatedSpeaker {
	return &gatedSpeaker{name: name, ev: ev, begun: make(chan struct{}, 1), release: make(chan struct{}, 8)}
}

func (g *gatedSpeaker) Announce(_ context.Context, r []netip.Prefix) error {
	g.mu.Lock()
	g.inflight = true
	g.mu.Unlock()
	g.begun <- struct{}{}
	<-g.release
	g.ev.add(fmt.Sprint(g.name, " announce ", r))
	g.mu.Lock()
	g.inflight = false
	g.mu.Unlock()
	return nil
}
func (g *gatedSpeaker) Sessions() []Session { return nil }
func (g *gatedSpeaker) Close(context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight {
		g.ev.add(g.name + " close DURING AN ANNOUNCE")
		return nil
	}
	g.ev.add(g.name + " close")
	return nil
}

// TestAnnouncerSetSpeakerDuringApply: a speaker change while an announce to
// the old speaker is in flight. The old announce's result must not count
// for the new speaker (the defect: Routes and the announced metric said
// announced while the new speaker had nothing, and no apply came to fix
// it), the old speaker is closed only once its announce is over (a close
// beside it would be undone by it), and the new one gets every route.
func TestAnnouncerSetSpeakerDuringApply(t *testing.T) {
	ev := &events{}
	old, next := newGated("old", ev), newGated("new", ev)
	a := NewAnnouncer(old, fakeLocal{ev}, quiet{})
	var announced []string
	var amu sync.Mutex
	a.Announced = func(r []netip.Prefix) { amu.Lock(); announced = append(announced, fmt.Sprint(r)); amu.Unlock() }
	a.SetGroups([]Group{ingress})
	a.SetHealth("ingress", true)
	want := pfx("10.91.100.2")

	done := make(chan time.Duration)
	go func() { done <- a.apply(context.Background(), time.Unix(1000, 0)) }()
	<-old.begun // the apply is inside old.Announce(want)
	a.SetSpeaker(next)
	old.release <- struct{}{}
	<-done

	if got := a.Routes(); got != nil {
		t.Errorf("after the interrupted apply: Routes = %v, want none (the new speaker has announced nothing)", got)
	}
	amu.Lock()
	if len(announced) != 0 {
		t.Errorf("announced metric fed %v for a speaker that is gone", announced)
	}
	amu.Unlock()
	select {
	case <-a.kick:
	default:
		t.Fatal("no apply pending after the speaker change")
	}

	next.release <- struct{}{} // apply is synchronous: no wait in Announce
	a.apply(context.Background(), time.Unix(1001, 0))
	select {
	case <-next.begun:
	default:
		t.Error("the new speaker was given no announce")
	}
	if got := a.Routes(); !slices.Equal(got, want) {
		t.Errorf("after the next apply: Routes = %v, want %v", got, want)
	}
	wantEv := "hold [10.91.100.2/32]; old announce [10.91.100.2/32]; old close; new announce [10.91.100.2/32]"
	if got := ev.String(); got != wantEv {
		t.Errorf("events:\n got %s\nwant %s", got, wantEv)
	}
	amu.Lock()
	if got := strings.Join(announced, " "); got != "[] [10.91.100.2/32]" {
		t.Errorf("announced metric fed %s, want [] (the old speaker closed) then [10.91.100.2/32]", got)
	}
	amu.Unlock()
}
