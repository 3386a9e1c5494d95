//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

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
// Checked in each round: no node steps down; no request fails once the
// failover is over while the holder is stunned; afterwards every node is
// MASTER or BACKUP by itself (one holder). The moves per pause are
// reported: the resumed node still takes the VIP back (it never left
// MASTER and has the higher priority), a second move issue 28 still has
// open.
func TestVRRPPausedHolder(t *testing.T) {
	v := startVRRPLab(t, vrrpStatic)
	holder := v.waitSettled("start")
	const pause, rounds = 3 * time.Second, 3
	stepDowns := func() int {
		n := 0
		for _, vn := range v.nodes {
			n += strings.Count(vn.coredns.Log(), "the lowest MAC keeps it: stepping down")
		}
		return n
	}
	masters := func() int {
		n := 0
		for _, vn := range v.nodes {
			for _, p := range vn.kaAll {
				n += strings.Count(p.Log(), "Entering MASTER STATE")
			}
		}
		return n
	}
	var outages, moves []int64
	for round := range rounds {
		vn := v.nodes[holder]
		steppedBefore, mastersBefore := stepDowns(), masters()
		procs := []*lab.Process{vn.keepalived, vn.haproxy, vn.coredns, vn.api}
		signal := func(sig syscall.Signal) {
			t.Helper()
			for _, p := range procs {
				// Each is its own process group: keepalived's VRRP child and
				// haproxy's workers stop with them.
				if err := syscall.Kill(-p.Pid(), sig); err != nil {
					t.Fatalf("%v to %s's process group %d: %v", sig, vn.n.Name, p.Pid(), err)
				}
			}
		}
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
		var late []string
		for _, r := range v.probes() {
			if !r.ok && r.start.After(t0.Add(moved+time.Second)) && r.start.Before(resumed) {
				late = append(late, fmt.Sprintf("%v after the stun: %s", r.start.Sub(t0).Round(time.Millisecond), r.detail))
			}
		}
		if len(late) > 0 {
			t.Errorf("round %d: %d requests failed while %s was stunned, after the failover (%v): %v", round, len(late), vn.n.Name, moved.Round(time.Millisecond), late)
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
		outages, moves = append(outages, vrrpMS(st.outage)), append(moves, m)
		t.Logf("round %d: %s stunned %v: VIP on %s after %d ms; client: %d of %d requests failed, steady after %d ms; after the pause on %s; %d moves; %d step-downs",
			round, vn.n.Name, pause, v.nodes[to].n.Name, vrrpMS(moved), st.failed, st.requests, vrrpMS(st.outage), v.nodes[next].n.Name, m, downs)
		holder = next
	}
	slices.Sort(outages)
	slices.Sort(moves)
	t.Logf("measure: %d pauses of %v: client steady after %d/%d/%d ms (min/median/max); VIP moves per pause %d/%d/%d",
		rounds, pause, outages[0], outages[len(outages)/2], outages[len(outages)-1], moves[0], moves[len(moves)/2], moves[len(moves)-1])
}
