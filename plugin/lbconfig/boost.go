package lbconfig

import (
	"context"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/infradns/infradns/internal/atomicfile"
	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/vrrp"
)

// boostInterval is how often a boosted group is looked at to end its boost;
// a takeover is seen at once, from the address event.
const boostInterval = 200 * time.Millisecond

// holderBoost raises the priority of each group this node takes over for as
// long as the holder it replaced may come back (vrrp.HolderBoost), through
// the group's boost file.
type holderBoost struct {
	iface   string
	silence time.Duration // vrrp.HolderBoost's Silence
	heard   *vrrp.Heard   // nil: no listener, no other router heard
	live    *liveness
	wake    chan struct{}
	// frozen takes a paused peer's apiservers out of this node's haproxy;
	// nil without a runtime path to it (haproxy not reloaded through its
	// master socket).
	frozen *frozenBackends

	mu      sync.Mutex
	groups  []boostGroup
	haproxy lb.HAProxy
}

// boostGroup is a group as the split-brain check sees it, with the boost
// file as its path.
type boostGroup struct {
	splitGroup
	// priority is this node's base priority for the group.
	priority int
	// api: the group's check is haproxy's health frontend, so a peer Dead
	// to it is a paused node, not a slow router.
	api bool
}

// Its probes are its own: the split-brain check must not act on an answer
// the boost asked for before the peer stopped.
func newHolderBoost(m *cluster.Model, heard *vrrp.Heard) *holderBoost {
	for _, g := range m.Groups() {
		if len(g.VIPs) > 0 {
			holderBoosted.WithLabelValues(g.Name)
		}
	}
	hb := &holderBoost{iface: m.Interface(), silence: 2 * m.Spec().VRRP.AdvertInterval, heard: heard, live: newLiveness(), wake: make(chan struct{}, 1)}
	// A probe's answer is acted on at once, not at the next tick: a Dead
	// peer's apiservers leave haproxy up to boostInterval sooner.
	hb.live.answered = hb.changed
	return hb
}

// update takes the groups of a new plan: those with a boost file.
func (hb *holderBoost) update(m *cluster.Model, p lb.Plan) {
	var gs []boostGroup
	for _, g := range p.Groups {
		path := lb.BoostPath(m, g.Name)
		i := slices.IndexFunc(p.TrackFiles, func(t lb.TrackFile) bool { return t.Boost && t.Path == path })
		if i < 0 {
			continue
		}
		j := slices.IndexFunc(p.Instances, func(in lb.Instance) bool { return in.Boost == p.TrackFiles[i].Name })
		if j < 0 {
			continue
		}
		sg := splitGroup{name: g.Name, path: path, health: m.HealthURL(g.Check), vips: unmapped(g.VIPs), peers: unmapped(g.Peers)}
		gs = append(gs, boostGroup{splitGroup: sg, priority: p.Instances[j].Priority, api: g.Check == cluster.CheckAPI})
	}
	hb.mu.Lock()
	hb.groups, hb.haproxy = gs, p.HAProxy
	hb.mu.Unlock()
	hb.changed()
}

// changed asks for a look now (an address came or went on the interface).
func (hb *holderBoost) changed() {
	select {
	case hb.wake <- struct{}{}:
	default:
	}
}

// run looks until ctx ends; the returned func waits for it.
func (hb *holderBoost) run(ctx context.Context) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(boostInterval)
		defer t.Stop()
		states := map[string]*vrrp.HolderBoost{}
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-hb.wake:
			}
			hb.look(ctx, states, time.Now())
		}
	}()
	return func() { <-done }
}

func (hb *holderBoost) look(ctx context.Context, states map[string]*vrrp.HolderBoost, now time.Time) {
	hb.mu.Lock()
	groups, haproxy := hb.groups, hb.haproxy
	hb.mu.Unlock()
	present, err := vrrp.InterfacePrefixes(hb.iface)
	if err != nil {
		return // the next look tries again; nothing is boosted on a guess
	}
	seen := map[string]bool{}
	for _, g := range groups {
		seen[g.name] = true
		st := states[g.name]
		if st == nil {
			st = &vrrp.HolderBoost{Silence: hb.silence}
			states[g.name] = st
		}
		was := st.On()
		in := vrrp.BoostInput{
			Held: holdsAny(present, g.vips),
			HeardSince: func(since time.Time) bool {
				return hb.heard != nil && slices.ContainsFunc(g.vips, func(v netip.Addr) bool { return hb.heard.Since(v, since) })
			},
			// Every peer is asked (no early return): each one found
			// Dead leaves haproxy.
			PeerPaused: func() bool {
				paused := false
				for _, p := range g.peers {
					switch hb.live.after(ctx, g.health, p, now, st.Since()) {
					case vrrp.Live:
						continue
					case vrrp.Dead:
						if g.api {
							hb.frozen.peerDead(ctx, haproxy, p, st.Since())
						}
					}
					paused = true
				}
				return paused
			},
		}
		on := st.Step(in, now)
		value := vrrp.BoostValue(st.Level(), g.priority)
		if _, err := atomicfile.WriteIfChanged(g.path, []byte(strconv.Itoa(value)+"\n"), 0o644); err != nil {
			log.Warningf("holder boost: %v", err)
		}
		if on == was {
			continue
		}
		if on {
			holderBoosted.WithLabelValues(g.name).Set(1)
			log.Infof("holder boost: %s (%v) taken over here: priority raised to %d, then %d, so a paused holder that resumes yields to us", g.name, g.vips, vrrp.FreshPriority, vrrp.SettledPriority)
		} else {
			holderBoosted.WithLabelValues(g.name).Set(0)
			log.Infof("holder boost over: %s: no other holder can come back; base priority again", g.name)
		}
	}
	for name := range states {
		if !seen[name] {
			delete(states, name)
			holderBoosted.WithLabelValues(name).Set(0)
		}
	}
}
