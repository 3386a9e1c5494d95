package lbconfig

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/vrrp"
)

// TestHolderBoostLook runs the boost's looks against a real interface (lo,
// which holds 127.0.0.1) and its file, with the peer's liveness answered by
// a stand-in probe: a held group is boosted at once and stays boosted while
// its peer is paused, and the paused peer's apiserver is taken out of
// haproxy once (the API group's takeover); once the peer serves again the
// boost ends; a group whose VIP is not here is never boosted.
func TestHolderBoostLook(t *testing.T) {
	dir := t.TempDir()
	var peerDead atomic.Bool
	peerDead.Store(true)
	live := newLiveness()
	live.probe = func(context.Context, string, string) vrrp.Liveness {
		if peerDead.Load() {
			return vrrp.Dead
		}
		return vrrp.Live
	}
	peer := netip.MustParseAddr("198.51.100.12")
	const health = "http://127.0.0.1:9454/haproxy_ready"
	sent := make(chan string, 10)
	hb := &holderBoost{iface: "lo", live: live, wake: make(chan struct{}, 1),
		frozen: &frozenBackends{worker: func(_ context.Context, cmd string) error {
			sent <- cmd
			return nil
		}, done: map[netip.Addr]time.Time{}},
		haproxy: lb.HAProxy{Name: "c_api", Backends: []lb.Backend{
			{Name: "node1_v4", Address: "198.51.100.11:6443"},
			{Name: "node2_v4", Address: "198.51.100.12:6443"},
		}},
	}
	held := boostGroup{splitGroup{name: "api", path: filepath.Join(dir, "api.boost"), health: health,
		vips: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, peers: []netip.Addr{peer}}, 250, true}
	other := boostGroup{splitGroup{name: "ingress", path: filepath.Join(dir, "ingress.boost"), health: health,
		vips: []netip.Addr{netip.MustParseAddr("192.0.2.77")}, peers: []netip.Addr{peer}}, 210, false}
	hb.groups = []boostGroup{held, other}

	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	ctx := context.Background()
	states := map[string]*vrrp.HolderBoost{}
	start := time.Now()
	// waitProbe lets the background probe of the peer answer at now.
	waitProbe := func(now time.Time, want vrrp.Liveness) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for live.get(ctx, health, peer, now) != want {
			if time.Now().After(deadline) {
				t.Fatalf("the peer's probe never said %v", want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	steps := []struct {
		at        time.Duration
		peerDead  bool
		api, ingr string
	}{
		{0, true, "4", "0"},                // fresh: 250 + 4 = 254
		{3 * time.Second, true, "4", "0"},  // still 254: past BoostMin, the peer paused
		{6 * time.Second, false, "0", "0"}, // it serves again, nobody advertises
		{10 * time.Second, true, "0", "0"}, // not boosted again while held
	}
	for i, s := range steps {
		now := start.Add(s.at)
		peerDead.Store(s.peerDead)
		waitProbe(now, map[bool]vrrp.Liveness{true: vrrp.Dead, false: vrrp.Live}[s.peerDead])
		hb.look(ctx, states, now)
		if got := read(held.path); got != s.api {
			t.Errorf("step %d (%v): held group's boost file %q, want %q", i, s.at, got, s.api)
		}
		if got := read(other.path); got != s.ingr {
			t.Errorf("step %d (%v): the other group's boost file %q, want %q", i, s.at, got, s.ingr)
		}
		if i == 0 {
			select {
			case cmd := <-sent:
				if want := "set server c_api/node2_v4 health down"; cmd != want {
					t.Errorf("step 0: haproxy was sent %q, want %q", cmd, want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("step 0: the paused peer's apiserver was not taken out of haproxy")
			}
		}
	}
	// One command per takeover: the peer was Dead again at step 1 and 3.
	time.Sleep(50 * time.Millisecond)
	if len(sent) != 0 {
		t.Errorf("%d more commands to haproxy after the first, want none in one takeover", len(sent))
	}
}
