package lbconfig

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"

	"github.com/infradns/infradns/internal/bgp"
	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/ecmprelay"
	"github.com/infradns/infradns/internal/lb"
)

// TestLockPathsGeneration: a path once held by a generation is never given
// to an older one (a stale instance cannot overwrite a newer one's files),
// and an instance stopped while it waited does not get the lock.
func TestLockPathsGeneration(t *testing.T) {
	p := filepath.Join(t.TempDir(), "haproxy.cfg")
	ctx := context.Background()
	release, err := lockPaths(ctx, 5, []string{p})
	if err != nil {
		t.Fatal(err)
	}
	release()
	if r, err := lockPaths(ctx, 3, []string{p}); !errors.Is(err, errSuperseded) {
		t.Errorf("generation 3 after 5: %v, want errSuperseded", err)
		if err == nil {
			r()
		}
	}
	release, err = lockPaths(ctx, 6, []string{p})
	if err != nil {
		t.Fatalf("generation 6 after 5: %v", err)
	}

	// Generation 7 waits for 6; it is stopped, then the lock is let go.
	wctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		r, err := lockPaths(wctx, 7, []string{p})
		if err == nil {
			r()
		}
		got <- err
	}()
	cancel()
	release()
	if err := <-got; !errors.Is(err, context.Canceled) { // (its lock let go again)
		t.Errorf("stopped while waiting: %v, want context.Canceled", err)
	}
	release, err = lockPaths(ctx, 8, []string{p})
	if err != nil {
		t.Fatalf("after the stopped waiter: %v", err)
	}
	release()
}

// TestFollowAnnouncerStale: the speaker follows the newest generation that
// asks; an older one (stale) changes nothing and gets no announcer.
// newerGeneration moves the generations well past any instance of an
// earlier test and gives the newest: what a test's announcer follows.
func newerGeneration() uint64 {
	gens.Lock()
	defer gens.Unlock()
	gens.last += 10
	return gens.last
}

func TestFollowAnnouncerStale(t *testing.T) {
	sp := &fakeSpeakers{}
	fakeBGP(t, sp, nil)
	g := newerGeneration()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	holdAnnouncer()
	holdAnnouncer()
	if ann := followAnnouncer(ctx, g, cluster.BGP{ASN: 64512, Speaker: cluster.SpeakerTable}); ann == nil {
		t.Fatal("no announcer for the newest generation")
	}
	if ann := followAnnouncer(ctx, g-1, cluster.BGP{ASN: 64514, Speaker: cluster.SpeakerTable}); ann != nil {
		t.Error("a stale generation got the announcer")
	}
	releaseAnnouncer()
	releaseAnnouncer() // the last reference: goodbye
	if s := sp.String(); strings.Contains(s, "64514") || !strings.HasPrefix(s, "64512 new;") || !strings.HasSuffix(s, "64512 close") {
		t.Errorf("speakers: %s, want 64512's alone, closed at the last release", s)
	}
}

// TestAdoptHookProcessStop: caddy's ShutdownEvent (a SIGTERM or SIGINT)
// marks the process as stopping, so the drainer lingers; the events of a
// start or a reload do not.
func TestAdoptHookProcessStop(t *testing.T) {
	t.Cleanup(func() { processStopping.Store(false) })
	for _, tt := range []struct {
		ev   caddy.EventName
		info any
		want bool
	}{
		{caddy.StartupEvent, nil, false},
		{caddy.ShutdownEvent, "SIGTERM", true},
	} {
		processStopping.Store(false)
		if err := adoptHook(tt.ev, tt.info); err != nil {
			t.Errorf("%s: %v", tt.ev, err)
		}
		if got := processStopping.Load(); got != tt.want {
			t.Errorf("after %s: process stopping %v, want %v", tt.ev, got, tt.want)
		}
	}
}

// nopHandOver stands in for the relay in the tests that run lbconfig in
// this process's namespace.
type nopHandOver struct{}

func (nopHandOver) Update(ecmprelay.Plan, []netip.Addr) error { return nil }
func (nopHandOver) Leave(context.Context, []netip.Addr, time.Duration) (int, int) {
	return 0, 0
}
func (nopHandOver) Close() error { return nil }

// recHandOver records what the relay is told, in the speakers' log.
type recHandOver struct{ f *fakeSpeakers }

func (h recHandOver) Update(p ecmprelay.Plan, vips []netip.Addr) error {
	var peers []string
	for _, pe := range p.Peers {
		peers = append(peers, pe.Addr.String())
	}
	h.f.add(fmt.Sprintf("relay %v to %v from %v", vips, peers, p.Local))
	return nil
}
func (h recHandOver) Leave(_ context.Context, vips []netip.Addr, d time.Duration) (int, int) {
	h.f.add(fmt.Sprintf("leave %v for %v", vips, d))
	return 1, 1
}
func (h recHandOver) Close() error { h.f.add("relay closed"); return nil }

// TestHandOverGoodbye: the process's relay follows the plans (the other
// nodes of its groups, their VIPs; nothing with bgp-relay off), hears of
// the announced VIPs before the stop withdraws them, for 90 % of the
// drain, and is closed after the goodbye, once the VIPs left lo.
func TestHandOverGoodbye(t *testing.T) {
	sp := &fakeSpeakers{}
	fakeBGP(t, sp, recHandOver{f: sp})
	g := newerGeneration()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	holdAnnouncer()
	ann := followAnnouncer(ctx, g, cluster.BGP{ASN: 64512, Speaker: cluster.SpeakerTable})
	if ann == nil {
		t.Fatal("no announcer")
	}
	vip := netip.MustParseAddr("10.91.100.1")
	ann.SetGroups([]bgp.Group{{Name: "api", Check: "api", VIPs: []netip.Addr{vip}}})
	ann.SetHealth("api", true)
	for !slices.Contains(ann.Routes(), netip.PrefixFrom(vip, 32)) {
		if ctx.Err() != nil {
			t.Fatal("never announced")
		}
		time.Sleep(5 * time.Millisecond)
	}
	plan := lb.Plan{NodeIPs: []netip.Addr{netip.MustParseAddr("10.0.1.2")}, Groups: []lb.HeldGroup{
		{Name: "api", VIPs: []netip.Addr{vip}, Peers: []netip.Addr{netip.MustParseAddr("10.0.3.2"), netip.MustParseAddr("10.0.2.2"), netip.MustParseAddr("fd00::2")}},
		{Name: "ingress", VIPs: []netip.Addr{netip.MustParseAddr("10.91.100.2"), vip}, Peers: []netip.Addr{netip.MustParseAddr("10.0.2.2")}},
	}}
	(&LBConfig{noRelay: true}).updateRelay(plan)
	(&LBConfig{}).updateRelay(plan)
	releaseAnnouncer()
	log := sp.String()
	want := "relay [] to [] from invalid IP; relay [10.91.100.1 10.91.100.2] to [10.0.2.2 10.0.3.2] from 10.0.1.2; leave [10.91.100.1] for 900ms; 64512 announce []; 64512 close; relay closed"
	if !strings.HasSuffix(log, want) {
		t.Errorf("log:\n%s\nwant it to end with\n%s", log, want)
	}
}
