package vrrp

import (
	"testing"
	"time"
)

func TestHolderBoost(t *testing.T) {
	type look struct {
		at     time.Duration // since the start
		held   bool
		heard  time.Duration // another router's last advert, since the start; <0: none
		paused bool
		want   bool
	}
	never := time.Duration(-1)
	tests := []struct {
		name  string
		looks []look
	}{
		{"a backup is never boosted", []look{
			{0, false, never, false, false},
			{5 * time.Second, false, 4 * time.Second, true, false},
		}},
		{"taking over boosts at once", []look{
			{0, false, never, false, false},
			{100 * time.Millisecond, true, never, false, true},
		}},
		{"held at start counts as taken over", []look{
			{0, true, never, false, true},
		}},
		{"ends after Min when quiet and no peer paused", []look{
			{0, false, never, false, false},
			{time.Second, true, never, false, true},
			{2900 * time.Millisecond, true, never, false, true},
			{3 * time.Second, true, never, false, false},
		}},
		{"kept while a peer is paused, then Quiet after its last advert", []look{
			{0, true, never, true, true},
			{5 * time.Second, true, never, true, true},
			// the paused node resumes, advertises (and yields to us)
			{6 * time.Second, true, 6 * time.Second, false, true},
			{6900 * time.Millisecond, true, 6 * time.Second, false, true},
			{7100 * time.Millisecond, true, 6 * time.Second, false, false},
		}},
		{"a takeover while another router still advertises is not boosted", []look{
			{0, false, never, false, false},
			{time.Second, true, 950 * time.Millisecond, true, false},
			{5 * time.Second, true, never, true, false},
		}},
		{"a takeover after Silence is", []look{
			{0, false, never, false, false},
			{time.Second, true, 850 * time.Millisecond, false, true},
		}},
		{"not boosted again while still held", []look{
			{0, true, never, false, true},
			{3 * time.Second, true, never, false, false},
			{10 * time.Second, true, 9900 * time.Millisecond, true, false},
		}},
		{"losing the VIP ends it, taking it again starts it", []look{
			{0, true, never, true, true},
			{time.Second, false, never, true, false},
			{1500 * time.Millisecond, true, never, true, true},
			{3400 * time.Millisecond, true, never, false, true},
			{3500 * time.Millisecond, true, never, false, false},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Unix(1000, 0)
			b := HolderBoost{Min: 2 * time.Second, Quiet: time.Second, Silence: 120 * time.Millisecond}
			for i, l := range tc.looks {
				heard := l.heard
				in := BoostInput{
					Held: l.held,
					HeardSince: func(since time.Time) bool {
						return heard >= 0 && start.Add(heard).After(since)
					},
					PeerPaused: func() bool { return l.paused },
				}
				if got := b.Step(in, start.Add(l.at)); got != l.want || b.On() != l.want {
					t.Fatalf("look %d at %v: boosted %v, want %v", i, l.at, got, l.want)
				}
			}
		})
	}
}

// TestBoostLevel: a takeover is fresh (254) for Fresh and while a peer may
// be paused, settled (253) after that until the boost ends; BoostValue
// brings any base priority there.
func TestBoostLevel(t *testing.T) {
	start := time.Unix(1000, 0)
	type look struct {
		at     time.Duration
		paused bool
		want   BoostLevel
	}
	for _, tc := range []struct {
		name  string
		looks []look
	}{
		{"peers serve", []look{{0, false, BoostFresh}, {199 * time.Millisecond, false, BoostFresh}, {200 * time.Millisecond, false, BoostSettled},
			{499 * time.Millisecond, false, BoostSettled}, {500 * time.Millisecond, false, BoostNone}}},
		{"a peer paused", []look{{0, true, BoostFresh}, {300 * time.Millisecond, true, BoostFresh}, {5 * time.Second, true, BoostFresh},
			{5100 * time.Millisecond, false, BoostNone}}},
		{"a peer paused, then a peer's advert", []look{{0, true, BoostFresh}, {300 * time.Millisecond, false, BoostSettled}}},
	} {
		b := HolderBoost{Min: 500 * time.Millisecond, Quiet: time.Second, Fresh: 200 * time.Millisecond}
		for _, l := range tc.looks {
			paused := l.paused
			in := BoostInput{Held: true,
				HeardSince: func(since time.Time) bool {
					return tc.name == "a peer paused, then a peer's advert" && start.Add(250*time.Millisecond).After(since)
				},
				PeerPaused: func() bool { return paused }}
			now := start.Add(l.at)
			b.Step(in, now)
			if got := b.Level(); got != l.want {
				t.Errorf("%s, at %v: level %d, want %d", tc.name, l.at, got, l.want)
			}
		}
	}
	for _, v := range []struct {
		level      BoostLevel
		base, want int
	}{
		{BoostFresh, 250, 4}, {BoostSettled, 250, 3}, {BoostFresh, 170, 84}, {BoostSettled, 1, 252}, {BoostNone, 250, 0},
	} {
		if got := BoostValue(v.level, v.base); got != v.want {
			t.Errorf("BoostValue(%d, %d) = %d, want %d", v.level, v.base, got, v.want)
		}
	}
}
