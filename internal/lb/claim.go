package lb

import (
	"bytes"
	"os"
	"sync"
	"time"

	"github.com/infradns/infradns/internal/cluster"
)

// ClaimDelay is how long a node that has just become able to hold a spread
// group waits before it may take a group it is not home to. Spread groups
// do not preempt (a node coming back must not move a VIP), so whoever
// claims a group first keeps it: without the wait, the first node of a
// starting cluster to pass its health check would take every group. The
// nodes of a starting cluster pass their first checks within a second or
// two of each other (lab: under 1.5 s); 5 s covers that with room, and
// bounds how long a group whose home node never comes stays unheld.
const ClaimDelay = 5 * time.Second

// ClaimGate is the Prober's Open for spread groups (several ingress VIPs
// over the same routers). It keeps the track file of a group this node is
// not home to at 1 (FAULT: the instance cannot take the VIP) until Delay has
// passed since the group was assigned here and since the check last became
// healthy; a home group opens as soon as the check passes. A spread group
// the latest plan does not assign here stays closed, so that when it is
// assigned its instance appears closed. Groups that are not spread are
// never held: their files follow the check alone.
//
// Before the first plan nothing is known: files are left as they are while
// the check passes (a restarted CoreDNS must not drop the VIPs its
// keepalived holds), and a group whose file already says 0 when the first
// plan comes is not held either.
type ClaimGate struct {
	Delay time.Duration
	// Read reads a track file (nil: os.ReadFile).
	Read func(string) ([]byte, error)

	spread map[string]bool // track file paths of the spread groups

	mu      sync.Mutex
	planned bool
	files   map[string]claim // spread groups assigned here, by path
}

type claim struct {
	hold  bool
	since time.Time
}

// NewClaimGate returns the gate for a model's groups.
func NewClaimGate(m *cluster.Model, delay time.Duration) *ClaimGate {
	g := &ClaimGate{Delay: delay, spread: map[string]bool{}}
	count := map[cluster.Holders]int{}
	for _, gr := range m.Groups() {
		count[gr.Holders]++
	}
	for _, gr := range m.Groups() {
		if count[gr.Holders] > 1 {
			g.spread[TrackPath(m, gr.Name)] = true
		}
	}
	return g
}

// Update takes the track files of a new plan. A group assigned here in an
// earlier plan keeps its start time, and once open stays open while it
// stays assigned (a new router that takes the home rank later does not
// close it: a claim then is a failover).
func (g *ClaimGate) Update(p Plan, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	next := map[string]claim{}
	for _, t := range p.TrackFiles {
		if !g.spread[t.Path] {
			continue
		}
		c := claim{hold: t.Hold, since: now}
		if old, ok := g.files[t.Path]; ok {
			c.since, c.hold = old.since, old.hold && t.Hold
		} else if !g.planned && g.open(t.Path) {
			c.hold = false // claimable before we came: keep it so
		}
		next[t.Path] = c
	}
	g.files, g.planned = next, true
}

func (g *ClaimGate) open(path string) bool {
	read := g.Read
	if read == nil {
		read = os.ReadFile
	}
	b, err := read(path)
	return err == nil && bytes.Equal(bytes.TrimSpace(b), []byte("0"))
}

// Open says whether a healthy check opens path's group; known is false
// while nothing is known about it (leave the file as it is).
func (g *ClaimGate) Open(path string, healthySince, now time.Time) (open, known bool) {
	if !g.spread[path] {
		return true, true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.planned {
		return false, false
	}
	c, ok := g.files[path]
	switch {
	case !ok:
		return false, true
	case !c.hold:
		return true, true
	}
	start := c.since
	if healthySince.After(start) {
		start = healthySince
	}
	return now.Sub(start) >= g.Delay, true
}
