package mdns

import "time"

// Action is what a schedule asks its owner to send now.
type Action int

// Actions of the Announcer.
const (
	None Action = iota
	SendProbe
	SendAnnouncement
)

// Phase of a publisher's claim on its names.
type Phase int

// Phases of the Announcer.
const (
	Probing Phase = iota
	Announcing
	Announced
)

// RFC 6762 8.1 and 8.3 timings.
const (
	Probes           = 3
	ProbeInterval    = 250 * time.Millisecond
	Announcements    = 2
	AnnounceInterval = time.Second
	// ProbeDeferral is how long a host that lost a simultaneous-probe
	// tie-break waits before probing again (8.2).
	ProbeDeferral = time.Second
)

// Announcer is the probe → announce schedule of a publisher, as a pure state
// machine: Step says what to send at now, Next when to call Step again.
type Announcer struct {
	phase Phase
	sent  int
	next  time.Time
}

// NewAnnouncer starts probing after delay (RFC 6762 8.1 asks for a random
// 0–250 ms so that hosts powered on together do not probe in lock step).
func NewAnnouncer(now time.Time, delay time.Duration) *Announcer {
	return &Announcer{phase: Probing, next: now.Add(delay)}
}

// Phase returns the current phase.
func (a *Announcer) Phase() Phase { return a.phase }

// Next returns when Step has something to do, or the zero time when done.
func (a *Announcer) Next() time.Time { return a.next }

// Step returns what to send at now and advances the schedule.
func (a *Announcer) Step(now time.Time) Action {
	if a.next.IsZero() || now.Before(a.next) {
		return None
	}
	switch a.phase {
	case Probing:
		if a.sent < Probes {
			a.sent++
			a.next = now.Add(ProbeInterval)
			return SendProbe
		}
		// 250 ms after the last probe with no conflict, the names are ours.
		a.phase, a.sent = Announcing, 0
		fallthrough
	case Announcing:
		a.sent++
		if a.sent >= Announcements {
			a.phase, a.next = Announced, time.Time{}
		} else {
			a.next = now.Add(AnnounceInterval << (a.sent - 1))
		}
		return SendAnnouncement
	}
	return None
}

// Reprobe restarts probing after delay: a conflict renamed us, or we lost a
// tie-break.
func (a *Announcer) Reprobe(now time.Time, delay time.Duration) {
	a.phase, a.sent, a.next = Probing, 0, now.Add(delay)
}

// Reannounce announces again from now, without probing: the names are
// unchanged but their data (addresses) changed (RFC 6762 8.4).
func (a *Announcer) Reannounce(now time.Time) {
	if a.phase == Probing {
		return // the probes end in announcements anyway
	}
	a.phase, a.sent, a.next = Announcing, 0, now
}

// Query backoff of a resolver (RFC 6762 5.2): the first query after a short
// random delay, then 1 s, doubling up to an hour.
const (
	FirstQueryDelayMax = 120 * time.Millisecond
	FirstQueryInterval = time.Second
	MaxQueryInterval   = time.Hour
)

// Backoff is the continuous-query schedule of a resolver.
type Backoff struct {
	next     time.Time
	interval time.Duration
}

// NewBackoff starts the schedule: the first query at now+delay.
func NewBackoff(now time.Time, delay time.Duration) *Backoff {
	return &Backoff{next: now.Add(delay), interval: FirstQueryInterval}
}

// Next returns when the next query is due.
func (b *Backoff) Next() time.Time { return b.next }

// Step reports whether a query is due at now and schedules the one after.
func (b *Backoff) Step(now time.Time) bool {
	if now.Before(b.next) {
		return false
	}
	b.next = now.Add(b.interval)
	b.interval = min(2*b.interval, MaxQueryInterval)
	return true
}

// Reset starts over at now: the network changed under us.
func (b *Backoff) Reset(now time.Time) {
	b.next, b.interval = now, FirstQueryInterval
}

// PublishInterval and PublishBurst limit how often a Browser publishes a
// snapshot (Heard) while the cache keeps changing. Building one walks the
// whole cache, so a sender that changes it with every packet would otherwise
// make the resolver rebuild its answers hundreds of times a second. Real
// changes come alone or in short bursts (a node's new address and its goodbye
// for the old one, a join and a leave): up to PublishBurst of them are
// published at once; under a sustained flood, one per PublishInterval, so a
// legitimate change waits at most that long, well within the second a node's
// name has to resolve in.
const (
	PublishInterval = 250 * time.Millisecond
	PublishBurst    = 8
)

// Coalescer decides when changes are published: a token bucket of burst
// publications, refilled by one every interval; a change that finds the
// bucket empty waits for the next token, together with every change after
// it. The bucket is kept as time (one token is one interval), so it is exact.
// Pure: the caller passes the time and does the publishing.
type Coalescer struct {
	every   time.Duration
	max     time.Duration // burst tokens
	credit  time.Duration // tokens held
	at      time.Time     // when credit was last brought up to date
	pending bool          // a change not published yet
}

// NewCoalescer returns a Coalescer that publishes burst changes at once and
// then one per every.
func NewCoalescer(every time.Duration, burst int) *Coalescer {
	m := time.Duration(burst) * every
	return &Coalescer{every: every, max: m, credit: m}
}

// Changed records a change to publish.
func (c *Coalescer) Changed() { c.pending = true }

func (c *Coalescer) refill(now time.Time) {
	if !c.at.IsZero() {
		d := now.Sub(c.at)
		if d < 0 { // a clock that went back: count it as a full refill
			d = c.max
		}
		c.credit = min(c.max, c.credit+d)
	}
	c.at = now
}

// Publish reports whether a pending change is to be published at now, and if
// so counts it as published.
func (c *Coalescer) Publish(now time.Time) bool {
	if !c.pending {
		return false
	}
	c.refill(now)
	if c.credit < c.every {
		return false
	}
	c.credit -= c.every
	c.pending = false
	return true
}

// Next returns when a pending change is due, or the zero time when none is.
func (c *Coalescer) Next() time.Time {
	if !c.pending {
		return time.Time{}
	}
	return c.at.Add(max(0, c.every-c.credit))
}
