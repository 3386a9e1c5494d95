package lbconfig

import (
	"context"
	"net/netip"
	"slices"
	"sync"

	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/infradns/infradns/internal/bgp"
	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/lb"
)

var servicesAnnounced = promauto.NewGauge(prometheus.GaugeOpts{
	Namespace: plugin.Namespace,
	Subsystem: pluginName,
	Name:      "services_announced",
	Help:      "Gauge of the Services' load-balancer addresses this node announces (vip-mode bgp, 'services').",
})

// serviceOpts is the 'services' option: announce the addresses of the
// Services of type LoadBalancer of our class (and with no class, isDefault).
type serviceOpts struct {
	isDefault bool
}

// serviceAnnouncer feeds the Services this node may announce to the BGP
// announcer: a source of its own beside the plans, so a Service's change
// renders nothing and a plan leaves the Services alone.
type serviceAnnouncer struct {
	ann  *bgp.Announcer
	node string
	// own are the cluster's API and ingress VIPs: announced by their
	// groups, never for a Service that claims one in its status.
	own []netip.Addr

	mu       sync.Mutex
	svcs     []cluster.LBService
	synced   bool
	excluded bool
	refused  map[netip.Addr]bool // logged once each
}

func (s *serviceAnnouncer) setServices(svcs []cluster.LBService) {
	s.mu.Lock()
	s.svcs, s.synced = svcs, true
	s.mu.Unlock()
	s.push()
}

// setNode follows this node's Node: one labelled
// exclude-from-external-load-balancers (an administrator's drain), or not
// registered (yet), announces no Service, as it holds no VIP group.
func (s *serviceAnnouncer) setNode(n cluster.Node, registered bool) {
	off, why := false, "eligible"
	switch {
	case !registered:
		off, why = true, "not a registered Node"
	case n.Excluded:
		off, why = true, "excluded from load balancers"
	}
	s.mu.Lock()
	changed := s.excluded != off
	s.excluded = off
	s.mu.Unlock()
	if changed {
		log.Infof("Services: %s %s: %s", s.node, why, map[bool]string{true: "announcing none of the Services' addresses", false: "announcing the Services' addresses"}[off])
		s.push()
	}
}

// push hands the announcer what the last state allows. It holds mu to the
// end: the Services' watch and the Node's (setNode) push from two
// goroutines, and a push computed from the older state must not land after
// the newer one.
func (s *serviceAnnouncer) push() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.synced {
		return
	}
	vips := cluster.ServiceVIPs(s.svcs, s.node, s.excluded)
	vips = slices.DeleteFunc(vips, func(a netip.Addr) bool {
		if !slices.Contains(s.own, a) {
			return false
		}
		if !s.refused[a] {
			if s.refused == nil {
				s.refused = map[netip.Addr]bool{}
			}
			s.refused[a] = true
			log.Warningf("Services: %s is a VIP of the cluster: not announced for a Service", a)
		}
		return true
	})
	servicesAnnounced.Set(float64(len(vips)))
	var gs []bgp.Group
	if len(vips) > 0 {
		gs = []bgp.Group{{Name: "services", Check: cluster.CheckServices, VIPs: vips}}
	}
	s.ann.SetServices(gs)
}

// announceServices follows the Services until ctx ends (see
// kube.AnnounceWatcher): the announcer's groups of them stay as they were
// while the API is away.
func (l *LBConfig) announceServices(ctx context.Context, client kube.Client, s *serviceAnnouncer) {
	var wg sync.WaitGroup
	defer wg.Wait()
	if u := l.servicesHealth; u == "" || u == cluster.HealthNone {
		// No check: announced once eligible.
		s.ann.SetHealth(cluster.CheckServices, true)
	} else {
		// What forwards their traffic on this node (kube-proxy's
		// /healthz): failing, every Service's route is withdrawn and the
		// addresses stay held, as for a VIP group's check.
		p := &lb.Prober{URL: u, Interval: lb.DefaultProbeInterval, Rise: 2, Fall: 2,
			Changed: func(ok bool) {
				log.Infof("services health %s: %s", map[bool]string{true: "ok", false: "failing"}[ok], u)
				s.ann.SetHealth(cluster.CheckServices, ok)
			}}
		wg.Go(func() { _ = p.Run(ctx) })
	}
	w := kube.NewAnnounceWatcher(client, kube.AnnounceOptions{
		Class:   cluster.LoadBalancerClass,
		Default: l.services.isDefault,
		Dropped: func(d kube.Drop) {
			droppedValues.WithLabelValues(d.Field, d.Reason).Inc()
			log.Warningf("Services: left out: %s %s %q (%s)", d.Object, d.Field, d.Value, d.Reason)
		},
	})
	w.Run(ctx, s.setServices)
}
