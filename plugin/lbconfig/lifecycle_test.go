package lbconfig

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"

	"github.com/infradns/infradns/internal/bgp"
	"github.com/infradns/infradns/internal/cluster"
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
func TestFollowAnnouncerStale(t *testing.T) {
	sp := &fakeSpeakers{}
	speakerFor = func(cfg cluster.BGP) (bgp.Speaker, error) {
		sp.add(fmt.Sprintf("%d new", cfg.ASN))
		return fakeSpeaker{f: sp, asn: cfg.ASN}, nil
	}
	localVIPs = noLocal{}
	t.Cleanup(func() { speakerFor, localVIPs = newSpeaker, bgp.LocalVIPs(bgp.LocalRoutes{}) })
	gens.Lock()
	gens.last += 10
	g := gens.last
	gens.Unlock()

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
