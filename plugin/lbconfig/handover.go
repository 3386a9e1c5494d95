package lbconfig

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/time/rate"

	"github.com/infradns/infradns/internal/bgp"
	"github.com/infradns/infradns/internal/ecmprelay"
	"github.com/infradns/infradns/internal/lb"
)

// handOver is BGP mode's hand-over relay (ecmprelay): the connections open
// through this node survive its graceful stop, and those of a peer that
// leaves are sent back to it. One per process, like the announcer it
// serves: made with it, closed after its goodbye (the drain, while this
// node still takes relayed packets for the VIPs it holds on lo).
type handOver interface {
	Update(ecmprelay.Plan, []netip.Addr) error
	Leave(ctx context.Context, vips []netip.Addr, d time.Duration) (answered, peers int)
	Close() error
}

// newHandOver makes the real relay; tests that run lbconfig in this
// process's namespace replace it.
var newHandOver = realHandOver

func realHandOver() handOver {
	return &ecmprelay.Relay{
		Relayed: func(e ecmprelay.Entry, from netip.Addr) {
			handoverRelays.WithLabelValues("started").Inc()
			log.Infof("%s left by %s: its open connections' packets go back to it for %s", e.VIP, from, e.For)
		},
		Failed: func(err error) {
			handoverRelays.WithLabelValues("failed").Inc()
			if relayLog.Allow() {
				log.Warningf("hand-over relay: %v", err)
			}
		},
	}
}

// relayLog lets a failure through every 10 s at most: anyone can send the
// control port a message, and each refused one fails.
var relayLog = rate.NewLimiter(rate.Every(10*time.Second), 1)

// relayPlan is the relay a plan gives this node: to every other node of
// its groups, for the groups' VIPs; nothing with off.
func relayPlan(p lb.Plan, off bool) (ecmprelay.Plan, []netip.Addr, error) {
	if off {
		return ecmprelay.Plan{}, nil, nil
	}
	var peers, vips []netip.Addr
	for _, g := range p.Groups {
		peers = append(peers, g.Peers...)
		for _, v := range g.VIPs {
			if !slices.Contains(vips, v) {
				vips = append(vips, v)
			}
		}
	}
	rp, err := ecmprelay.NewPlan(p.NodeIPs, peers)
	return rp, vips, err
}

// updateRelay gives the process's relay this instance's plan; an error is
// logged when it differs from the last one (a plan comes at every change).
func (l *LBConfig) updateRelay(p lb.Plan) {
	h := sharedRelay()
	if h == nil {
		return
	}
	rp, vips, err := relayPlan(p, l.noRelay)
	if err == nil {
		err = h.Update(rp, vips)
	}
	shared.Lock()
	defer shared.Unlock()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg != shared.relayErr {
		if err != nil {
			log.Errorf("hand-over relay: %v", err)
		} else if shared.relayErr != "" {
			log.Infof("hand-over relay: in place again (%d peers)", len(rp.Peers))
		}
		shared.relayErr = msg
	}
}

func sharedRelay() handOver {
	shared.Lock()
	defer shared.Unlock()
	return shared.relay
}

// leaving tells the peers this node is about to withdraw vips, which it
// holds for held more (the announcer's Leaving).
func leaving(ctx context.Context, vips []netip.Addr, held time.Duration) {
	h := sharedRelay()
	if h == nil {
		return
	}
	// The peers' entries end before the VIPs leave lo, so nothing is
	// relayed to a node that would route it back.
	d := held * 9 / 10
	answered, peers := h.Leave(ctx, vips, d)
	if peers == 0 {
		return
	}
	if answered < peers {
		log.Warningf("leaving %v: %d of %d peers answered within %s; the others reset this node's open connections they get", vips, answered, peers, bgp.LeaveWait)
		return
	}
	log.Infof("leaving %v: %d peers send this node's open connections back to it for %s", vips, peers, d)
}
