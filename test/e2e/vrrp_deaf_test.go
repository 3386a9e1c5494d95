//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/test/e2e/lab"
)

// TestVRRPDeafBackup: a backup's keepalived misses the live holder's adverts
// (its VRRP process starved, as on the rolling-upgrade lab beside other
// jobs' builds) while lbconfig's listener hears them, so the backup takes
// the VIP from a holder that never stopped. No resignation is sent, so the
// hand-over relay did not start, and a connection open to the holder was
// reset as soon as its packets followed the backup's gratuitous ARP (the
// upgrade test lost one request per run that way). The backup's lbconfig
// now sees that the router it took the VIP from was advertising it until
// just before (vrrp.LiveHolder) and relays that VIP's strays back to it.
//
// The deafness is an nftables drop of the holder's VRRP in the backup's
// input hook: keepalived's socket misses the adverts, lbconfig's packet
// socket (which taps the link before the filter) still hears them. It
// ends 100 ms after the takeover. A connection is held open to the holder
// throughout, one request every 50 ms. Two outcomes, as in the upgrade:
//   - the deaf node ranks below the holder: it yields once it hears it
//     again and the VIP goes back; the held connection must see no failure
//     (without the relay it was reset at the flip: 151-197 ms).
//   - the deaf node outranks the holder: the holder yields to it, keeps its
//     copy on lo for a second, and the VIP stays. The relay serves the held
//     connection for its half second (it then ends, as a connection open
//     through a node that gives its VIP up always does). When lbconfig
//     started it after the address event, the client's first packet after
//     the gratuitous ARP could come first: reset at the flip in 2 of 7 such
//     rounds. The kernel now knows the live holder from its adverts before
//     the takeover (vrrp.Relay.Live): no request may fail in the first
//     400 ms after the takeover.
//
// Rounds alternate: a node above the holder (the first-ranked holder stops
// keepalived gracefully before, to make one), then one below it (there
// always is one after a round of the first kind), so half of them give the
// VIP back and half keep it on the deaf node.
func TestVRRPDeafBackup(t *testing.T) {
	v := startVRRPLab(t, vrrpStatic)
	prio := func(i int) int {
		b, err := os.ReadFile(v.kaConf(i))
		if err != nil {
			t.Fatal(err)
		}
		p, ok := kaPriority(b)
		if !ok {
			t.Fatalf("no priority in %s's keepalived.conf", v.nodes[i].n.Name)
		}
		return p
	}
	timeouts := func(i int) int {
		n := 0
		for _, p := range v.nodes[i].kaAll {
			n += strings.Count(p.Log(), "Receive advertisement timeout")
		}
		return n
	}
	givenBack := 0
	for round, outrank := range []bool{true, false, true, false} {
		holder := v.waitSettled(fmt.Sprintf("round %d: start", round))
		above := func(h int) bool {
			for i := range v.nodes {
				if prio(i) > prio(h) {
					return true
				}
			}
			return false
		}
		if outrank && !above(holder) {
			// The holder ranks first: a graceful stop gives the VIP to
			// another node, which keeps it when the first comes back
			// (nopreempt), so a node outranks the holder.
			v.stopKeepalived(holder)
			holder = v.waitSettled(fmt.Sprintf("round %d: start, the first-ranked node a backup", round))
		}
		v.waitUnboosted(fmt.Sprintf("round %d", round), holder)
		deaf := -1
		for i := range v.nodes {
			if i == holder {
				continue
			}
			if outrank && prio(i) > prio(holder) || !outrank && prio(i) < prio(holder) {
				deaf = i
			}
		}
		if deaf < 0 {
			for i := range v.nodes {
				if i != holder {
					deaf = i
				}
			}
		}
		keeps := prio(deaf) > prio(holder)
		hn, dn := v.nodes[holder], v.nodes[deaf]

		hold := v.lab.Client().Start(fmt.Sprintf("hold-%d", round), []string{v.fakeapi, "hold", "-addr", netip.AddrPortFrom(vrrpVIP, vrrpLBPort).String(), "-interval", "50ms", "-timeout", "2s"})
		lab.Eventually(t, 10*time.Second, 20*time.Millisecond, "the held connection served", func() error {
			if n := strings.Count(hold.Log(), " ok "); n < 3 {
				return fmt.Errorf("%d requests served on it", n)
			}
			return nil
		})
		relaysBefore := strings.Count(dn.coredns.Log(), "(our keepalived missed its adverts)")

		timeoutsBefore := timeouts(deaf)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		table := "infradns_deaf"
		rule := fmt.Sprintf("add table inet %s; add chain inet %s in { type filter hook input priority -300; }; add rule inet %s in ip saddr %s ip protocol 112 drop",
			table, table, table, hn.n.IPv4)
		if res, err := dn.n.Run(ctx, "nft", rule); err != nil {
			cancel()
			t.Fatalf("%s deaf to %s: %v\n%s", dn.n.Name, hn.n.Name, err, res.Stderr)
		}
		t0 := time.Now()
		to, moved := v.waitHolder(fmt.Sprintf("round %d: %s, deaf to %s, takes the VIP", round, dn.n.Name, hn.n.Name), t0, func(i int) bool { return i == deaf })
		time.Sleep(100 * time.Millisecond)
		if _, err := dn.n.Run(ctx, "nft", "delete", "table", "inet", table); err != nil {
			t.Errorf("%s: deaf no more: %v", dn.n.Name, err)
		}
		cancel()
		after := v.waitSettled(fmt.Sprintf("round %d: one holder again", round))
		if n := timeouts(deaf) - timeoutsBefore; n == 0 {
			t.Errorf("round %d: %s's keepalived never timed out: it did not take the VIP from %s", round, dn.n.Name, hn.n.Name)
		}
		if keeps != (after == deaf) {
			t.Errorf("round %d: %s (priority %d) took the VIP from %s (priority %d) and %s holds it now", round, dn.n.Name, prio(deaf), hn.n.Name, prio(holder), v.nodes[after].n.Name)
		}

		time.Sleep(time.Second)
		var failed []string
		served := 0
		for _, r := range parseFakeAPI(hold.Log()) {
			if r.start.Before(t0) {
				continue
			}
			if r.ok {
				served++
				continue
			}
			failed = append(failed, fmt.Sprintf("%v: %s", r.start.Sub(t0).Round(time.Millisecond), r.detail))
		}
		if keeps {
			var early []string
			for _, r := range parseFakeAPI(hold.Log()) {
				if !r.ok && !r.start.Before(t0) && r.start.Sub(t0) < moved+400*time.Millisecond {
					early = append(early, fmt.Sprintf("%v: %s", r.start.Sub(t0).Round(time.Millisecond), r.detail))
				}
			}
			if len(early) > 0 {
				t.Errorf("round %d: the connection held open to %s failed within 400 ms of %s's takeover (%v), while the relay serves it: %v\n%s", round, hn.n.Name, dn.n.Name, moved.Round(time.Millisecond), early, lab.Tail(dn.coredns.LogPath, 15))
			}
		}
		if !keeps {
			givenBack++
			if len(failed) > 0 || hold.Exited() {
				t.Errorf("round %d: the connection held open to %s broke when %s took the VIP from it (%v) and gave it back: %v %v\n%s", round, hn.n.Name, dn.n.Name, moved.Round(time.Millisecond), failed, hold.Err(), lab.Tail(dn.coredns.LogPath, 15))
			}
		}
		if n := strings.Count(dn.coredns.Log(), "(our keepalived missed its adverts)") - relaysBefore; n == 0 {
			t.Errorf("round %d: %s took the VIP from the live %s without starting the relay\n%s", round, dn.n.Name, hn.n.Name, lab.Tail(dn.coredns.LogPath, 15))
		}
		t.Logf("round %d: %s (priority %d) deaf to %s's (%d) adverts: VIP on %s after %d ms, then on %s; held connection: %d requests served since the deafness, failed: %v",
			round, dn.n.Name, prio(deaf), hn.n.Name, prio(holder), v.nodes[to].n.Name, vrrpMS(moved), v.nodes[after].n.Name, served, failed)
		_ = hold.Stop(time.Second)
	}
	if givenBack != 2 {
		t.Errorf("%d rounds gave the VIP back, want 2 (and 2 that keep it on the deaf node)", givenBack)
	}
}
