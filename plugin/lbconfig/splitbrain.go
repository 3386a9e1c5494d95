package lbconfig

import (
	"bytes"
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/infradns/infradns/internal/atomicfile"
	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/vrrp"
)

// splitInterval is how often the split-brain check asks who has the VIPs
// this node holds: one broadcast ARP request (IPv4) or multicast Neighbor
// Solicitation (IPv6) per held VIP, so a conflict is settled within
// DefaultSplitConfirm + 2 intervals (< 1 s).
const splitInterval = 200 * time.Millisecond

// peerMACAge is how long a peer's MAC, learned from its ARP traffic, counts.
const peerMACAge = 30 * time.Second

// splitCheck finds a second holder of a VIP that VRRP cannot see (its
// adverts are dropped between the two nodes while unicast flows) by asking
// the link who has the VIPs this node holds (ARP, Neighbor Discovery), and
// steps a group down by the rule of vrrp.SplitBrain through the group's
// split file.
type splitCheck struct {
	iface string
	model *cluster.Model
	heard *vrrp.Heard
	table vrrp.NeighborTable
	arp   *vrrp.ARPConn // nil when it cannot run
	ndp   *vrrp.NDPConn // nil when it cannot run (IPv6 off)

	live *liveness
	// relay, when set, takes the connections of a peer that announces a
	// VIP of its groups (see announced).
	relay *vrrp.Relay

	mu     sync.Mutex
	groups []splitGroup
}

type splitGroup struct {
	name, path  string
	vips, peers []netip.Addr
	// health is the URL of the group's check, whose port and path a
	// peer's liveness is probed on (cluster.HealthNone: not probed).
	health string
}

func newSplitCheck(m *cluster.Model, heard *vrrp.Heard) *splitCheck {
	// Every group's series exists at 0 from the start, for alerts and
	// dashboards; one already stepped down (a reload) keeps its 1.
	for _, g := range m.Groups() {
		if len(g.VIPs) > 0 {
			splitSteppedDown.WithLabelValues(g.Name)
		}
	}
	return &splitCheck{iface: m.Interface(), model: m, heard: heard, live: newLiveness()}
}

// update takes the groups of a new plan: those with VRRP instances here.
func (sc *splitCheck) update(p lb.Plan) {
	var gs []splitGroup
	for _, g := range p.Groups {
		sg := splitGroup{name: g.Name, path: lb.SplitPath(sc.model, g.Name), health: sc.model.HealthURL(g.Check)}
		sg.vips = unmapped(g.VIPs)
		sg.peers = unmapped(g.Peers)
		if len(sg.vips) > 0 && slices.ContainsFunc(p.TrackFiles, func(t lb.TrackFile) bool { return t.Split && t.Path == sg.path }) {
			gs = append(gs, sg)
		}
	}
	var watch []netip.Addr
	for _, g := range gs {
		watch = append(append(watch, g.vips...), g.peers...)
	}
	sc.table.Watch(watch)
	sc.mu.Lock()
	sc.groups = gs
	sc.mu.Unlock()
}

func unmapped(as []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, len(as))
	for i, a := range as {
		out[i] = a.Unmap()
	}
	return out
}

// run checks until ctx ends; the returned func waits for it.
func (sc *splitCheck) run(ctx context.Context) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		var self vrrp.MAC
		var wg sync.WaitGroup
		if c, err := vrrp.OpenARP(sc.iface, &sc.table); err != nil {
			log.Warningf("split-brain check off for IPv4 VIPs, cannot send or read ARP: %v", err)
		} else {
			sc.arp, self = c, c.MAC()
			c.Announced = sc.announced
			wg.Go(func() {
				if err := c.Run(ctx); err != nil {
					log.Warningf("split-brain check: %v", err)
				}
			})
		}
		if c, err := vrrp.OpenNDP(sc.iface, &sc.table); err != nil {
			log.Warningf("split-brain check off for IPv6 VIPs, cannot send or read neighbor discovery: %v", err)
		} else {
			sc.ndp, self = c, c.MAC()
			c.Announced = sc.announced
			wg.Go(func() {
				if err := c.Run(ctx); err != nil {
					log.Warningf("split-brain check: %v", err)
				}
			})
		}
		if sc.arp != nil || sc.ndp != nil {
			sc.loop(ctx, self)
		}
		wg.Wait()
	}()
	return func() { <-done }
}

// announced is the ARP and NDP readers' hook: a peer of a group has just
// announced one of its VIPs, which this node holds (vrrp.Relay.Announced
// says why that starts the hand-over relay to it). The peer is known by
// the MAC it answered for its own address with; a MAC no peer has used is
// a stranger, never relayed to.
func (sc *splitCheck) announced(vip netip.Addr, mac vrrp.MAC) {
	if sc.relay == nil {
		return
	}
	vip = vip.Unmap()
	now := time.Now()
	sc.mu.Lock()
	groups := sc.groups
	sc.mu.Unlock()
	for _, g := range groups {
		if !slices.Contains(g.vips, vip) {
			continue
		}
		for _, p := range g.peers {
			if p.Is6() != vip.Is6() || !slices.Contains(sc.table.Since(p, now.Add(-peerMACAge)), mac) {
				continue
			}
			// Only the holder gets the clients' packets: a backup hears
			// every takeover's announcements and has nothing to relay.
			if present, _ := vrrp.InterfacePrefixes(sc.iface); !holdsAny(present, []netip.Addr{vip}) {
				return
			}
			if sc.relay.Announced(vip, p) {
				handoverRelays.WithLabelValues("started").Inc()
				log.Infof("%s announced by %s (%s), which holds it or held it a moment ago: its open connections' packets go back to it for %s after its last announcement",
					vip, p, mac, vrrp.DefaultRelay)
			}
			return
		}
	}
}

// ask asks the link who has a (an unspecified sender: an ARP probe).
func (sc *splitCheck) ask(sender, a netip.Addr) {
	switch {
	case a.Is4() && sc.arp != nil:
		_ = sc.arp.Ask(sender, a)
	case a.Is6() && sc.ndp != nil:
		_ = sc.ndp.Ask(a)
	}
}

// announce tells the link that we have vip (gratuitous ARP, unsolicited NA).
func (sc *splitCheck) announce(vip netip.Addr) {
	switch {
	case vip.Is4() && sc.arp != nil:
		_ = sc.arp.Announce(vip)
	case vip.Is6() && sc.ndp != nil:
		_ = sc.ndp.Announce(vip)
	}
}

// splitAnswerWait is how long a check waits for the answers to the
// requests it has just sent before it judges: on a LAN they come within a
// millisecond or two, and judging in the same check saves an interval.
const splitAnswerWait = 20 * time.Millisecond

func (sc *splitCheck) loop(ctx context.Context, self vrrp.MAC) {
	t := time.NewTicker(splitInterval)
	defer t.Stop()
	states := map[string]*vrrp.SplitBrain{}
	asked := map[netip.Addr]time.Time{}
	// When a peer that had to yield stops claiming our VIP, clients that
	// followed its gratuitous ARPs still send to its MAC, where the VIP is
	// gone: point them here at once and every check for a second
	// (keepalived's own refresh comes only every vrrp_garp_master_refresh).
	// Not while the contest lasts: flipping the clients back and forth
	// between two holders breaks their connections.
	garpUntil := map[string]time.Time{}
	contested := map[string]bool{}
	// heldSince: when this node last took each group over. A peer's health
	// answer from before that says nothing about the peer now: a backup
	// that had probed the holder just before the holder paused took the
	// group over and stepped down for the paused holder on that answer
	// (lab: 3 of 5 runs of TestVRRPPausedHolder right after
	// TestVRRPNemesis, the paused node being the one that took over in the
	// round before).
	heldSince := map[string]time.Time{}
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		sc.mu.Lock()
		groups := sc.groups
		sc.mu.Unlock()
		present, _ := vrrp.InterfacePrefixes(sc.iface)
		held := func(g splitGroup) bool { return holdsAny(present, g.vips) }
		// Ask first, judge a moment later on what came since the last check.
		sender := nodeIPv4(present, groups)
		asking := false
		for _, g := range groups {
			if st := states[g.name]; held(g) || (st != nil && st.Down()) {
				asking = true
				for _, v := range g.vips {
					sc.ask(sender, v)
				}
			}
		}
		if asking {
			select {
			case <-ctx.Done():
				return
			case <-time.After(splitAnswerWait):
			}
		}
		seen := map[string]bool{}
		for _, g := range groups {
			seen[g.name] = true
			st := states[g.name]
			if st == nil {
				st = &vrrp.SplitBrain{}
				states[g.name] = st
			}
			peerMACs := map[vrrp.MAC]bool{}
			peerAddr := map[vrrp.MAC]netip.Addr{}
			for _, p := range g.peers {
				for _, m := range sc.table.Since(p, now.Add(-peerMACAge)) {
					peerMACs[m] = true
					peerAddr[m] = p
				}
			}
			isHeld := held(g)
			if !isHeld {
				delete(heldSince, g.name)
			} else if _, ok := heldSince[g.name]; !ok {
				heldSince[g.name] = now
			}
			since := now.Add(-liveFresh)
			if hs, ok := heldSince[g.name]; ok && hs.After(since) {
				since = hs
			}
			in := vrrp.SplitInput{Self: self, Held: isHeld, HeardFrom: func(since time.Time, macs []vrrp.MAC, vips []netip.Addr) bool {
				return sc.heardFrom(vips, since, macs)
			}, Liveness: func(m vrrp.MAC) vrrp.Liveness {
				return sc.live.after(ctx, g.health, peerAddr[m], now, since)
			}}
			unknown := false
			for _, v := range g.vips {
				for _, m := range sc.table.Since(v, last) {
					in.Claims = append(in.Claims, vrrp.Claim{VIP: v, MAC: m, Peer: peerMACs[m]})
					unknown = unknown || !peerMACs[m]
				}
			}
			ev := st.Step(in, now)
			sc.report(g, ev, in)
			losing := in.Held && slices.ContainsFunc(in.Claims, func(c vrrp.Claim) bool { return c.Peer && bytes.Compare(c.MAC[:], self[:]) > 0 })
			if (contested[g.name] && !losing) || ev == vrrp.SplitKept {
				garpUntil[g.name] = now.Add(time.Second)
			}
			contested[g.name] = losing
			if in.Held && !losing && now.Before(garpUntil[g.name]) {
				for _, v := range heldVIPs(present, g.vips) {
					sc.announce(v)
				}
			}
			content := "0\n"
			if st.Down() {
				content = "1\n"
			}
			if _, err := atomicfile.WriteIfChanged(g.path, []byte(content), 0o644); err != nil {
				log.Warningf("split-brain check: %v", err)
			}
			if !in.Held && !st.Down() {
				continue
			}
			// The peers' MACs, to tell a peer's claim from a stranger's: asked
			// every 5 s while we hold, every second while someone we cannot
			// place answers for the VIP.
			every := 5 * time.Second
			if unknown {
				every = time.Second
			}
			for _, p := range g.peers {
				if now.Sub(asked[p]) >= every {
					asked[p] = now
					sc.ask(sender, p)
				}
			}
		}
		for name := range states {
			if !seen[name] {
				delete(states, name)
				delete(garpUntil, name)
				delete(contested, name)
				delete(heldSince, name)
				splitSteppedDown.WithLabelValues(name).Set(0)
			}
		}
		last = now
	}
}

// heardFrom says whether, for each of vips, a router whose MAC is one of
// macs advertised it after since: the frames' sources, as the VRRP link
// reader took them from the peers' adverts.
func (sc *splitCheck) heardFrom(vips []netip.Addr, since time.Time, macs []vrrp.MAC) bool {
	if sc.heard == nil || len(vips) == 0 {
		return false
	}
	for _, v := range vips {
		if !slices.ContainsFunc(sc.heard.MACs(v, since), func(m vrrp.MAC) bool { return slices.Contains(macs, m) }) {
			return false
		}
	}
	return true
}

func (sc *splitCheck) report(g splitGroup, ev vrrp.SplitEvent, in vrrp.SplitInput) {
	if ev == vrrp.SplitNone {
		return
	}
	splitBrainEvents.WithLabelValues(g.name, ev.String()).Inc()
	var others []string
	for _, c := range in.Claims {
		// The peers for a split, the strangers for a foreign claim.
		if c.MAC != in.Self && c.Peer != (ev == vrrp.SplitForeign) && !slices.Contains(others, c.MAC.String()) {
			others = append(others, c.MAC.String())
		}
	}
	switch ev {
	case vrrp.SplitKept:
		log.Warningf("split brain: %s (%v) also held by %v whose VRRP adverts do not reach us; the lowest MAC keeps it: kept here (%s)", g.name, g.vips, others, in.Self)
	case vrrp.SplitStepDown:
		splitSteppedDown.WithLabelValues(g.name).Set(1)
		log.Warningf("split brain: %s (%v) also held by %v whose VRRP adverts do not reach us; the lowest MAC keeps it: stepping down (%s)", g.name, g.vips, others, in.Self)
	case vrrp.SplitResumeHeard:
		splitSteppedDown.WithLabelValues(g.name).Set(0)
		log.Infof("split brain over: %s: the holder's VRRP adverts reach us again; back to BACKUP", g.name)
	case vrrp.SplitResumeQuiet:
		splitSteppedDown.WithLabelValues(g.name).Set(0)
		log.Warningf("split brain over: %s: nobody answers for %v any more; back to BACKUP to take over", g.name, g.vips)
	case vrrp.SplitForeign:
		log.Warningf("%v answers ARP for %s (%v), which this node holds, and is no node of the group: not a VRRP peer, left alone", others, g.name, g.vips)
	case vrrp.SplitKeptDead:
		log.Warningf("%s (%v) also answered for by %v, whose VRRP adverts do not reach us and whose service does not answer (a paused node): kept here (%s)", g.name, g.vips, others, in.Self)
	case vrrp.SplitResumeDead:
		splitSteppedDown.WithLabelValues(g.name).Set(0)
		log.Warningf("split brain over: %s: the holder we stepped down for stopped serving (a paused node); back to BACKUP to take over", g.name)
	}
}

// nodeIPv4 is the sender address of our ARP requests: the interface's first
// IPv4 address that is no VIP (unspecified, an RFC 5227 probe, if none).
func nodeIPv4(present []netip.Prefix, groups []splitGroup) netip.Addr {
	for _, p := range present {
		a := p.Addr()
		if !a.Is4() || a.IsLinkLocalUnicast() {
			continue
		}
		if !slices.ContainsFunc(groups, func(g splitGroup) bool { return slices.Contains(g.vips, a) }) {
			return a
		}
	}
	return netip.IPv4Unspecified()
}

// heldVIPs are those of vips present on the interface. A dual-stack group
// is two keepalived instances, which take over one after the other: an
// announcement for the family not held yet points the clients at a node
// without the address (a SYN lost, a 1-s retry). Seen in the lab with a
// core kept busy: the IPv6 VIP announced 20 ms before the IPv6 instance
// held it.
func heldVIPs(present []netip.Prefix, vips []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, v := range vips {
		if holdsAny(present, []netip.Addr{v}) {
			out = append(out, v)
		}
	}
	return out
}

// holdsAny says whether one of vips is among the interface's addresses.
func holdsAny(present []netip.Prefix, vips []netip.Addr) bool {
	return slices.ContainsFunc(vips, func(v netip.Addr) bool {
		return slices.ContainsFunc(present, func(p netip.Prefix) bool { return p.Addr() == v })
	})
}
