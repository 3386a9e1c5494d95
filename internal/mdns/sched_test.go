package mdns

import (
	"strconv"
	"testing"
	"time"
)

func TestAnnouncer(t *testing.T) {
	a := NewAnnouncer(t0, 50*time.Millisecond)
	var got []string
	now := t0
	for i := 0; i < 20 && !a.Next().IsZero(); i++ {
		now = a.Next()
		switch a.Step(now) {
		case SendProbe:
			got = append(got, "probe@"+now.Sub(t0).String())
		case SendAnnouncement:
			got = append(got, "announce@"+now.Sub(t0).String())
		}
	}
	want := []string{"probe@50ms", "probe@300ms", "probe@550ms", "announce@800ms", "announce@1.8s"}
	if len(got) != len(want) {
		t.Fatalf("Schedule %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Schedule %v, want %v", got, want)
		}
	}
	if a.Phase() != Announced {
		t.Errorf("Phase %v, want Announced", a.Phase())
	}
	if a.Step(now.Add(time.Hour)) != None {
		t.Error("Step after the last announcement sends something")
	}
	a.Reannounce(now)
	if a.Step(now) != SendAnnouncement || a.Phase() != Announcing {
		t.Error("Reannounce does not announce at once")
	}
	a.Reprobe(now, ProbeDeferral)
	if a.Step(now) != None || a.Step(now.Add(ProbeDeferral)) != SendProbe {
		t.Error("Reprobe does not wait a second then probe")
	}
	if early := NewAnnouncer(t0, time.Second); early.Step(t0) != None {
		t.Error("Step before the delay sends something")
	}
}

func TestBackoff(t *testing.T) {
	b := NewBackoff(t0, 20*time.Millisecond)
	if b.Step(t0) {
		t.Error("Query before the initial delay")
	}
	var gaps []time.Duration
	now := t0
	for range 16 {
		now = b.Next()
		if !b.Step(now) {
			t.Fatal("Not due at Next")
		}
		gaps = append(gaps, b.Next().Sub(now))
	}
	if gaps[0] != time.Second || gaps[1] != 2*time.Second || gaps[2] != 4*time.Second || gaps[15] != time.Hour {
		t.Errorf("Intervals %v: want 1 s, 2 s, 4 s ... capped at 1 h", gaps)
	}
	b.Reset(now)
	if !b.Step(now) || b.Next().Sub(now) != time.Second {
		t.Error("Reset does not restart the backoff")
	}
}

func TestVerifierWindow(t *testing.T) {
	v := NewVerifier(key)
	s := Signed{Cluster: "ocp4", Host: "node1.local.", Addrs: nil}
	sign := func(at time.Time, nonce string) map[string]string {
		s := s
		s.TS, s.Nonce = at.UnixMilli(), nonce
		return map[string]string{txtTime: strconv.FormatInt(s.TS, 10), txtNonce: nonce, txtSig: Sign(key, s)}
	}
	for _, tc := range []struct {
		name   string
		fields map[string]string
		want   error
	}{
		{"fresh", sign(t0, "a"), nil},
		{"same nonce", sign(t0.Add(time.Millisecond), "a"), ErrReplay},
		{"older by more than a second", sign(t0.Add(-1001*time.Millisecond), "b"), ErrReplay},
		// The other family's socket, or a reply signed before an
		// announcement and sent after it.
		{"reordered within a second", sign(t0.Add(-time.Second), "b2"), ErrSuperseded},
		{"the reordered one again", sign(t0.Add(-time.Second), "b2"), ErrDuplicate},
		{"future beyond window", sign(t0.Add(time.Minute), "c"), ErrStale},
		{"past beyond window", sign(t0.Add(-time.Minute), "d"), ErrStale},
		{"unsigned", map[string]string{}, ErrUnsigned},
		{"malformed", map[string]string{txtSig: "x"}, ErrMalformed},
		{"bad base64", map[string]string{txtTime: "1", txtNonce: "n", txtSig: "!!"}, ErrBadSig},
		{"newer", sign(t0.Add(time.Second), "e"), nil},
	} {
		if err := v.Check(t0, s, tc.fields); err != tc.want {
			t.Errorf("%s: Check = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestCoalescer(t *testing.T) {
	const every = PublishInterval
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	type ev struct {
		at      int  // ms after t0
		change  bool // a change before asking
		publish bool // want Publish to say yes
		next    int  // want Next after it, ms after t0; -1: zero
	}
	tests := []struct {
		name  string
		burst int
		evs   []ev
	}{
		{"nothing changed, nothing published", 2, []ev{{0, false, false, -1}, {1000, false, false, -1}}},
		{"changes far apart are published at once", 1, []ev{{0, true, true, -1}, {1000, true, true, -1}, {5000, true, true, -1}}},
		{"a burst is published at once", 2, []ev{{0, true, true, -1}, {1, true, true, -1}}},
		{"a flood is published once per interval after the burst", 2, []ev{
			{0, true, true, -1}, {1, true, true, -1},
			{2, true, false, 250}, {100, true, false, 250}, {249, true, false, 250},
			{250, true, true, -1},
			{251, true, false, 500}, {400, true, false, 500},
			{500, false, true, -1},
			{501, false, false, -1},
			{600, true, false, 750}}},
		{"a quiet time refills the burst, not more", 2, []ev{
			{0, true, true, -1}, {1, true, true, -1},
			{10000, true, true, -1}, {10001, true, true, -1}, {10002, true, false, 10250}}},
		{"a clock that went back does not stall", 1, []ev{
			{1000, true, true, -1},
			{1001, true, false, 1250},
			{500, true, true, -1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCoalescer(every, tc.burst)
			for i, e := range tc.evs {
				if e.change {
					c.Changed()
				}
				if got := c.Publish(ms(e.at)); got != e.publish {
					t.Fatalf("Event %d at %d ms: Publish = %v, want %v", i, e.at, got, e.publish)
				}
				want := time.Time{}
				if e.next >= 0 {
					want = ms(e.next)
				}
				if got := c.Next(); !got.Equal(want) {
					t.Fatalf("Event %d at %d ms: Next = %v, want %v", i, e.at, got.Sub(t0), want.Sub(t0))
				}
			}
		})
	}
}
