package lbconfig

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/infradns/infradns/internal/vrrp"
)

// liveTimeout bounds a probe of a peer's health endpoint: a serving haproxy
// answers within milliseconds, and the split-brain rule waits Confirm
// (400 ms) before it acts.
const liveTimeout = 250 * time.Millisecond

// liveFresh is how long a probe's answer stands.
const liveFresh = time.Second

// liveSlow is how late an answer may come and still say the peer serves:
// a later one comes from a node that was paused while the probe waited and
// has just resumed (its keepalived still thinks it holds the VIP, and yields
// a moment later). Counted Live, it made a backup that had taken the VIP
// over step down for it (lab: 1 of 7 runs of TestVRRPPausedHolder, three
// moves for one pause).
const liveSlow = 120 * time.Millisecond

// probeLive asks a peer's health endpoint (http://host:port/path) whether
// the peer's processes run. Only a connection accepted and then left
// without an answer, or answered after liveSlow, says Dead: that is a
// paused node, whose kernel completes the handshake for a listener that
// nobody reads (until it resumes). A refused or unreachable one says
// nothing about a split-brain keeper (the endpoint may not listen there,
// unicast may be filtered): Live, the rule as before.
func probeLive(ctx context.Context, hostport, path string) vrrp.Liveness {
	d := net.Dialer{Timeout: liveTimeout}
	c, err := d.DialContext(ctx, "tcp", hostport)
	if err != nil {
		return vrrp.Live
	}
	defer c.Close()
	sent := time.Now()
	_ = c.SetDeadline(sent.Add(liveTimeout))
	if _, err := c.Write([]byte("GET " + path + " HTTP/1.0\r\nHost: " + hostport + "\r\n\r\n")); err != nil {
		return vrrp.Live
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return vrrp.Dead
	}
	if time.Since(sent) > liveSlow {
		return vrrp.Dead
	}
	return vrrp.Live
}

// liveness runs probes in the background and keeps their answers, so a
// split-brain check never waits on one.
type liveness struct {
	probe func(ctx context.Context, hostport, path string) vrrp.Liveness
	// answered, when set, is called after each probe's answer is kept.
	answered func()

	mu     sync.Mutex
	states map[string]*liveState
}

type liveState struct {
	val vrrp.Liveness
	at  time.Time
	// started is when the probe that said val began (the caller's clock).
	started time.Time
	running bool
}

func newLiveness() *liveness {
	return &liveness{probe: probeLive, states: map[string]*liveState{}}
}

// get returns what the last probe of peer's endpoint (healthURL with the
// peer as host) said if it began within liveFresh, else LiveUnknown, and
// starts a new probe when that answer is older. An older answer is not
// returned while the new probe runs: a Live from before a pause made a
// backup step down for the paused keeper (lab: a probe from the previous
// contest, 2 s before).
func (l *liveness) get(ctx context.Context, healthURL string, peer netip.Addr, now time.Time) vrrp.Liveness {
	return l.after(ctx, healthURL, peer, now, now.Add(-liveFresh))
}

// after is get counting only probes begun at or after since (LiveUnknown
// until one answers): an answer from before a peer stopped says nothing
// about it now.
func (l *liveness) after(ctx context.Context, healthURL string, peer netip.Addr, now, since time.Time) vrrp.Liveness {
	hostport, path, ok := peerEndpoint(healthURL, peer)
	if !ok {
		return vrrp.Live
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.states[hostport+path]
	if st == nil {
		st = &liveState{}
		l.states[hostport+path] = st
	}
	if !st.running && (now.Sub(st.at) >= liveFresh || st.started.Before(since)) {
		st.running = true
		go func() {
			v := l.probe(ctx, hostport, path)
			l.mu.Lock()
			st.val, st.at, st.started, st.running = v, time.Now(), now, false
			l.mu.Unlock()
			if l.answered != nil {
				l.answered()
			}
		}()
	}
	if st.started.Before(since) {
		return vrrp.LiveUnknown
	}
	return st.val
}

// peerEndpoint is healthURL's port and path on peer; false for an endpoint
// that cannot be asked that way (none, not plain http).
func peerEndpoint(healthURL string, peer netip.Addr) (hostport, path string, ok bool) {
	u, err := url.Parse(healthURL)
	if err != nil || u.Scheme != "http" || !peer.IsValid() {
		return "", "", false
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", "", false
	}
	path = u.RequestURI()
	return net.JoinHostPort(peer.Unmap().String(), port), path, true
}
