package lbconfig

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/vrrp"
)

// DefaultGuardWindow is how long the plugin listens for other VRRP routers
// before it first writes keepalived's configuration: three adverts of a
// router at keepalived's default 1 s interval.
const DefaultGuardWindow = 3 * time.Second

// guard listens for VRRP adverts on the VRRP interface and holds the first
// keepalived write back while another router uses our IDs (OpenShift's most
// reported failure: two clusters on one LAN with the same router ID). Once
// keepalived runs with our configuration, a clash no longer withdraws it
// (that would take the VIP down); it is logged and exported as a metric.
// Every advert it reads is judged once by its Link, which also feeds heard
// and the hand-over relay with the peers' adverts only.
type guard struct {
	g       vrrp.Guard
	iface   string
	claimed atomic.Bool
	// open is set when the reader cannot run (no CAP_NET_RAW, no such
	// interface): nothing can be detected, so nothing is held back.
	open atomic.Bool
	// heard tells the VIP checker when another node holds a VIP.
	heard vrrp.Heard
	own   ownAddrs
	link  vrrp.Link
}

// newGuard listens on the model's interface; set link.Resigned before run
// to hear the peers' resignations.
func newGuard(m *cluster.Model, window time.Duration) *guard {
	gd := &guard{g: vrrp.Guard{Window: window, Expiry: 10 * window}, iface: m.Interface()}
	gd.own.iface = gd.iface
	gd.heard.Own = gd.own.has
	gd.link = vrrp.Link{
		Cluster:   lb.Instances(m.Name(), m.Groups()),
		Guard:     &gd.g,
		Heard:     &gd.heard,
		Own:       gd.own.has,
		Neighbors: vrrp.KernelNeighbors(gd.iface),
		Verdict:   func(v vrrp.LinkVerdict) { vrrpAdverts.WithLabelValues(v.String()).Inc() },
	}
	return gd
}

// ownAddrs caches the interface's addresses for a second: adverts arrive
// ten times a second per group, and each would otherwise list them.
type ownAddrs struct {
	iface string
	mu    sync.Mutex
	at    time.Time
	addrs []netip.Addr
}

func (o *ownAddrs) has(a netip.Addr) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if now := time.Now(); now.Sub(o.at) > time.Second {
		o.addrs, o.at = interfaceAddrs(o.iface), now
	}
	for _, x := range o.addrs {
		if x == a.Unmap() {
			return true
		}
	}
	return false
}

// run listens until ctx ends and reports clashes every few seconds; the
// returned func waits for it.
func (gd *guard) run(ctx context.Context) (wait func()) {
	gd.g.Start(time.Now())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		r := &vrrp.Reader{
			Interface: gd.iface,
			Handle:    func(o vrrp.Observation) { gd.link.Observe(o, time.Now()) },
			Invalid:   func(error) { vrrpAdverts.WithLabelValues("invalid").Inc() },
		}
		if err := r.Run(ctx); err != nil {
			log.Warningf("vrrp guard off, cannot listen for other routers: %v", err)
			gd.open.Store(true)
		}
	}()
	go func() {
		defer wg.Done()
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		reported := map[string]bool{}
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := map[string]bool{}
			counts := map[string]float64{}
			for _, c := range gd.g.Conflicts(time.Now()) {
				s := c.String()
				now[s] = true
				counts[c.Kind.String()]++
				if !reported[s] {
					log.Warningf("vrrp %v", c)
				}
			}
			reported = now
			for _, k := range []vrrp.ConflictKind{vrrp.ForeignAddresses, vrrp.VIPUnderOtherID, vrrp.UnknownPeer} {
				vrrpConflicts.WithLabelValues(k.String()).Set(counts[k.String()])
			}
		}
	}()
	return wg.Wait
}

// gate is the controller's Gate: keepalived waits for a clean verdict
// until its first write.
func (gd *guard) gate(k lb.Kind, p lb.Plan) error {
	gd.g.SetInstances(p.VRRPInstances(), interfaceAddrs(gd.iface), p.Peers())
	groups := make([]vrrp.LinkGroup, 0, len(p.Groups))
	for _, g := range p.Groups {
		groups = append(groups, vrrp.LinkGroup{VRID: g.VRID, VIPs: g.VIPs, Peers: g.Peers})
	}
	gd.link.SetGroups(groups)
	if k != lb.Keepalived || gd.claimed.Load() || gd.open.Load() {
		return nil
	}
	if err := gd.g.Verdict(time.Now()); err != nil {
		return err
	}
	gd.claimed.Store(true)
	return nil
}

func interfaceAddrs(name string) []netip.Addr {
	ps, err := vrrp.InterfacePrefixes(name)
	if err != nil {
		return nil
	}
	out := make([]netip.Addr, len(ps))
	for i, p := range ps {
		out[i] = p.Addr()
	}
	return out
}
