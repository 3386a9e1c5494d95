package lbconfig

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/vrrp"
)

// TestProbeLive: a paused node's kernel completes the handshake and nobody
// answers (Dead); a serving one answers (Live); one with nothing listening
// says nothing about a keeper (Live, the rule as before).
func TestProbeLive(t *testing.T) {
	listen := func(t *testing.T, answer bool, after time.Duration) string {
		t.Helper()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		if answer {
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					time.Sleep(after)
					_, _ = c.Write([]byte("HTTP/1.0 503 Service Unavailable\r\n\r\n"))
					c.Close()
				}
			}()
		}
		// Not answering: never accepted, as a stopped process's listener;
		// the kernel completes the handshake all the same.
		return l.Addr().String()
	}
	closed := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a := l.Addr().String()
		l.Close()
		return a
	}
	tests := []struct {
		name string
		addr func(*testing.T) string
		want vrrp.Liveness
	}{
		{"answers (even 503)", func(t *testing.T) string { return listen(t, true, 0) }, vrrp.Live},
		{"answers a little late", func(t *testing.T) string { return listen(t, true, liveSlow/4) }, vrrp.Live},
		// A node resuming from a pause answers the probe that waited for it:
		// it was not serving until then.
		{"answers after a stall", func(t *testing.T) string { return listen(t, true, liveSlow+50*time.Millisecond) }, vrrp.Dead},
		{"accepts, never answers", func(t *testing.T) string { return listen(t, false, 0) }, vrrp.Dead},
		{"nothing listening", closed, vrrp.Live},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := probeLive(context.Background(), tc.addr(t), "/haproxy_ready"); got != tc.want {
				t.Errorf("probeLive = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPeerEndpoint(t *testing.T) {
	peer := netip.MustParseAddr("198.51.100.12")
	tests := []struct {
		url, hostport, path string
		ok                  bool
	}{
		{"http://127.0.0.1:9454/haproxy_ready", "198.51.100.12:9454", "/haproxy_ready", true},
		{"http://localhost/healthz?x=1", "198.51.100.12:80", "/healthz?x=1", true},
		{"https://127.0.0.1:1936/healthz", "", "", false},
		{"none", "", "", false},
	}
	for _, tc := range tests {
		hp, path, ok := peerEndpoint(tc.url, peer)
		if hp != tc.hostport || path != tc.path || ok != tc.ok {
			t.Errorf("peerEndpoint(%q) = %q %q %v, want %q %q %v", tc.url, hp, path, ok, tc.hostport, tc.path, tc.ok)
		}
	}
	if hp, _, _ := peerEndpoint("http://127.0.0.1:9454/", netip.MustParseAddr("2001:db8::12")); hp != "[2001:db8::12]:9454" {
		t.Errorf("IPv6 peer: %q", hp)
	}
}

// TestLivenessAsync: the first ask starts a probe and says LiveUnknown; the
// answer stands for liveFresh.
func TestLivenessAsync(t *testing.T) {
	calls := make(chan struct{}, 10)
	l := newLiveness()
	l.probe = func(context.Context, string, string) vrrp.Liveness { calls <- struct{}{}; return vrrp.Dead }
	peer := netip.MustParseAddr("198.51.100.12")
	const u = "http://127.0.0.1:9454/haproxy_ready"
	now := time.Now()
	if got := l.get(context.Background(), u, peer, now); got != vrrp.LiveUnknown {
		t.Fatalf("first get = %v, want LiveUnknown", got)
	}
	<-calls
	deadline := time.Now().Add(5 * time.Second)
	for l.get(context.Background(), u, peer, now) != vrrp.Dead {
		if time.Now().After(deadline) {
			t.Fatal("the probe's answer never came")
		}
		time.Sleep(time.Millisecond)
	}
	if len(calls) != 0 {
		t.Errorf("%d more probes within liveFresh", len(calls))
	}
	if got := l.get(context.Background(), "none", peer, now); got != vrrp.Live {
		t.Errorf("no endpoint: %v, want Live", got)
	}
}

// TestLivenessAfter: an answer from a probe begun before `since` does not
// count (LiveUnknown), and a new probe is started at once for it.
func TestLivenessAfter(t *testing.T) {
	var dead atomic.Bool
	l := newLiveness()
	l.probe = func(context.Context, string, string) vrrp.Liveness {
		if dead.Load() {
			return vrrp.Dead
		}
		return vrrp.Live
	}
	peer := netip.MustParseAddr("198.51.100.12")
	const u = "http://127.0.0.1:9454/haproxy_ready"
	ctx := context.Background()
	t0 := time.Now()
	wait := func(now, since time.Time, want vrrp.Liveness) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for l.after(ctx, u, peer, now, since) != want {
			if time.Now().After(deadline) {
				t.Fatalf("never %v", want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	wait(t0, time.Time{}, vrrp.Live)
	// The peer stops 100 ms later: within liveFresh, get still says Live
	// from the old probe; after() the stop does not.
	dead.Store(true)
	t1 := t0.Add(100 * time.Millisecond)
	if got := l.get(ctx, u, peer, t1); got != vrrp.Live {
		t.Fatalf("get within liveFresh = %v, want the old Live", got)
	}
	if got := l.after(ctx, u, peer, t1, t1); got != vrrp.LiveUnknown && got != vrrp.Dead {
		t.Fatalf("after(t1) = %v, want LiveUnknown (or Dead once the new probe answered)", got)
	}
	wait(t1, t1, vrrp.Dead)

	// get: an answer older than liveFresh is not given while the next
	// probe runs (a Live from before a pause made a backup step down).
	dead.Store(false)
	t2 := t1.Add(2 * time.Second)
	wait(t2, t2, vrrp.Live)
	dead.Store(true)
	if got := l.get(ctx, u, peer, t2.Add(1500*time.Millisecond)); got == vrrp.Live {
		t.Fatalf("get 1.5 s after the last probe = Live, want LiveUnknown until the new probe answers")
	}
}
