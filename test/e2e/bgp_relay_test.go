//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/test/e2e/lab"
)

// bgpHeldConns is how many connections the open-connections test holds
// through the ingress VIP: about ten per node.
const bgpHeldConns = 30

// bgpRelayWindow is how long after the SIGTERM the leaving node's open
// connections must be served: its peers relay their packets back to it
// for 90 % of its 1-s drain, which begins after the message and the
// withdrawal.
const bgpRelayWindow = 800 * time.Millisecond

// TestBGPOpenConnections (issue 28, finding 3): connections open through a
// node that stops gracefully in BGP mode. A client holds 30 TLS
// connections to the ingress VIP (the routers listen on every address of
// their node, as haproxy does), a request on each every 100 ms. SIGTERM to
// one node's lbconfig withdraws its routes; with the hand-over relay its
// peers send the packets of its connections back to it for its drain, and
// every request started within bgpRelayWindow of the signal is served.
// The same node restarted with 'bgp-relay off' and stopped again shows
// what it costs without: its connections are reset by the nodes the ToR
// now sends them to. The other nodes' connections that the ToR's
// hash-threshold ECMP moves between them are counted, not asserted: no
// node can save them (resilient hashing on the ToR does).
func TestBGPOpenConnections(t *testing.T) {
	b := startBGPLabWith(t, "frr", -1, true, bgpLabOpts{})
	b.watch = netip.PrefixFrom(bgpIngressVIP, 32)
	rounds := envRounds(t, "INFRADNS_BGP_RELAY_ROUNDS", 1)
	type tally struct{ leaving, leavingFailed, others, othersFailed int }
	var on, off []tally
	for r := range rounds {
		for _, relay := range []bool{true, false} {
			i := r % len(b.nodes)
			st := b.openConnectionsRound(fmt.Sprintf("hold-%d-%v", r, relay), i, relay)
			tl := tally{st.leaving, st.leavingFailed, st.others, st.othersFailed}
			mode := "relay on"
			if relay {
				on = append(on, tl)
			} else {
				mode = "relay off"
				off = append(off, tl)
			}
			t.Logf("measure: %s, SIGTERM %s (round %d): %d of its %d open connections failed within %v; %d of the other nodes' %d (ToR rehash)",
				mode, b.nodes[i].n.Name, r+1, st.leavingFailed, st.leaving, bgpRelayWindow, st.othersFailed, st.others)
			if relay && st.leavingFailed > 0 {
				t.Errorf("relay on: %d of %d connections of the leaving node %s failed within %v of its SIGTERM: %v",
					st.leavingFailed, st.leaving, b.nodes[i].n.Name, bgpRelayWindow, st.errs)
			}
			if st.hung > 0 {
				// The relay must not turn the reset of a connection the ToR
				// moved between the other nodes into a silent drop.
				t.Errorf("%s: %d of the other nodes' connections timed out instead of being reset: %v", mode, st.hung, st.errs)
			}
			if !relay && st.leavingFailed == 0 {
				t.Errorf("relay off: none of the %d connections of the leaving node %s failed: the test cannot tell the relay's work", st.leaving, b.nodes[i].n.Name)
			}
		}
	}
	sum := func(ts []tally) string {
		var a tally
		for _, x := range ts {
			a.leaving += x.leaving
			a.leavingFailed += x.leavingFailed
			a.others += x.others
			a.othersFailed += x.othersFailed
		}
		return fmt.Sprintf("leaving node's connections failed %d of %d; other nodes' %d of %d", a.leavingFailed, a.leaving, a.othersFailed, a.others)
	}
	t.Logf("SUMMARY open connections at a BGP graceful stop, %d rounds: relay on: %s; relay off: %s", rounds, sum(on), sum(off))
}

type openConnStats struct {
	leaving, leavingFailed, others, othersFailed int
	// hung: the other nodes' connections whose request timed out instead
	// of being reset.
	hung int
	errs []string
}

// openConnectionsRound opens bgpHeldConns connections, stops node i's
// lbconfig with SIGTERM (its relay on or off since its last start) and
// counts the connections whose requests failed within bgpRelayWindow, then
// brings the node back with the relay on.
func (b *bgpLab) openConnectionsRound(name string, i int, relay bool) openConnStats {
	t := b.t
	t.Helper()
	bn := b.nodes[i]
	if bn.relayOff == relay {
		// Restart the node with the relay as asked.
		b.restartCoreDNS(i, !relay)
	}
	addr := netip.AddrPortFrom(bgpIngressVIP, bgpRouterPort).String()
	hold := b.lab.Client().Start(name, []string{b.fakeapi, "hold", "-addr", addr, "-conns", fmt.Sprint(bgpHeldConns), "-interval", "100ms", "-timeout", "1s"})
	defer func() { _ = hold.Kill() }()
	// Every connection served, and by whom: the router answers with its
	// node's name.
	on := map[string]string{}
	lab.Eventually(t, 20*time.Second, 50*time.Millisecond, "every held connection served", func() error {
		if hold.Exited() {
			return fmt.Errorf("hold exited: %v\n%s", hold.Err(), lab.Tail(hold.LogPath, 10))
		}
		for _, r := range parseFakeAPI(hold.Log()) {
			if r.ok {
				on[r.local] = r.detail[strings.LastIndex(r.detail, "_")+1:]
			}
		}
		if len(on) < bgpHeldConns {
			return fmt.Errorf("%d of %d connections served", len(on), bgpHeldConns)
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	if err := bn.coredns.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	drop := b.waitDrop(name+": "+bn.n.Name+"'s route withdrawn", t0, 2)
	// Until a request started at the window's end has failed or timed
	// out (hold's 1-s timeout).
	time.Sleep(time.Until(t0.Add(bgpRelayWindow + 1200*time.Millisecond)))
	failed := map[string]bool{}
	var st openConnStats
	for _, r := range parseFakeAPI(hold.Log()) {
		if r.ok || r.start.Before(t0) || r.start.After(t0.Add(bgpRelayWindow)) {
			continue
		}
		if !failed[r.local] {
			st.errs = append(st.errs, on[r.local]+": "+r.detail)
			if on[r.local] != bn.n.Name && strings.Contains(r.detail, "timeout") {
				st.hung++
			}
		}
		failed[r.local] = true
	}
	for local, node := range on {
		if node == bn.n.Name {
			st.leaving++
			if failed[local] {
				st.leavingFailed++
			}
		} else {
			st.others++
			if failed[local] {
				st.othersFailed++
			}
		}
	}
	t.Logf("%s: route withdrawn at the ToR %d ms after the SIGTERM; %s's log:\n%s", name, drop.Milliseconds(), bn.n.Name, lab.Tail(bn.coredns.LogPath, 8))
	if st.leaving == 0 {
		t.Fatalf("%s: no connection through %s among %v", name, bn.n.Name, on)
	}
	// Back, with the relay on.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = bn.coredns.Wait(ctx)
	bn.relayOff = false
	b.startCoreDNS(i)
	b.waitNextHops(name+": "+bn.n.Name+" back", 3)
	return st
}

// restartCoreDNS restarts node i's lbconfig with the relay off or on and
// waits for its routes.
func (b *bgpLab) restartCoreDNS(i int, relayOff bool) {
	bn := b.nodes[i]
	if err := bn.coredns.Signal(syscall.SIGTERM); err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = bn.coredns.Wait(ctx)
	bn.relayOff = relayOff
	b.startCoreDNS(i)
	b.waitNextHops(bn.n.Name+" restarted", 3)
}
