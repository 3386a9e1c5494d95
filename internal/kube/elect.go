package kube

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Elector elects one leader among the processes sharing a Lease.
//
// It is client-go's tools/leaderelection over LeaseClient: that package
// wants a typed clientset, and importing one costs every process 8.8 MiB
// (see Client). As there, a candidate judges a holder's Lease expired by
// when it last saw the Lease change, on its own clock, never by comparing
// the renewTime the holder wrote to its own clock: nodes' clocks may
// disagree by more than a lease's duration, only their rates need agree.
// Every write carries the resourceVersion read, so of two candidates
// writing the same Lease the API server lets one win.
//
// The guarantee is the Lease's: a leader stops leading (its lead's context
// is cancelled) RenewDeadline after its last renewal began, before any peer
// may take over, Duration after seeing that renewal. Work lead does after its
// context is cancelled is not covered.
type Elector struct {
	Leases                    LeaseClient
	Namespace, Name, Identity string
	Duration                  time.Duration // lease duration written; default 15s
	RenewDeadline             time.Duration // a leader that has not renewed for this long stops leading; default 10s; must be < Duration
	Retry                     time.Duration // period of acquire attempts and renewals; default 2s
	Timeout                   time.Duration // bound on one API request; default Retry
	// OnHolder, when set, is called with the holder identity each time the
	// observed holder changes ("" when none). It runs on Run's goroutine,
	// in order: while it runs nothing is renewed, so it must not block.
	OnHolder func(holder string)
	// OnError, when set, hears each request on the Lease that failed for
	// another reason than a lost race (a conflict, a Lease already
	// created): the API unreachable, a 403. It runs on Run's goroutine
	// too: it must not block.
	OnError func(err error)

	leading atomic.Bool
}

const (
	defaultLeaseDuration = 15 * time.Second
	defaultRenewDeadline = 10 * time.Second
	defaultRetry         = 2 * time.Second
)

// Run campaigns until ctx ends. While this process leads, lead runs with a
// context that is cancelled when leadership is lost or ctx ends; Run waits
// for lead to return before trying to lead again, and on ctx end releases
// the Lease (holderIdentity cleared, so a peer takes over at its next
// attempt instead of after Duration) only after lead returned. Run returns
// when ctx ends.
//
// A lead that returns while its context is live ends the term as well: the
// Lease is released and this process campaigns again after a Retry, so a
// peer may take the work over.
//
// Run panics on an Elector it cannot run: no Leases, Name or Identity,
// RenewDeadline not below Duration, Retry not below RenewDeadline. One
// Elector runs one Run at a time.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context)) {
	c := e.campaign()
	led := false
	for {
		renewed, ok := c.acquire(ctx)
		if !ok {
			break
		}
		led = true
		if c.lead(ctx, lead, renewed) {
			c.release(ctx)
			if !sleep(ctx, jitter(c.retry)) {
				break
			}
		}
	}
	if led {
		c.release(ctx)
	}
}

// Leading reports whether this process leads now.
func (e *Elector) Leading() bool { return e.leading.Load() }

// campaign is one Run's state; only Run's goroutine touches it.
type campaign struct {
	e                                       *Elector
	duration, renewDeadline, retry, timeout time.Duration
	// observed is the Lease's record as last seen, and observedAt when it
	// was first seen so: the clock expiry is judged by.
	observed   leaseRecord
	observedAt time.Time
	reported   string
	// held is the Lease as this process last wrote it, whose
	// resourceVersion a renewal writes against.
	held *coordinationv1.Lease
}

// leaseRecord is what of a Lease changes when its holder renews it or another
// takes it over. The resourceVersion catches a renewal whose renewTime
// the holder's clock made equal to the last one.
type leaseRecord struct {
	holder, resourceVersion string
	renew                   time.Time
}

func (r leaseRecord) equal(o leaseRecord) bool {
	return r.holder == o.holder && r.resourceVersion == o.resourceVersion && r.renew.Equal(o.renew)
}

func (e *Elector) campaign() *campaign {
	c := &campaign{e: e, duration: e.Duration, renewDeadline: e.RenewDeadline, retry: e.Retry, timeout: e.Timeout}
	if c.duration <= 0 {
		c.duration = defaultLeaseDuration
	}
	if c.renewDeadline <= 0 {
		c.renewDeadline = defaultRenewDeadline
	}
	if c.retry <= 0 {
		c.retry = defaultRetry
	}
	if c.timeout <= 0 {
		c.timeout = c.retry
	}
	switch {
	case e.Leases == nil || e.Name == "" || e.Identity == "":
		panic(fmt.Sprintf("kube.Elector for lease %s/%s: Leases, Name and Identity are required", e.Namespace, e.Name))
	case c.renewDeadline >= c.duration:
		// A leader would still lead when its peers take the Lease over.
		panic(fmt.Sprintf("kube.Elector for lease %s/%s: RenewDeadline %v is not below Duration %v", e.Namespace, e.Name, c.renewDeadline, c.duration))
	case c.retry >= c.renewDeadline:
		// Every term would end before its first renewal.
		panic(fmt.Sprintf("kube.Elector for lease %s/%s: Retry %v is not below RenewDeadline %v", e.Namespace, e.Name, c.retry, c.renewDeadline))
	}
	return c
}

// acquire tries to take the Lease every Retry, jittered so that candidates
// started together do not keep colliding, until it does or ctx ends. It
// returns when the successful attempt began: the start of the term.
func (c *campaign) acquire(ctx context.Context) (time.Time, bool) {
	for ctx.Err() == nil {
		start := time.Now()
		if c.take(ctx) {
			return start, true
		}
		if !sleep(ctx, jitter(c.retry)) {
			break
		}
	}
	return time.Time{}, false
}

// lead runs lead while renewals keep the Lease, and returns once lead has:
// true if lead returned of itself while this process still led.
func (c *campaign) lead(ctx context.Context, lead func(context.Context), renewed time.Time) bool {
	leadCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	c.e.leading.Store(true)
	go func() {
		defer close(done)
		lead(leadCtx)
	}()
	returned := c.keep(ctx, renewed, done)
	// Leading is false by the time lead can see its context end.
	c.e.leading.Store(false)
	stop()
	<-done
	return returned
}

// keep renews the Lease every Retry until ctx ends, another holds the Lease,
// no renewal has succeeded for RenewDeadline since renewed, or done closes
// (which it reports).
func (c *campaign) keep(ctx context.Context, renewed time.Time, done <-chan struct{}) bool {
	deadline := renewed.Add(c.renewDeadline)
	lost := time.NewTimer(time.Until(deadline))
	defer lost.Stop()
	tick := time.NewTicker(c.retry)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-done:
			return true
		case <-lost.C:
			return false
		case <-tick.C:
		}
		start := time.Now()
		if !start.Before(deadline) {
			return false
		}
		// A renewal still in flight at the deadline must not extend the
		// term: the peers may already count from the last one seen.
		rctx, cancel := context.WithDeadline(ctx, deadline)
		ok := c.renew(rctx, start)
		cancel()
		if ok {
			deadline = start.Add(c.renewDeadline)
			lost.Reset(time.Until(deadline))
		} else if c.observed.holder != c.e.Identity {
			return false
		}
	}
}

// renew writes a new renewTime against the Lease as last written, which
// costs one request while nobody else writes the Lease; when that fails it
// reads the Lease and takes it again if it may.
func (c *campaign) renew(ctx context.Context, now time.Time) bool {
	l := c.held.DeepCopy()
	t := metav1.NewMicroTime(now)
	l.Spec.RenewTime = &t
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	out, err := c.e.Leases.Update(rctx, l, metav1.UpdateOptions{})
	cancel()
	if err == nil {
		c.held = out
		c.observe(out, time.Now())
		return true
	}
	c.failed("renew", err)
	return c.take(ctx)
}

// take reads the Lease and, if mayHold allows, writes this process as its
// holder.
func (c *campaign) take(ctx context.Context) bool {
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	l, err := c.e.Leases.Get(rctx, c.e.Name, metav1.GetOptions{})
	cancel()
	now := time.Now()
	switch {
	case apierrors.IsNotFound(err):
		l = nil
	case err != nil:
		c.failed("read", err)
		return false
	}
	c.observe(l, now)
	if !mayHold(l, c.e.Identity, c.observedAt, now, c.duration) {
		return false
	}
	want := claim(l, c.e.Namespace, c.e.Name, c.e.Identity, now, c.duration)
	rctx, cancel = context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var out *coordinationv1.Lease
	if l == nil {
		out, err = c.e.Leases.Create(rctx, want, metav1.CreateOptions{})
	} else {
		out, err = c.e.Leases.Update(rctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		c.failed("take", err)
		return false
	}
	c.held = out
	c.observe(out, time.Now())
	return true
}

// failed reports a failed request on the Lease, unless it lost a race to a
// peer's write: that is the election working.
func (c *campaign) failed(what string, err error) {
	if c.e.OnError == nil || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return
	}
	c.e.OnError(fmt.Errorf("%s Lease %s/%s: %w", what, c.e.Namespace, c.e.Name, err))
}

// release clears the holder of a Lease that still names this process, so
// that a peer need not wait Duration for it. ctx has usually ended: the
// requests are bounded by Timeout alone.
func (c *campaign) release(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	// A conflict is a write between our read and our write (a renewal the
	// API server completed after its caller gave up on it): read again.
	for range 3 {
		rctx, cancel := context.WithTimeout(ctx, c.timeout)
		l, err := c.e.Leases.Get(rctx, c.e.Name, metav1.GetOptions{})
		cancel()
		if err != nil {
			c.failed("release", err)
			return
		}
		if holderOf(l) != c.e.Identity {
			return
		}
		now := metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity = nil
		l.Spec.AcquireTime = nil
		l.Spec.RenewTime = &now
		rctx, cancel = context.WithTimeout(ctx, c.timeout)
		out, err := c.e.Leases.Update(rctx, l, metav1.UpdateOptions{})
		cancel()
		if err == nil {
			c.held = nil
			c.observe(out, time.Now())
			return
		}
		if !apierrors.IsConflict(err) {
			c.failed("release", err)
			return
		}
	}
}

// observe notes l (nil: there is none) as read at now, and reports a new
// holder.
func (c *campaign) observe(l *coordinationv1.Lease, now time.Time) {
	var r leaseRecord
	if l != nil {
		r = leaseRecord{holder: holderOf(l), resourceVersion: l.ResourceVersion}
		if l.Spec.RenewTime != nil {
			r.renew = l.Spec.RenewTime.Time
		}
	}
	if !r.equal(c.observed) || c.observedAt.IsZero() {
		c.observed, c.observedAt = r, now
	}
	if r.holder != c.reported {
		c.reported = r.holder
		if c.e.OnHolder != nil {
			c.e.OnHolder(r.holder)
		}
	}
}

// mayHold reports whether identity may write itself as the holder of l,
// read at now (nil: there is no Lease), whose record this process first saw
// as it is at observed. Only another's Lease that has not expired by this
// process's own observation is refused; duration is this process's lease
// duration.
func mayHold(l *coordinationv1.Lease, identity string, observed, now time.Time, duration time.Duration) bool {
	if l == nil {
		return true
	}
	if h := holderOf(l); h == "" || h == identity {
		return true
	}
	return !now.Before(observed.Add(holdFor(l, duration)))
}

// holdFor is how long l holds unchanged: the longer of its own duration and
// ours, so that a peer configured with a longer one is not cut short.
func holdFor(l *coordinationv1.Lease, duration time.Duration) time.Duration {
	if l.Spec.LeaseDurationSeconds != nil {
		duration = max(duration, time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second)
	}
	return duration
}

// claim returns l (nil: a new Lease) naming identity as its holder, renewed
// at now. A holder taking its own Lease again (a restart) keeps its acquire
// time and does not count a transition.
func claim(l *coordinationv1.Lease, namespace, name, identity string, now time.Time, duration time.Duration) *coordinationv1.Lease {
	existing := l != nil
	if existing {
		l = l.DeepCopy()
	} else {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	}
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[LabelManagedBy] = ManagedByLBConfig
	t := metav1.NewMicroTime(now)
	// The field is whole seconds and the API refuses 0; rounding up never
	// shortens what peers wait.
	secs := int32(max(1, (duration+time.Second-1)/time.Second))
	spec := &l.Spec
	if holderOf(l) != identity {
		if existing {
			transitions := int32(1)
			if spec.LeaseTransitions != nil {
				transitions = *spec.LeaseTransitions + 1
			}
			spec.LeaseTransitions = &transitions
		}
		spec.AcquireTime = &t
	} else if spec.AcquireTime == nil {
		spec.AcquireTime = &t
	}
	spec.HolderIdentity = &identity
	spec.LeaseDurationSeconds = &secs
	spec.RenewTime = &t
	return l
}

func holderOf(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// jitter spreads d over [d, 1.2 d).
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(0.2*rand.Float64()*float64(d))
}

// sleep waits d and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
