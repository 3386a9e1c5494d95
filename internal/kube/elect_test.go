package kube

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// This file is in package kube for mayHold and claim; it cannot import
// kubefake (which imports kube), so it takes the fake clientset's Leases
// directly, as kubefake.FromClientset does.

const (
	electNS    = "openshift-kni-infra"
	electLease = "ocp4-lbconfig-leader"
	// Bounds for what must happen, not targets: generous for -race on a
	// loaded machine.
	electWait = 5 * time.Second
)

func TestElectMayHold(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	const d = 600 * time.Millisecond
	lease := func(holder *string, renew time.Time, secs int32) *coordinationv1.Lease {
		r := metav1.NewMicroTime(renew)
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: holder, RenewTime: &r, LeaseDurationSeconds: &secs}}
	}
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name     string
		l        *coordinationv1.Lease
		observed time.Time
		want     bool
	}{
		{"no lease", nil, time.Time{}, true},
		{"own lease", lease(str("master-0"), now, 1), now, true},
		{"own lease long unrenewed", lease(str("master-0"), now.Add(-time.Hour), 1), now.Add(-time.Hour), true},
		{"other's fresh lease", lease(str("master-1"), now, 1), now.Add(-100 * time.Millisecond), false},
		// The holder's clock is an hour behind ours: its renewTime says
		// nothing, what counts is that we saw the Lease change just now.
		{"other's lease renewed on a slow clock", lease(str("master-1"), now.Add(-time.Hour), 1), now.Add(-100 * time.Millisecond), false},
		// The holder's clock is ahead: renewTime in our future, but the
		// Lease has not changed for longer than its duration.
		{"other's lease expired by observation", lease(str("master-1"), now.Add(time.Hour), 1), now.Add(-1100 * time.Millisecond), true},
		{"other's lease expired at the boundary", lease(str("master-1"), now, 1), now.Add(-time.Second), true},
		{"other's lease, our duration longer than its", lease(str("master-1"), now, 0), now.Add(-500 * time.Millisecond), false},
		{"other's lease, its duration longer than ours", lease(str("master-1"), now, 15), now.Add(-2 * time.Second), false},
		{"released lease (nil holder)", lease(nil, now, 1), now, true},
		{"released lease (empty holder)", lease(str(""), now, 1), now, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mayHold(tc.l, "master-0", tc.observed, now, d); got != tc.want {
				t.Errorf("mayHold = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestElectClaim(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Minute)
	lease := func(holder *string, transitions *int32) *coordinationv1.Lease {
		a := metav1.NewMicroTime(t0)
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: electNS, Name: electLease, ResourceVersion: "7", Labels: map[string]string{LabelCluster: "ocp4"}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: holder, AcquireTime: &a, RenewTime: &a, LeaseTransitions: transitions},
		}
	}
	str := func(s string) *string { return &s }
	n := func(i int32) *int32 { return &i }
	for _, tc := range []struct {
		name        string
		l           *coordinationv1.Lease
		acquired    time.Time
		transitions int32
	}{
		{"new lease", nil, now, 0},
		{"own lease", lease(str("master-0"), n(3)), t0, 3},
		{"other's lease", lease(str("master-1"), n(3)), now, 4},
		{"other's lease, no transitions yet", lease(str("master-1"), nil), now, 1},
		{"released lease", lease(nil, n(3)), now, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before *coordinationv1.Lease
			if tc.l != nil {
				before = tc.l.DeepCopy()
			}
			got := claim(tc.l, electNS, electLease, "master-0", now, 600*time.Millisecond)
			if tc.l != nil && !apiequality.Semantic.DeepEqual(tc.l, before) {
				t.Errorf("claim modified the Lease read")
			}
			s := got.Spec
			if got.Namespace != electNS || got.Name != electLease || holderOf(got) != "master-0" ||
				!s.RenewTime.Time.Equal(now) || !s.AcquireTime.Time.Equal(tc.acquired) ||
				*s.LeaseDurationSeconds != 1 || (s.LeaseTransitions == nil) != (tc.transitions == 0) ||
				(s.LeaseTransitions != nil && *s.LeaseTransitions != tc.transitions) {
				t.Errorf("claim = %s/%s %+v, want acquired %v, %d transitions, 1 s", got.Namespace, got.Name, s, tc.acquired, tc.transitions)
			}
			if got.Labels[LabelManagedBy] != ManagedByLBConfig || (tc.l != nil && got.Labels[LabelCluster] != "ocp4") {
				t.Errorf("labels %v", got.Labels)
			}
			if tc.l != nil && got.ResourceVersion != "7" {
				t.Errorf("resourceVersion %q, want the one read (7): the write must conflict with another's", got.ResourceVersion)
			}
		})
	}
}

// apiLeases is a fake clientset's Leases that, like the API server, gives
// each write a new resourceVersion and refuses an Update carrying a stale
// one. The fake alone accepts any Update: two candidates would both win.
// Reactions run under the fake's lock, so the check and the write are one.
func apiLeases(t *testing.T) LeaseClient {
	t.Helper()
	cs := fake.NewClientset()
	gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
	var rv int
	write := func(a k8stesting.Action, update bool) (bool, runtime.Object, error) {
		l := a.(interface{ GetObject() runtime.Object }).GetObject().(*coordinationv1.Lease).DeepCopy()
		ns := a.GetNamespace()
		var err error
		if update {
			var cur runtime.Object
			if cur, err = cs.Tracker().Get(gvr, ns, l.Name); err != nil {
				return true, nil, err
			}
			if cur.(*coordinationv1.Lease).ResourceVersion != l.ResourceVersion {
				return true, nil, apierrors.NewConflict(gvr.GroupResource(), l.Name, errors.New("the object has been modified"))
			}
		}
		rv++
		l.ResourceVersion = strconv.Itoa(rv)
		if update {
			err = cs.Tracker().Update(gvr, l, ns)
		} else {
			err = cs.Tracker().Create(gvr, l, ns)
		}
		if err != nil {
			return true, nil, err
		}
		out, err := cs.Tracker().Get(gvr, ns, l.Name)
		return true, out, err
	}
	cs.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) { return write(a, false) })
	cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) { return write(a, true) })
	return cs.CoordinationV1().Leases(electNS)
}

func testElector(leases LeaseClient, id string) *Elector {
	return &Elector{Leases: leases, Namespace: electNS, Name: electLease, Identity: id,
		Duration: 600 * time.Millisecond, RenewDeadline: 400 * time.Millisecond, Retry: 50 * time.Millisecond}
}

// until polls cond until it holds or d passes.
func until(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

func holderNow(t *testing.T, leases LeaseClient) string {
	t.Helper()
	h, err := holderRead(leases)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func holderRead(leases LeaseClient) (string, error) {
	l, err := leases.Get(context.Background(), electLease, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return holderOf(l), nil
}

// terms counts the leads running across the Electors of a test: more than
// one at once is two leaders.
type terms struct {
	active, started, overlaps atomic.Int32
}

func (tm *terms) lead(ctx context.Context) {
	if tm.active.Add(1) > 1 {
		tm.overlaps.Add(1)
	}
	tm.started.Add(1)
	<-ctx.Done()
	tm.active.Add(-1)
}

type running struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func runElector(e *Elector, lead func(context.Context)) running {
	ctx, cancel := context.WithCancel(context.Background())
	r := running{cancel, make(chan struct{})}
	go func() {
		defer close(r.done)
		e.Run(ctx, lead)
	}()
	return r
}

func (r running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(electWait):
		t.Fatal("Run did not return after its context ended")
	}
}

// TestElectTwo: two candidates on one Lease, started together. One leads and
// the other never does alongside it; when the leader's context ends, its
// release hands the Lease to the other.
func TestElectTwo(t *testing.T) {
	leases := apiLeases(t)
	var tm terms
	var mu sync.Mutex
	seen := map[string][]string{}
	es := make([]*Elector, 2)
	rs := make([]running, 2)
	for i, id := range []string{"master-0", "master-1"} {
		es[i] = testElector(leases, id)
		es[i].OnHolder = func(h string) {
			mu.Lock()
			defer mu.Unlock()
			seen[id] = append(seen[id], h)
		}
	}
	for i := range es {
		rs[i] = runElector(es[i], tm.lead)
		defer rs[i].stop(t)
	}
	start := time.Now()
	if !until(electWait, func() bool { return es[0].Leading() || es[1].Leading() }) {
		t.Fatal("no candidate leads")
	}
	t.Logf("first leader after %v", time.Since(start).Round(time.Millisecond))
	// The leader renews every 50 ms; its 400 ms deadline is far off, and
	// the other must wait for the Lease to stay unchanged for a second.
	var none, both int
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		switch a, b := es[0].Leading(), es[1].Leading(); {
		case a && b:
			both++
		case !a && !b:
			none++
		}
	}
	if both > 0 || none > 0 {
		t.Fatalf("sampled for 1 s: both led %d times, none %d times", both, none)
	}
	lead, other := 0, 1
	if es[1].Leading() {
		lead, other = 1, 0
	}
	if h := holderNow(t, leases); h != es[lead].Identity {
		t.Fatalf("Lease holder %q, leader %s", h, es[lead].Identity)
	}
	start = time.Now()
	rs[lead].stop(t)
	t.Logf("%s stopped after %v", es[lead].Identity, time.Since(start).Round(time.Millisecond))
	if es[lead].Leading() {
		t.Error("the stopped Elector still leads")
	}
	if !until(electWait, es[other].Leading) {
		t.Fatalf("%s does not lead after %s stopped; Lease holder %q", es[other].Identity, es[lead].Identity, holderNow(t, leases))
	}
	t.Logf("%s leads %v after %s stopped", es[other].Identity, time.Since(start).Round(time.Millisecond), es[lead].Identity)
	if h := holderNow(t, leases); h != es[other].Identity {
		t.Errorf("Lease holder %q, want the new leader %s", h, es[other].Identity)
	}
	// Leading is true just before lead starts.
	if !until(electWait, func() bool { return tm.started.Load() == 2 }) {
		t.Errorf("%d terms, want 2", tm.started.Load())
	}
	if n := tm.overlaps.Load(); n > 0 {
		t.Errorf("a lead started %d times while another ran", n)
	}
	mu.Lock()
	got := slices.Clone(seen[es[other].Identity])
	mu.Unlock()
	// The new leader saw the old one, then (if its attempt fell between the
	// release and its own write) no holder, then itself.
	if len(got) < 2 || got[0] != es[lead].Identity || got[len(got)-1] != es[other].Identity {
		t.Errorf("%s saw holders %q", es[other].Identity, got)
	}
}

// failUpdates fails every Update once fail is set: an API server that
// answers reads and refuses writes (or a leader cut off from it).
type failUpdates struct {
	LeaseClient
	fail atomic.Bool
}

func (f *failUpdates) Update(ctx context.Context, l *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if f.fail.Load() {
		return nil, apierrors.NewServiceUnavailable("injected")
	}
	return f.LeaseClient.Update(ctx, l, o)
}

// TestElectRenewFails: a leader whose renewals fail stops leading (its lead's
// context ends) at its RenewDeadline, before a peer could take the Lease
// over, and leads again once it can write, after its first lead returned.
func TestElectRenewFails(t *testing.T) {
	leases := &failUpdates{LeaseClient: apiLeases(t)}
	e := testElector(leases, "master-0")
	var errs atomic.Int32
	e.OnError = func(err error) {
		if !strings.Contains(err.Error(), "Lease "+e.Namespace+"/"+electLease) {
			t.Errorf("OnError: %v, want the Lease named", err)
		}
		errs.Add(1)
	}
	var (
		terms, active, overlaps atomic.Int32
		ended                   = make(chan struct{}, 2)
	)
	r := runElector(e, func(ctx context.Context) {
		if active.Add(1) > 1 {
			overlaps.Add(1)
		}
		terms.Add(1)
		<-ctx.Done()
		ended <- struct{}{}
		// A lead slow to wind down: Run must not lead again meanwhile.
		time.Sleep(100 * time.Millisecond)
		active.Add(-1)
	})
	defer r.stop(t)
	if !until(electWait, e.Leading) {
		t.Fatal("the only candidate does not lead")
	}
	leases.fail.Store(true)
	select {
	case <-ended:
	case <-time.After(electWait):
		t.Fatal("lead's context still live with every renewal failing")
	}
	if e.Leading() {
		t.Error("Leading after lead's context ended")
	}
	// The Lease still names it, so it may take it again, but every write
	// fails: it must not lead.
	time.Sleep(200 * time.Millisecond)
	if e.Leading() || terms.Load() != 1 {
		t.Errorf("Leading %v with writes failing, %d terms", e.Leading(), terms.Load())
	}
	leases.fail.Store(false)
	if !until(electWait, func() bool { return terms.Load() == 2 && e.Leading() }) {
		t.Fatalf("does not lead again once writes succeed: %d terms, Leading %v", terms.Load(), e.Leading())
	}
	if overlaps.Load() > 0 {
		t.Error("led again before the previous lead returned")
	}
	if errs.Load() == 0 {
		t.Error("OnError never heard of the failed renewals")
	}
}

// TestElectStop: Run returns once its context ended and lead returned, and
// only then releases the Lease. A lead returning of itself ends its term.
func TestElectStop(t *testing.T) {
	for _, tc := range []struct {
		name string
		// early: lead returns while its context is live.
		early bool
	}{
		{"context ends", false},
		{"lead returns", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leases := apiLeases(t)
			e := testElector(leases, "master-0")
			var returned atomic.Bool
			var holderAtReturn atomic.Value
			var terms atomic.Int32
			r := runElector(e, func(ctx context.Context) {
				if terms.Add(1) == 1 && tc.early {
					time.Sleep(100 * time.Millisecond)
				} else {
					<-ctx.Done()
				}
				// Winding down: the Lease must still be ours.
				time.Sleep(100 * time.Millisecond)
				h, err := holderRead(leases)
				if err != nil {
					h = err.Error()
				}
				holderAtReturn.Store(h)
				returned.Store(true)
			})
			if !until(electWait, e.Leading) {
				r.stop(t)
				t.Fatal("the only candidate does not lead")
			}
			if tc.early {
				if !until(electWait, func() bool { return terms.Load() == 2 && e.Leading() }) {
					r.stop(t)
					t.Fatalf("after lead returned: %d terms, Leading %v", terms.Load(), e.Leading())
				}
				returned.Store(false)
			}
			r.stop(t)
			if !returned.Load() {
				t.Error("Run returned before lead did")
			}
			if h := holderAtReturn.Load(); h != "master-0" {
				t.Errorf("Lease holder %q while lead was winding down, want master-0", h)
			}
			if e.Leading() {
				t.Error("Leading after Run returned")
			}
			if h := holderNow(t, leases); h != "" {
				t.Errorf("Lease holder %q after Run returned, want none (released)", h)
			}
		})
	}
}

func TestElectConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    *Elector
	}{
		{"no identity", &Elector{Leases: apiLeases(t), Name: electLease}},
		{"renew deadline not below duration", &Elector{Leases: apiLeases(t), Name: electLease, Identity: "master-0", Duration: 10 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("Run accepted it")
				}
			}()
			tc.e.Run(context.Background(), func(context.Context) {})
		})
	}
}
