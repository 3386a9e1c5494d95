package bgp

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// DefaultDrain is how long a VIP stays held on the node after its route was
// withdrawn: the fabric needs the UPDATE and its FIB change (~70-130 ms in
// the lab) before no new connection arrives; 0 failed connections in 15
// lab rounds with 0.5 s.
const DefaultDrain = time.Second

// LeaveWait bounds how long a withdrawal waits for Leaving: the other
// nodes answer in well under a millisecond on a LAN.
const LeaveWait = 100 * time.Millisecond

// retryInterval paces retries of a failed announce or local change.
const retryInterval = 200 * time.Millisecond

// Announcer keeps a Speaker and the local VIPs in step with a State. Order
// is what keeps clients whole: a VIP is held locally before its route is
// announced, and its route is withdrawn a Drain before it is let go.
type Announcer struct {
	Speaker Speaker
	Local   LocalVIPs
	// Drain: 0 means DefaultDrain.
	Drain time.Duration
	Log   Logger
	// Announced, when set, is called with each new set of announced routes.
	Announced func(routes []netip.Prefix)
	// Leaving, when set, is told the announced VIPs about to be withdrawn
	// while the node still holds them for a drain (a graceful stop, a VIP
	// leaving the node), before the withdrawal, with how long they stay
	// held: the hand-over relay (ecmprelay) tells the other nodes to send
	// the packets of their open connections back here meanwhile. It must
	// return when its ctx ends (LeaveWait).
	Leaving func(ctx context.Context, vips []netip.Addr, held time.Duration)

	mu      sync.Mutex
	state   State
	routes  []netip.Prefix // announced by the last successful Announce
	applied bool           // routes is known (Announce succeeded once)
	// gen counts speaker changes: an Announce is committed to routes only
	// if the speaker it went to is still the one in use.
	gen uint64
	// retired are replaced speakers not closed yet: they are closed by the
	// goroutine that announces, so a close never runs beside an announce
	// to the same speaker (a late announce would put back what the close
	// withdrew, with nobody left to withdraw it).
	retired []Speaker
	held    []netip.Prefix
	leaving map[netip.Prefix]time.Time // withdrawn, held until then
	// withdrawn is when a route was last withdrawn (wall clock): a stop
	// soon after still holds the VIPs for the rest of the drain.
	withdrawn time.Time
	// stopping are the checks that fail because their daemon is stopping
	// on purpose (SetStopping): it still serves its open connections.
	stopping map[string]bool
	kick     chan struct{}
}

// NewAnnouncer returns an Announcer with nothing known yet: it announces
// nothing until groups and a verdict for their check are set.
func NewAnnouncer(s Speaker, l LocalVIPs, log Logger) *Announcer {
	return &Announcer{Speaker: s, Local: l, Log: log, leaving: map[netip.Prefix]time.Time{}, stopping: map[string]bool{},
		kick: make(chan struct{}, 1), state: State{Healthy: map[string]bool{}, Passed: map[string]bool{}}}
}

// SetGroups sets the groups this node may announce (each plan's).
func (a *Announcer) SetGroups(gs []Group) {
	a.mu.Lock()
	a.state.Groups = slices.Clone(gs)
	a.mu.Unlock()
	a.wake()
}

// SetServices sets the Services' groups this node may announce (from the
// Services' watch; plans do not carry them).
func (a *Announcer) SetServices(gs []Group) {
	a.mu.Lock()
	a.state.Services = slices.Clone(gs)
	a.mu.Unlock()
	a.wake()
}

// SetHealth records a check's verdict.
func (a *Announcer) SetHealth(check string, ok bool) {
	a.mu.Lock()
	a.state.Healthy[check] = ok
	if ok {
		a.state.Passed[check] = true
	}
	delete(a.stopping, check)
	a.mu.Unlock()
	a.wake()
}

// SetStopping records a failing verdict whose daemon still serves its open
// connections while it stops (haproxy's stopping file): the routes are
// withdrawn as for any failure, and Leaving is told first, so the other
// nodes send those connections' packets back here. A real failure is not
// told: its connections have nowhere to go, and a peer slow to answer would
// only delay the withdrawal.
func (a *Announcer) SetStopping(check string) {
	a.mu.Lock()
	a.state.Healthy[check] = false
	a.stopping[check] = true
	a.mu.Unlock()
	a.wake()
}

// State returns a copy of what the announcer works from.
func (a *Announcer) State() State {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.state
	s.Groups = slices.Clone(s.Groups)
	s.Services = slices.Clone(s.Services)
	s.Healthy = maps.Clone(s.Healthy)
	s.Passed = maps.Clone(s.Passed)
	return s
}

// Routes are the routes announced now.
func (a *Announcer) Routes() []netip.Prefix {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.routes)
}

func (a *Announcer) wake() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Run applies every change until ctx ends, then goes away gracefully:
// withdraw every route, wait the drain, let the VIPs go, close the
// sessions (within stop, which bounds the whole goodbye).
func (a *Announcer) Run(ctx context.Context, stop time.Duration) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			a.goodbye(stop)
			return
		case <-a.kick:
		case <-t.C:
		}
		next := a.apply(ctx, time.Now())
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		if next > 0 {
			t.Reset(next)
		}
	}
}

// apply brings the speaker and the local VIPs one step closer to the state;
// it returns when to look again (0: only on the next change).
func (a *Announcer) apply(ctx context.Context, now time.Time) time.Duration {
	a.mu.Lock()
	want, local := a.state.Routes(), a.state.Local()
	// A VIP leaving the node is withdrawn at once and let go a drain later.
	var tell []netip.Addr
	for _, p := range a.held {
		if !slices.Contains(local, p) {
			if _, ok := a.leaving[p]; !ok {
				a.leaving[p] = now.Add(a.drain())
				if slices.Contains(a.routes, p) {
					tell = append(tell, p.Addr())
				}
			}
		}
	}
	// Withdrawn because their daemon is stopping: still held and served.
	for _, g := range a.state.all() {
		if !a.stopping[g.Check] {
			continue
		}
		for _, v := range g.VIPs {
			p := Host(v)
			if slices.Contains(a.routes, p) && !slices.Contains(want, p) && slices.Contains(local, p) && !slices.Contains(tell, p.Addr()) {
				tell = append(tell, p.Addr())
			}
		}
	}
	var next time.Duration
	for p, until := range a.leaving {
		switch {
		case slices.Contains(local, p):
			delete(a.leaving, p) // wanted again
		case now.Before(until):
			local = append(local, p)
			next = minPositive(next, until.Sub(now))
		default:
			delete(a.leaving, p)
		}
	}
	local = sortPrefixes(local)
	have, applied, sp, gen, held := slices.Clone(a.routes), a.applied, a.Speaker, a.gen, a.held
	retired := a.retired
	a.retired = nil
	a.mu.Unlock()

	if len(retired) > 0 {
		// The routes were reset with the speaker change: what the old one
		// announced is gone with it, and the new one has announced nothing.
		closeAll(retired, a.Log)
		if a.Announced != nil {
			a.Announced(nil)
		}
	}
	// Not ctx: the stop that cancels it may come with the withdrawal it
	// tells of (kubelet's SIGTERM and haproxy's stopping file together),
	// and the peers must still hear of it and be heard (LeaveWait bounds it).
	a.tell(context.WithoutCancel(ctx), tell)
	var errs []error
	// Held before announced: the first packet the fabric sends is accepted.
	if !slices.Equal(local, held) {
		if err := a.Local.Hold(local); err != nil {
			errs = append(errs, err)
		} else {
			a.mu.Lock()
			a.held = local
			a.mu.Unlock()
		}
	}
	if !applied || !slices.Equal(want, have) {
		if err := sp.Announce(ctx, want); err != nil {
			errs = append(errs, err)
		} else if a.commit(gen, want) {
			add, del := diff(have, want)
			for _, p := range add {
				a.Log.Infof("announcing %s", p)
			}
			for _, p := range del {
				a.Log.Infof("withdrew %s", p)
			}
			if len(del) > 0 {
				a.mu.Lock()
				a.withdrawn = time.Now()
				a.mu.Unlock()
			}
			if a.Announced != nil {
				a.Announced(want)
			}
		}
		// Not committed: the speaker was replaced during the announce. The
		// new one has announced nothing; SetSpeaker's wake brings the next
		// apply, which gives it every route.
	}
	if err := errors.Join(errs...); err != nil {
		a.Log.Errorf("%v (retry in %s)", err, retryInterval)
		next = minPositive(next, retryInterval)
	}
	return next
}

// goodbye withdraws everything, waits the drain while the VIPs are still
// held, then lets them go and closes the sessions.
func (a *Announcer) goodbye(stop time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), stop)
	defer cancel()
	a.mu.Lock()
	a.state.Draining = true
	hadRoutes := len(a.routes) > 0
	stillHeld, withdrawn := len(a.held) > 0, a.withdrawn
	sp := a.Speaker
	retired := a.retired
	a.retired = nil
	a.mu.Unlock()
	closeAll(retired, a.Log)
	if hadRoutes {
		var tell []netip.Addr
		a.mu.Lock()
		for _, p := range a.routes {
			if slices.Contains(a.held, p) {
				tell = append(tell, p.Addr())
			}
		}
		a.mu.Unlock()
		a.tell(ctx, tell)
	}
	if err := sp.Announce(ctx, nil); err != nil {
		a.Log.Errorf("withdraw on stop: %v", err)
	} else if a.Announced != nil {
		a.Announced(nil)
	}
	var wait time.Duration
	switch ago := time.Since(withdrawn); {
	case hadRoutes:
		wait = a.drain()
		a.Log.Infof("withdrew every route; letting the VIPs go in %s", wait)
	case stillHeld && !withdrawn.IsZero() && ago < a.drain():
		// Withdrawn a moment before the stop (haproxy's stopping file is
		// seen with kubelet's SIGTERM): the fabric still sends new
		// connections here until its routes change, and the peers relay
		// the open ones for a drain after that withdrawal. Letting the
		// VIPs go at once dropped both (a SYN lost in the real-kubelet
		// BGP lab).
		wait = a.drain() - ago
		a.Log.Infof("routes withdrawn %s ago; letting the VIPs go in %s", ago.Round(time.Millisecond), wait.Round(time.Millisecond))
	}
	if wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
	if err := a.Local.Hold(nil); err != nil {
		a.Log.Errorf("letting the VIPs go: %v", err)
	}
	if err := sp.Close(ctx); err != nil {
		a.Log.Errorf("closing the speaker: %v", err)
	}
	a.mu.Lock()
	a.routes, a.held = nil, nil
	a.mu.Unlock()
}

// tell gives Leaving the VIPs about to be withdrawn, within LeaveWait.
func (a *Announcer) tell(ctx context.Context, vips []netip.Addr) {
	if a.Leaving == nil || len(vips) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, LeaveWait)
	defer cancel()
	a.Leaving(ctx, vips, a.drain())
}

func (a *Announcer) drain() time.Duration {
	if a.Drain > 0 {
		return a.Drain
	}
	return DefaultDrain
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// commit records want as announced if the speaker it was announced to is
// still the one in use (gen).
func (a *Announcer) commit(gen uint64, want []netip.Prefix) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gen != gen {
		return false
	}
	a.routes, a.applied = want, true
	return true
}

// SetSpeaker replaces the speaker (new BGP settings): the old one withdraws
// and closes, the new one is given every route, both at the next apply
// (Run's goroutine, so neither runs beside an announce in flight).
func (a *Announcer) SetSpeaker(s Speaker) {
	a.mu.Lock()
	a.retired = append(a.retired, a.Speaker)
	a.Speaker, a.routes, a.applied = s, nil, false
	a.gen++
	a.mu.Unlock()
	a.wake()
}

// closeAll closes replaced speakers (withdraw, then end the sessions).
func closeAll(sps []Speaker, log Logger) {
	for _, sp := range sps {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := sp.Close(ctx); err != nil {
			log.Warningf("closing the old speaker: %v", err)
		}
		cancel()
	}
}
