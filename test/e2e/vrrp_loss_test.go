//go:build e2e

package e2e

import (
	"slices"
	"testing"
	"time"
)

// TestVRRPAdvertLoss makes the timers' margin on a lossy or jittery link a
// tested property (issue 28 finding 4: 1 % loss with 100-ms delay spikes
// flapped the VIP once a minute). A backup takes the VIP over when the
// holder's adverts stop for its master-down interval: 3 adverts plus the
// skew, at 60-ms adverts 181 ms for a priority-250 backup (the first-ranked
// node when another holds the VIP), 191 ms at 210, 200 ms at 170. Lost
// adverts and a delay spike both show as a gap between the adverts a
// backup hears: one lost advert is a gap of 120 ms, two in a row 180 ms,
// three 240 ms; a spike of D ms is a gap of up to D + 60 ms. The switch drops the holder's
// adverts where they enter it (nft numgen), so every host misses the same
// ones, and the client hears what the backups hear. Phases:
//
//   - one advert in ten lost, never two in a row (a 120-ms gap every 0.6 s,
//     i.e. 60-ms spikes): no VRRP state may change;
//   - 2 % lost at random: no state may change (three in a row, 8 in a
//     million adverts, is what would move it);
//   - two in a row of every 16 lost (a 180-ms gap, a 120-ms spike, every
//     second): within 1-11 ms of the interval; logged, not asserted;
//   - three in a row, once (a 240-ms gap, a 180-ms spike): the VIP moves
//     (the count is logged); the fast profile's bound. Links with longer
//     spikes need the stable profile (TestVRRPStableProfile).
func TestVRRPAdvertLoss(t *testing.T) {
	v := startVRRPLab(t, vrrpStatic)
	h := v.waitSettled("start")
	v.waitUnboosted("after the election", h)

	heard := v.hearAdverts()

	for _, phase := range []struct {
		name, expr string
		window     time.Duration
		// moves: 0, no VRRP state may change; 1, the VIP must move; -1,
		// logged only.
		moves int
	}{
		{"1 advert in 10 lost (120-ms gaps)", "numgen inc mod 10 < 1", 15 * time.Second, 0},
		{"2 % of adverts lost at random", "numgen random mod 100 < 2", 15 * time.Second, 0},
		{"2 adverts in a row of every 16 lost (180-ms gaps)", "numgen inc mod 16 < 2", 10 * time.Second, -1},
		{"3 adverts in a row lost once (a 240-ms gap)", "numgen inc mod 100000 < 3", 2 * time.Second, 1},
	} {
		vn := v.nodes[h]
		holder := vn.n.IPv4.String()
		before, mastersBefore := v.transitions(), v.masterEntries()
		// From the holder's last advert before the drops: a holder that
		// yields at once sends none after them.
		first := max(len(heard.from(holder))-1, 0)
		t0 := time.Now()
		if err := vn.n.DropAdverts(phase.expr); err != nil {
			t.Fatal(err)
		}
		time.Sleep(phase.window)
		if err := vn.n.AllowAdverts(); err != nil {
			t.Fatal(err)
		}
		times := heard.from(holder)[first:]
		next := v.waitSettled(phase.name + ": settled")
		changes, moves := v.transitions()-before, v.masterEntries()-mastersBefore
		reqs, failed := v.requestsBetween(t0, time.Now())
		var gaps []time.Duration
		for i := 1; i < len(times); i++ {
			gaps = append(gaps, times[i].Sub(times[i-1]))
		}
		slices.Sort(gaps)
		// Only a phase that must not move needs the holder's adverts all
		// through: where a move is allowed (a 180-ms gap is within 1-11 ms
		// of the interval), the holder yields at once and sends no more.
		if len(gaps) < 10 && (phase.moves == 0 || phase.moves < 0 && moves == 0) {
			t.Fatalf("%s: %d adverts heard from the holder %s in %v", phase.name, len(times), holder, phase.window)
		}
		q := func(p float64) int64 {
			if len(gaps) == 0 {
				return -1 // no advert after the drops: the holder yielded
			}
			return vrrpMS(gaps[int(p*float64(len(gaps)-1))])
		}
		t.Logf("measure: %s on %s for %v: the holder's advert gaps p50/p99/max %d/%d/%d ms (%d adverts heard); %d VRRP state changes, the VIP moved %d times (now on %s); client: %d of %d requests failed",
			phase.name, vn.n.Name, phase.window, q(0.5), q(0.99), q(1), len(times), changes, moves, v.nodes[next].n.Name, failed, reqs)
		switch {
		case phase.moves == 0 && changes != 0:
			t.Errorf("%s: %d VRRP state changes, want 0 (the largest gap was %d ms; a backup takes over after ~191 ms)", phase.name, changes, q(1))
		case phase.moves > 0 && moves == 0:
			t.Errorf("%s: the VIP did not move (the largest gap was %d ms; a backup takes over after ~191 ms)", phase.name, q(1))
		}
		h = next
		v.waitUnboosted(phase.name, h)
	}
}
