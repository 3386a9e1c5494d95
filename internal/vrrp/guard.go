package vrrp

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Guard decides whether this node may claim its VRRP instances, from the
// adverts a Listener sees: not before it has listened for Window (an
// existing master advertises at least every few seconds), and not while
// another router uses our IDs for other addresses. Observations older than
// Expiry are forgotten, so a conflict clears once the other router is gone.
type Guard struct {
	Window time.Duration
	Expiry time.Duration

	mu       sync.Mutex
	started  time.Time
	ours     []Instance
	self     []netip.Addr
	peers    []netip.Addr
	lastSeen map[obsKey]seen
}

type obsKey struct {
	src  netip.Addr
	vrid uint8
}

type seen struct {
	at  time.Time
	obs Observation
}

// ErrListening is the verdict until the listening window has passed.
var ErrListening = errors.New("still listening for other vrrp routers")

// Bounds on memory on a link full of VRRP routers (or of forged adverts):
// at most maxTracked adverts of at most maxGuardAddrs addresses each. A
// flood of spoofed sources fills it (4,096 cost ~2 MiB of heap, and twice
// that in RSS with the collector's headroom); a real clash is one router,
// or a few.
const (
	maxTracked    = 1024
	maxGuardAddrs = 16
)

// Start begins the listening window.
func (g *Guard) Start(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.started = now
	if g.lastSeen == nil {
		g.lastSeen = map[obsKey]seen{}
	}
}

// SetInstances tells the guard what we claim and who our peers are.
func (g *Guard) SetInstances(ours []Instance, self, peers []netip.Addr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ours, g.self, g.peers = ours, self, peers
}

// Observe records an advert; it is a Listener's Handle.
func (g *Guard) Observe(o Observation, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lastSeen == nil {
		g.lastSeen = map[obsKey]seen{}
	}
	if n := len(o.Advert.Addresses); n > maxGuardAddrs {
		// Whoever feeds the guard trims first (Trim keeps the cluster's
		// VIPs ahead of others); this cut only bounds what is kept.
		o.Omitted += n - maxGuardAddrs
		// A copy: the long list's array is not kept alive.
		o.Advert.Addresses = slices.Clone(o.Advert.Addresses[:maxGuardAddrs])
	}
	k := obsKey{o.Source, o.Advert.VRID}
	if _, ok := g.lastSeen[k]; !ok && len(g.lastSeen) >= maxTracked {
		g.expire(now)
		if len(g.lastSeen) >= maxTracked {
			return
		}
	}
	g.lastSeen[k] = seen{at: now, obs: o}
}

// Conflicts are the current clashes (see Detect).
func (g *Guard) Conflicts(now time.Time) []Conflict {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expire(now)
	obs := make([]Observation, 0, len(g.lastSeen))
	for _, s := range g.lastSeen {
		obs = append(obs, s.obs)
	}
	return Detect(g.ours, g.self, g.peers, obs)
}

// Verdict is nil when the instances may be claimed: the window has passed
// and no router uses our IDs for other addresses or advertises our VIPs
// under another ID. An unknown peer alone does not block (it is reported).
func (g *Guard) Verdict(now time.Time) error {
	g.mu.Lock()
	started := g.started
	g.mu.Unlock()
	if started.IsZero() || now.Sub(started) < g.Window {
		return ErrListening
	}
	for _, c := range g.Conflicts(now) {
		if c.Kind != UnknownPeer {
			return fmt.Errorf("vrrp conflict: %v", c)
		}
	}
	return nil
}

func (g *Guard) expire(now time.Time) {
	for k, s := range g.lastSeen {
		if now.Sub(s.at) > g.Expiry {
			delete(g.lastSeen, k)
		}
	}
}
