package vrrp

import "time"

// Boosted priorities. keepalived adds the boost file's value to the
// instance's priority (track file weight 1) and limits the sum to 254; both
// outrank every base priority (RankPriority: at most 250). A holder is at
// FreshPriority for DefaultBoostFresh after its takeover and for as long
// as a peer may be paused, at SettledPriority after that until the boost
// ends, so a holder that took over from a boosted holder while it was
// paused outranks it: equal priorities are settled by address, not by who
// took over last (the nemesis test paused holders soon after their own
// takeover, and two of three took the VIP back).
const (
	FreshPriority   = 254
	SettledPriority = 253
)

// BoostValue is the boost file's value that brings an instance of priority
// base to the level's priority (0 when not boosted).
func BoostValue(level BoostLevel, base int) int {
	switch level {
	case BoostFresh:
		return FreshPriority - base
	case BoostSettled:
		return SettledPriority - base
	}
	return 0
}

// BoostLevel is how far a holder's priority is raised.
type BoostLevel int

const (
	BoostNone BoostLevel = iota
	BoostSettled
	BoostFresh
)

// Default boost timings. BoostMin gives a probe of the peers time to answer
// (250 ms at most); BoostQuiet is many advert intervals without another
// router advertising the group.
const (
	DefaultBoostMin   = 500 * time.Millisecond
	DefaultBoostQuiet = time.Second
	// DefaultBoostFresh is as short as it can be: only a pause that begins
	// within it, longer than the master-down interval, meets an equal
	// priority.
	DefaultBoostFresh = 200 * time.Millisecond
)

// HolderBoost decides when the holder of a VIP group raises its VRRP
// priority above every base priority.
//
// keepalived's nopreempt governs a BACKUP only. A holder that is paused (a
// VM stun, SIGSTOP, a starved VRRP process) never leaves MASTER; when it
// resumes it advertises its old priority, the highest of the group's, and
// the node that took over meanwhile yields to it: a second move, with two
// holders until the resumed node's first advert (issue 28 measured 2 moves
// per pause of the priority-250 node in every round). The node that took
// over is boosted instead, so the resumed one yields: the VIP stays where it
// moved, one move per pause.
//
// The boost ends once nothing is left to come back: held for Min, no other
// router advertising the group's VIPs for Quiet, and no peer paused (its
// kernel accepts connections, its service never answers). A boost kept for
// good would make two boosted holders meet when a boosted holder is paused
// in turn, and keepalived settles equal priorities by address, not by who
// took over last.
//
// Only a takeover from a silent holder is boosted: one after the group's
// other routers sent nothing for Silence. A backup that takes over for one
// advert interval on a priority-0 advert while the real holder still
// advertises (a split brain's resigning node, heard by a third node) must
// yield to it at once, as it did before the boost.
type HolderBoost struct {
	Min, Quiet, Fresh time.Duration // 0: the defaults
	// Silence: 0 boosts every takeover. lbconfig sets two advert
	// intervals: a holder's adverts are that close together, and a
	// backup's master-down interval is more than three.
	Silence time.Duration

	held, on, fresh bool
	since           time.Time
}

// BoostInput is what one look at a group saw.
type BoostInput struct {
	// Held: one of the group's VIPs is on our interface.
	Held bool
	// HeardSince says whether another router advertised one of the group's
	// VIPs (priority above 0) after t.
	HeardSince func(t time.Time) bool
	// PeerPaused says whether a peer of the group may be paused: a probe
	// begun since the takeover found it Dead, or none has answered yet.
	PeerPaused func() bool
}

// Step takes one look and says whether the group is boosted now.
func (b *HolderBoost) Step(in BoostInput, now time.Time) bool {
	minHeld, quiet, fresh := b.Min, b.Quiet, b.Fresh
	if minHeld <= 0 {
		minHeld = DefaultBoostMin
	}
	if quiet <= 0 {
		quiet = DefaultBoostQuiet
	}
	if fresh <= 0 {
		fresh = DefaultBoostFresh
	}
	switch {
	case !in.Held:
		b.held, b.on, b.fresh = false, false, false
		return false
	case !b.held:
		// Taken over (or held when we started: a restarted lbconfig cannot
		// tell, and a boost for Min costs nothing).
		b.held, b.since = true, now
		b.on = b.Silence <= 0 || in.HeardSince == nil || !in.HeardSince(now.Add(-b.Silence))
	}
	if !b.on {
		b.fresh = false
		return false
	}
	paused := in.PeerPaused != nil && in.PeerPaused()
	heard := in.HeardSince != nil && in.HeardSince(now.Add(-quiet))
	if now.Sub(b.since) >= minHeld && !heard && !paused {
		b.on, b.fresh = false, false
		return false
	}
	// Above any holder boosted before us for as long as one may be paused.
	b.fresh = now.Sub(b.since) < fresh || paused
	return true
}

// On says whether the group is boosted.
func (b *HolderBoost) On() bool { return b.on }

// Level is the boost's level after the last Step: fresh for Fresh after the
// takeover and while a peer may be paused, settled after that until it
// ends.
func (b *HolderBoost) Level() BoostLevel {
	switch {
	case !b.on:
		return BoostNone
	case b.fresh:
		return BoostFresh
	}
	return BoostSettled
}

// Since is when the boost began (the takeover).
func (b *HolderBoost) Since() time.Time { return b.since }
