package vrrp

import (
	"net/netip"
	"slices"
	"testing"
	"time"
)

func TestSplitBrain(t *testing.T) {
	low := MAC{0x02, 0, 0, 0, 0, 0x01}
	mid := MAC{0x02, 0, 0, 0, 0, 0x05}
	high := MAC{0x02, 0, 0, 0, 0, 0x09}
	vip := netip.MustParseAddr("192.0.2.5")
	peer := func(m MAC) Claim { return Claim{VIP: vip, MAC: m, Peer: true} }
	never := func(time.Time, []MAC, []netip.Addr) bool { return false }
	// A check every 200 ms, as lbconfig runs it.
	type check struct {
		held   bool
		claims []Claim
		heard  bool // the keeper's advert since we stepped down
		third  bool // a third router's advert since we stepped down
		live   map[MAC]Liveness
		want   SplitEvent
	}
	tests := []struct {
		name   string
		self   MAC
		checks []check
		down   bool // at the end
	}{
		{"alone: nothing", mid, []check{{held: true}, {held: true}, {held: true}, {held: true}}, false},
		{"backup sees the holder: nothing", high, []check{
			{claims: []Claim{peer(low)}}, {claims: []Claim{peer(low)}}, {claims: []Claim{peer(low)}}, {claims: []Claim{peer(low)}},
		}, false},
		{"higher MAC steps down after Confirm", high, []check{
			{held: true, claims: []Claim{peer(low)}}, {held: true, claims: []Claim{peer(low)}},
			{held: true, claims: []Claim{peer(low)}}, {held: true, claims: []Claim{peer(low)}, want: SplitStepDown},
		}, true},
		{"lower MAC keeps it, reported once", low, []check{
			{held: true, claims: []Claim{peer(high)}}, {held: true, claims: []Claim{peer(high)}},
			{held: true, claims: []Claim{peer(high)}}, {held: true, claims: []Claim{peer(high)}, want: SplitKept},
			{held: true, claims: []Claim{peer(high)}},
		}, false},
		{"a takeover's short overlap is no split", high, []check{
			{held: true, claims: []Claim{peer(low)}}, {held: true, claims: []Claim{peer(low)}},
			{held: true}, {held: true, claims: []Claim{peer(low)}}, {held: true},
		}, false},
		{"three holders: the middle one steps down", mid, []check{
			{held: true, claims: []Claim{peer(low), peer(high)}}, {held: true, claims: []Claim{peer(low), peer(high)}},
			{held: true, claims: []Claim{peer(low), peer(high)}}, {held: true, claims: []Claim{peer(low), peer(high)}, want: SplitStepDown},
		}, true},
		{"our own MAC is no claim", mid, []check{
			{held: true, claims: []Claim{peer(mid)}}, {held: true, claims: []Claim{peer(mid)}},
			{held: true, claims: []Claim{peer(mid)}}, {held: true, claims: []Claim{peer(mid)}},
		}, false},
		{"a foreign device is reported, never obeyed", high, []check{
			{held: true, claims: []Claim{{MAC: low}}}, {held: true, claims: []Claim{{MAC: low}}},
			{held: true, claims: []Claim{{MAC: low}}}, {held: true, claims: []Claim{{MAC: low}}, want: SplitForeign},
			{held: true, claims: []Claim{{MAC: low}}}, {held: true},
			{held: true, claims: []Claim{{MAC: low}}}, {held: true, claims: []Claim{{MAC: low}}},
			{held: true, claims: []Claim{{MAC: low}}}, {held: true, claims: []Claim{{MAC: low}}, want: SplitForeign},
		}, false},
		{"stepped down: stays while the keeper answers unheard", high, []check{
			{held: true, claims: []Claim{peer(low)}}, {held: true, claims: []Claim{peer(low)}},
			{held: true, claims: []Claim{peer(low)}}, {held: true, claims: []Claim{peer(low)}, want: SplitStepDown},
			{claims: []Claim{peer(low)}}, {claims: []Claim{peer(low)}}, {claims: []Claim{peer(low)}},
			{claims: []Claim{peer(low)}}, {claims: []Claim{peer(low)}},
		}, true},
		{"stepped down: resumes when the adverts come back", high, []check{
			{held: true, claims: []Claim{peer(low)}}, {held: true, claims: []Claim{peer(low)}},
			{held: true, claims: []Claim{peer(low)}}, {held: true, claims: []Claim{peer(low)}, want: SplitStepDown},
			{claims: []Claim{peer(low)}, third: true}, {claims: []Claim{peer(low)}, heard: true, want: SplitResumeHeard},
		}, false},
		// Issue 28: a paused keeper resumed and went BACKUP; the node that
		// took over meanwhile (mid) claims the VIP as its rightful holder.
		// Its claims are no reason to stay down: only the keeper's are.
		{"stepped down: another peer's claims do not keep it down", high, []check{
			{held: true, claims: []Claim{peer(low)}}, {held: true, claims: []Claim{peer(low)}},
			{held: true, claims: []Claim{peer(low)}}, {held: true, claims: []Claim{peer(low)}, want: SplitStepDown},
			{claims: []Claim{peer(low), peer(mid)}}, {claims: []Claim{peer(mid)}}, {claims: []Claim{peer(mid)}},
			{claims: []Claim{peer(mid)}, want: SplitResumeQuiet},
		}, false},
		// Issue 28: a paused holder's kernel still answers ARP for the VIP
		// it had; its service does not answer. The node that took over
		// keeps the VIP (before: it stepped down, then the next one, and
		// nobody served until the pause ended).
		{"a paused keeper is not stepped down for", high, []check{
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: LiveUnknown}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Dead}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Dead}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Dead}, want: SplitKeptDead},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Dead}},
		}, false},
		{"a step-down waits for the keeper's probe", high, []check{
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: LiveUnknown}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: LiveUnknown}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: LiveUnknown}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: LiveUnknown}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Live}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Live}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Live}, want: SplitStepDown},
		}, true},
		// The paused holder resumes: its service answers, and it claims the
		// VIP once more (its gratuitous ARP) before it hears our adverts
		// and yields. The conflict is long confirmed by then; one live
		// claim is no reason to step down.
		{"a resumed keeper's last claim is not stepped down for", high, []check{
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Dead}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Dead}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Dead}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Dead}, want: SplitKeptDead},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Live}},
			{held: true, live: map[MAC]Liveness{low: Live}},
			{held: true, live: map[MAC]Liveness{low: Live}},
		}, false},
		// A keeper that resumes and does not yield is a second holder like
		// any other: stepped down for once it has claimed while serving for
		// half of Confirm.
		{"a resumed keeper that keeps claiming is stepped down for", high, []check{
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Dead}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Dead}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Dead}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Dead}, want: SplitKeptDead},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Live}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Live}},
			{held: true, claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Live}, want: SplitStepDown},
		}, true},
		{"of two lower holders, the live one is stepped down for", high, []check{
			{held: true, claims: []Claim{peer(low), peer(mid)}, live: map[MAC]Liveness{low: Dead, mid: Live}},
			{held: true, claims: []Claim{peer(low), peer(mid)}, live: map[MAC]Liveness{low: Dead, mid: Live}},
			{held: true, claims: []Claim{peer(low), peer(mid)}, live: map[MAC]Liveness{low: Dead, mid: Live}},
			{held: true, claims: []Claim{peer(low), peer(mid)}, live: map[MAC]Liveness{low: Dead, mid: Live}, want: SplitStepDown},
		}, true},
		{"stepped down: resumes when the keeper stops serving", high, []check{
			{held: true, claims: []Claim{peer(low)}}, {held: true, claims: []Claim{peer(low)}},
			{held: true, claims: []Claim{peer(low)}}, {held: true, claims: []Claim{peer(low)}, want: SplitStepDown},
			{claims: []Claim{peer(low)}}, {claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: LiveUnknown}},
			{claims: []Claim{peer(low)}, live: map[MAC]Liveness{low: Dead}, want: SplitResumeDead},
		}, false},
		{"stepped down: resumes when the keeper is gone", high, []check{
			{held: true, claims: []Claim{peer(low)}}, {held: true, claims: []Claim{peer(low)}},
			{held: true, claims: []Claim{peer(low)}}, {held: true, claims: []Claim{peer(low)}, want: SplitStepDown},
			{claims: []Claim{peer(low)}}, {}, {}, {want: SplitResumeQuiet},
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Confirm 500 ms: a step-down at the fourth check, 600 ms in.
			s := SplitBrain{Confirm: 500 * time.Millisecond}
			t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
			for i, c := range tt.checks {
				heard := never
				if c.heard || c.third {
					// The keeper is low; a third router is none of the claimants.
					heard = func(since time.Time, macs []MAC, vips []netip.Addr) bool {
						return c.heard && slices.Contains(macs, low) && slices.Equal(vips, []netip.Addr{vip})
					}
				}
				in := SplitInput{Held: c.held, Self: tt.self, Claims: c.claims, HeardFrom: heard}
				if c.live != nil {
					in.Liveness = func(m MAC) Liveness {
						if l, ok := c.live[m]; ok {
							return l
						}
						return Live
					}
				}
				got := s.Step(in, t0.Add(time.Duration(i)*200*time.Millisecond))
				if got != c.want {
					t.Fatalf("check %d (%d ms): %v, want %v", i, i*200, got, c.want)
				}
			}
			if s.Down() != tt.down {
				t.Errorf("down at the end: %v, want %v", s.Down(), tt.down)
			}
		})
	}
}

func TestSplitBrainHeardOnlyAfterStepDown(t *testing.T) {
	// An advert heard before we stepped down says nothing about now.
	s := SplitBrain{Confirm: 500 * time.Millisecond}
	self, other := MAC{2, 0, 0, 0, 0, 9}, MAC{2, 0, 0, 0, 0, 1}
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	lastAdvert := t0.Add(-time.Second)
	heard := func(since time.Time, macs []MAC, _ []netip.Addr) bool {
		return lastAdvert.After(since) && slices.Contains(macs, other)
	}
	var ev SplitEvent
	for i := range 4 {
		ev = s.Step(SplitInput{Held: true, Self: self, Claims: []Claim{{MAC: other, Peer: true}}, HeardFrom: heard}, t0.Add(time.Duration(i)*200*time.Millisecond))
	}
	if ev != SplitStepDown {
		t.Fatalf("got %v, want a step down", ev)
	}
	if ev := s.Step(SplitInput{Self: self, Claims: []Claim{{MAC: other, Peer: true}}, HeardFrom: heard}, t0.Add(time.Second)); ev != SplitNone || !s.Down() {
		t.Fatalf("an old advert resumed the group: %v, down %v", ev, s.Down())
	}
	lastAdvert = t0.Add(1100 * time.Millisecond)
	if ev := s.Step(SplitInput{Self: self, Claims: []Claim{{MAC: other, Peer: true}}, HeardFrom: heard}, t0.Add(1200*time.Millisecond)); ev != SplitResumeHeard {
		t.Fatalf("got %v, want resumed on a new advert", ev)
	}
}

// TestSplitBrainDefaultConfirm: with the defaults and a check every 200 ms,
// a second holder is settled at the third check that sees it (400 ms), so
// well within a second of its first gratuitous ARP.
func TestSplitBrainDefaultConfirm(t *testing.T) {
	var s SplitBrain
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	in := SplitInput{Held: true, Self: MAC{2, 0, 0, 0, 0, 9}, Claims: []Claim{{MAC: MAC{2, 0, 0, 0, 0, 1}, Peer: true}}}
	for i, want := range []SplitEvent{SplitNone, SplitNone, SplitStepDown} {
		if got := s.Step(in, t0.Add(time.Duration(i)*200*time.Millisecond)); got != want {
			t.Fatalf("check %d: %v, want %v", i, got, want)
		}
	}
}

// TestSplitBrainFamilies: a split over the IPv6 VIP alone (its VRRP
// dropped, IPv4's flowing) is not over when the keeper's IPv4 adverts are
// heard, only when its IPv6 ones are.
func TestSplitBrainFamilies(t *testing.T) {
	var s SplitBrain
	self, keeper := MAC{2, 0, 0, 0, 0, 9}, MAC{2, 0, 0, 0, 0, 1}
	v6 := netip.MustParseAddr("2001:db8::5")
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	heardV6 := false
	heard := func(since time.Time, macs []MAC, vips []netip.Addr) bool {
		// The keeper's IPv4 adverts are always heard.
		for _, v := range vips {
			if !slices.Contains(macs, keeper) || (v == v6 && !heardV6) {
				return false
			}
		}
		return true
	}
	claim := []Claim{{VIP: v6, MAC: keeper, Peer: true}}
	var ev SplitEvent
	for i := range 3 {
		ev = s.Step(SplitInput{Held: true, Self: self, Claims: claim, HeardFrom: heard}, t0.Add(time.Duration(i)*200*time.Millisecond))
	}
	if ev != SplitStepDown {
		t.Fatalf("got %v, want a step down", ev)
	}
	for i := 3; i < 10; i++ {
		if ev := s.Step(SplitInput{Self: self, Claims: claim, HeardFrom: heard}, t0.Add(time.Duration(i)*200*time.Millisecond)); ev != SplitNone {
			t.Fatalf("check %d: %v with only the keeper's IPv4 adverts heard, want none", i, ev)
		}
	}
	heardV6 = true
	if ev := s.Step(SplitInput{Self: self, Claims: claim, HeardFrom: heard}, t0.Add(2*time.Second)); ev != SplitResumeHeard {
		t.Fatalf("got %v, want resumed once its IPv6 adverts are heard", ev)
	}
}
