//go:build e2e

package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/test/e2e/lab"
)

// TestVRRPPausedHolder stuns the VIP holder as a VM stun or SIGSTOP does:
// keepalived, haproxy, lbconfig and the apiserver stop for 3 s while the
// node's kernel still answers ARP for the VIP it had. Issue 28 measured,
// before the fix: the split-brain rule (the lowest MAC keeps the VIP) made
// both healthy backups step down for the stunned node one after the other,
// and once the last one's copy on lo expired every request failed until the
// pause ended (client outage 483–782 ms for a 3 s pause); a node could stay
// in FAULT for good, waiting on a keeper that had gone BACKUP. Now a
// keeper whose service accepts connections and never answers is not
// stepped down for, and a stepped-down node waits on the keepers' claims
// only.
//
// The resumed node never left MASTER and has the highest priority; it took
// the VIP back in every round (2 moves per pause). Now the node that took
// over raises its priority while a paused holder may come back (lbconfig's
// holder boost), so the resumed node yields instead.
//
// The stunned node's apiserver is frozen too: its kernel completes TCP
// handshakes, so haproxy's checks take 0.7-1.2 s to see it, and until then
// the new holder's haproxy sent a share of its new connections there (a
// request ~0.3 s after the takeover failed in 5 of 6 rounds before the fix).
// The new holder's lbconfig, whose probe finds the old holder paused about
// 250 ms after the takeover, now takes its apiserver out of haproxy at once.
// A second client that starts a request every 20 ms, whatever the earlier
// ones do, checks that no request begun 500 ms after the takeover fails
// while the holder is stunned.
//
// Checked in each round (pauses of 0.4, 1 and 3 s): no node steps down; no
// request fails once the failover is over while the holder is stunned; the
// VIP moves once (it stays on the node that took over); afterwards every node
// is MASTER or BACKUP by itself (one holder), and the new holder's boost ends
// by itself.
func TestVRRPPausedHolder(t *testing.T) {
	v := startVRRPLab(t, vrrpStatic)
	holder := v.waitSettled("start")
	pauses := []time.Duration{400 * time.Millisecond, time.Second, 3 * time.Second}
	stepDowns := func() int {
		n := 0
		for _, vn := range v.nodes {
			n += strings.Count(vn.coredns.Log(), "the lowest MAC keeps it: stepping down")
		}
		return n
	}
	masters := v.masterEntries
	var outages, moves []int64
	url := fmt.Sprintf("https://%s/", netip.AddrPortFrom(vrrpVIP, vrrpLBPort))
	open := v.lab.Client().Start("probe-open", []string{v.fakeapi, "probe", "-url", url, "-interval", "20ms", "-timeout", "500ms", "-open"})
	frozenOut := func(i int) int { return strings.Count(v.nodes[i].coredns.Log(), "is out of haproxy now") }
	// The holder's own boost from the election ends first: a holder paused
	// within its boost would meet a boosted successor (equal priorities,
	// settled by address: a second move the README states).
	v.waitUnboosted("after the election", holder)
	for round, pause := range pauses {
		vn := v.nodes[holder]
		steppedBefore, mastersBefore := stepDowns(), masters()
		var outBefore []int
		for i := range v.nodes {
			outBefore = append(outBefore, frozenOut(i))
		}
		signal := v.stunner(holder)
		t0 := time.Now()
		signal(syscall.SIGSTOP)
		stunned := true
		defer func() {
			if stunned {
				signal(syscall.SIGCONT)
			}
		}()
		to, moved := v.waitHolder("the VIP moves while "+vn.n.Name+" is stunned", t0, func(i int) bool { return i != holder })
		if rest := pause - time.Since(t0); rest > 0 {
			time.Sleep(rest)
		}
		signal(syscall.SIGCONT)
		stunned = false
		resumed := time.Now()
		st := v.waitClient("client served after the pause", t0)
		// Once the failover is over, the stunned node's clients are served
		// by the new holder for the rest of the pause.
		var late, failures []string
		for _, r := range v.probes() {
			if !r.ok && !r.start.Before(t0) {
				failures = append(failures, fmt.Sprintf("%v: %s", r.start.Sub(t0).Round(time.Millisecond), r.detail))
			}
			if !r.ok && r.start.After(t0.Add(moved+time.Second)) && r.start.Before(resumed) {
				late = append(late, fmt.Sprintf("%v after the stun: %s", r.start.Sub(t0).Round(time.Millisecond), r.detail))
			}
		}
		if len(late) > 0 {
			t.Errorf("round %d: %d requests failed while %s was stunned, after the failover (%v): %v", round, len(late), vn.n.Name, moved.Round(time.Millisecond), late)
		}
		// The open client: every request begun once the new holder has had
		// 500 ms to find the old one paused must avoid its apiserver.
		var openFailed, openLate []string
		openN := 0
		for _, r := range parseFakeAPI(open.Log()) {
			if r.start.Before(t0) || !r.start.Before(resumed) {
				continue
			}
			openN++
			if r.ok {
				continue
			}
			at := fmt.Sprintf("%v", r.start.Sub(t0).Round(time.Millisecond))
			openFailed = append(openFailed, at)
			if r.start.After(t0.Add(moved + 500*time.Millisecond)) {
				openLate = append(openLate, at+": "+r.detail)
			}
		}
		if len(openLate) > 0 {
			t.Errorf("round %d: %d requests begun more than 500 ms after the takeover (%v) failed while %s was stunned (sent to its frozen apiserver?): %v\n%s",
				round, len(openLate), moved.Round(time.Millisecond), vn.n.Name, openLate, lab.Tail(v.nodes[to].coredns.LogPath, 15))
		}
		if out := frozenOut(to) - outBefore[to]; pause >= time.Second && out == 0 {
			t.Errorf("round %d: %s took the VIP over from the stunned %s and did not take its apiserver out of haproxy\n%s",
				round, v.nodes[to].n.Name, vn.n.Name, lab.Tail(v.nodes[to].coredns.LogPath, 15))
		}
		next := v.waitSettled(fmt.Sprintf("round %d: every node MASTER or BACKUP after the pause", round))
		downs := stepDowns() - steppedBefore
		if downs != 0 {
			t.Errorf("round %d: %d split-brain step-downs for the stunned %s (its kernel answers ARP, its service does not)", round, downs, vn.n.Name)
		}
		m := int64(masters() - mastersBefore)
		if next == holder {
			m++ // the resumed node took it back without a new MASTER line
		}
		if m != 1 {
			var logs strings.Builder
			for _, n := range v.nodes {
				fmt.Fprintf(&logs, "--- %s keepalived:\n%s\n", n.n.Name, lab.Tail(n.keepalived.LogPath, 30))
			}
			t.Errorf("round %d: the VIP moved %d times for one pause of %s (want 1: it stays on the node that took over)\n%s", round, m, vn.n.Name, logs.String())
		}
		// The new holder's boost ends once the resumed node is quiet and
		// serves.
		v.waitUnboosted(fmt.Sprintf("round %d", round), next)
		settled := time.Since(resumed)
		outages, moves = append(outages, vrrpMS(st.outage)), append(moves, m)
		t.Logf("round %d: %s stunned %v: VIP on %s after %d ms; client: %d of %d requests failed, steady after %d ms; after the pause on %s; %d moves; %d step-downs; boost over %d ms after the resume; failed requests (since the stun) %v; open client: %d of %d failed during the stun, begun at %v",
			round, vn.n.Name, pause, v.nodes[to].n.Name, vrrpMS(moved), st.failed, st.requests, vrrpMS(st.outage), v.nodes[next].n.Name, m, downs, vrrpMS(settled), failures, len(openFailed), openN, openFailed)
		holder = next
	}
	slices.Sort(outages)
	slices.Sort(moves)
	t.Logf("measure: pauses of %v: client steady after %d/%d/%d ms (min/median/max); VIP moves per pause %d/%d/%d",
		pauses, outages[0], outages[len(outages)/2], outages[len(outages)-1], moves[0], moves[len(moves)/2], moves[len(moves)-1])
}

// boosted says whether node i's lbconfig has its holder boost on (its log).
func (v *vrrpLab) boosted(i int) bool {
	l := v.nodes[i].coredns.Log()
	return strings.LastIndex(l, "holder boost: ") > strings.LastIndex(l, "holder boost over:")
}

// waitUnboosted waits for node i's holder boost to end by itself.
func (v *vrrpLab) waitUnboosted(what string, i int) time.Duration {
	v.t.Helper()
	start := time.Now()
	for v.boosted(i) {
		if time.Since(start) > 15*time.Second {
			v.t.Fatalf("%s: %s's holder boost did not end within 15 s\n%s", what, v.nodes[i].n.Name, lab.Tail(v.nodes[i].coredns.LogPath, 20))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// stunner returns what sends a signal to node i's keepalived, haproxy,
// lbconfig and apiserver, as a VM stun stops them all (SIGSTOP, SIGCONT).
func (v *vrrpLab) stunner(i int) func(syscall.Signal) {
	vn := v.nodes[i]
	procs := []*lab.Process{vn.keepalived, vn.haproxy, vn.coredns, vn.api}
	return func(sig syscall.Signal) {
		v.t.Helper()
		for _, p := range procs {
			// Each is its own process group: keepalived's VRRP child and
			// haproxy's workers stop with them.
			if err := syscall.Kill(-p.Pid(), sig); err != nil {
				v.t.Fatalf("%v to %s's process group %d: %v", sig, vn.n.Name, p.Pid(), err)
			}
		}
	}
}

// TestVRRPStableProfile runs the lab with lbconfig's stable failover
// profile (failover stable: 1 s adverts, a master-down interval of ~3.2 s)
// for sites that prefer fewer moves to faster ones: a 1.5 s stun of the
// holder (a VM live migration's) moves nothing, the clients wait out the
// pause; a crash still moves the VIP, after the longer interval. The
// figures are logged for the lbconfig README's table of profiles.
func TestVRRPStableProfile(t *testing.T) {
	v := startVRRPLabWith(t, vrrpStatic, vrrpLabConfig{nodes: 3, failover: cluster.FailoverStable})
	holder := v.waitSettled("start")
	const pause = 1500 * time.Millisecond
	before := v.transitions()
	signal := v.stunner(holder)
	t0 := time.Now()
	signal(syscall.SIGSTOP)
	stunned := true
	defer func() {
		if stunned {
			signal(syscall.SIGCONT)
		}
	}()
	// Sampled through the pause and a second after it: only the stunned
	// node ever holds the VIP.
	var others []string
	for time.Since(t0) < pause+time.Second {
		if stunned && time.Since(t0) >= pause {
			signal(syscall.SIGCONT)
			stunned = false
		}
		hs, err := v.holders()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(hs, []int{holder}) {
			others = append(others, fmt.Sprintf("%v: %s", time.Since(t0).Round(time.Millisecond), v.names(hs)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(others) > 0 {
		t.Errorf("a %v stun of %s moved the VIP with the stable profile: %v", pause, v.nodes[holder].n.Name, others)
	}
	if n := v.transitions() - before; n != 0 {
		t.Errorf("%d VRRP state changes for a %v stun with the stable profile, want 0", n, pause)
	}
	st := v.waitClient("client served after the stun", t0)
	t.Logf("stable: %s stunned %v: VIP kept, %d state changes; client: %d of %d requests failed, steady after %d ms",
		v.nodes[holder].n.Name, pause, v.transitions()-before, st.failed, st.requests, vrrpMS(st.outage))
	if h := v.waitSettled("after the stun"); h != holder {
		t.Errorf("after the stun %s holds the VIP, want %s", v.nodes[h].n.Name, v.nodes[holder].n.Name)
	}
	r := v.crashHolder(holder)
	v.logCrash("stable: crash", r)
}
