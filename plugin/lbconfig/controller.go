package lbconfig

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/infradns/infradns/internal/bgp"
	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/vrrp"

	"k8s.io/client-go/rest"
)

// Start resolves what the Corefile left to the host (node name, interface,
// templates, API access) and starts the controller. Errors here stop CoreDNS
// from starting, so a wrong option is seen at once, not at the first render.
func (l *LBConfig) Start() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return nil
	}
	ctl, gate, err := l.build()
	if err != nil {
		return err
	}
	// keepalived drops a track_file whose directory is missing when it loads
	// its configuration ("Track file directory ... does not exist -
	// removing"), and the VIP then ignores health: the directory must exist
	// before the first keepalived.conf does. /run is empty after a boot.
	if err := os.MkdirAll(l.model.Spec().TrackDir, 0o755); err != nil {
		return fmt.Errorf("track-dir: %w", err)
	}
	bgpMode := ctl.Model.Mode() == cluster.ModeBGP
	if bgpMode {
		// Settings the speaker cannot start with fail here, at once; the
		// speaker itself follows these settings only once caddy adopts this
		// instance (a failed reload's instance must not replace it).
		if err := checkSpeaker(ctl.Model.Spec().BGP); err != nil {
			return fmt.Errorf("bgp: %w", err)
		}
		// Before the old instance of a reload stops: the announcer, its
		// speaker and sessions carry over (holdAnnouncer).
		holdAnnouncer()
	}
	l.begin()
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.done = make(chan struct{})
	l.holdsAnn = bgpMode
	go func() {
		defer close(l.done)
		select {
		case <-l.adopted:
		case <-ctx.Done():
			return // discarded: never adopted, nothing done
		}
		if bgpMode {
			ann := followAnnouncer(ctx, l.generation(), ctl.Model.Spec().BGP)
			if ann == nil {
				return // stopped, or superseded
			}
			l.ann.Store(ann)
		}
		l.run(ctx, ctl, gate)
	}()
	return nil
}

// Stop stops the controller and waits for it; safe to call more than once.
func (l *LBConfig) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
	l.cancel = nil
	l.end()
	l.ann.Store(nil)
	if l.holdsAnn {
		l.holdsAnn = false
		releaseAnnouncer()
	}
}

// build makes the controller for this node, and the claim gate its plans
// feed and its health checks ask.
func (l *LBConfig) build() (*lb.Controller, *lb.ClaimGate, error) {
	spec := l.model.Spec()
	node, iface, ips := spec.Node, spec.Interface, spec.NodeIPs
	if node == "" {
		// No node in the Corefile (one rendered for a whole pool): the
		// host's name, as kubelet registers it.
		h, err := os.Hostname()
		if err != nil {
			return nil, nil, fmt.Errorf("node name: %w", err)
		}
		if node, err = cluster.HostNodeName(h); err != nil {
			return nil, nil, fmt.Errorf("node name from the host name: %w", err)
		}
	}
	bgpMode := spec.Mode == cluster.ModeBGP
	if bgpMode && (iface == "" || iface == "auto") {
		// The VIPs are local routes on lo, announced over BGP: no VRRP
		// interface to find.
		iface = "lo"
	}
	if iface == "" || iface == "auto" {
		name, found, err := lb.InterfaceFor(spec.APIVIPs[0])
		if err != nil {
			return nil, nil, fmt.Errorf("interface auto: %w", err)
		}
		iface = name
		if ips == nil && spec.VRRP.Unicast {
			ips = found
		}
	}
	if ips == nil && len(spec.StaticBackends) > 0 && !bgpMode {
		// Before the API, this node's rank among the static backends (the
		// control plane) gives it a VRRP priority of its own (Assign).
		ips, _ = lb.OwnAddrs(iface)
	}
	// What the host said is held to the Corefile's rules: a host name that
	// is no Node name must not reach keepalived's router_id.
	m, err := l.model.WithNode(node, iface, ips)
	if err != nil {
		return nil, nil, err
	}

	var texts [2]string
	var outs []lb.Output
	for i, k := range []lb.Kind{lb.Keepalived, lb.HAProxyCfg} {
		o := l.outputs[k]
		if o.path == "" {
			continue
		}
		if o.template != "" {
			b, err := os.ReadFile(o.template)
			if err != nil {
				return nil, nil, fmt.Errorf("%s template: %w", k, err)
			}
			texts[i] = string(b)
		}
		tool := l.tools.Keepalived
		if k == lb.HAProxyCfg {
			tool = l.tools.HAProxy
		}
		if len(l.tools.Wrap) == 0 {
			if _, err := exec.LookPath(cmp.Or(tool, string(k))); err != nil {
				return nil, nil, fmt.Errorf("%s is needed to validate %s: %w", k, o.path, err)
			}
		}
		outs = append(outs, lb.Output{Kind: k, Path: o.path, Reloader: reloader(k, l.reload[k])})
	}
	tpl, err := lb.ParseTemplates(texts[0], texts[1])
	if err != nil {
		return nil, nil, err
	}

	if !l.haveAPI() && len(spec.StaticBackends) == 0 {
		return nil, nil, errors.New("no kubeconfig, no in-cluster config and no static backends: nothing to render from")
	}

	// Every series at 0 from the start: an alert on increase() sees the
	// first failure, and a dashboard finds the series before anything fails.
	for _, o := range outs {
		k := string(o.Kind)
		validationFailures.WithLabelValues(k)
		writesCount.WithLabelValues(k)
		for _, r := range []string{reloadSuccess, reloadFailure, reloadNotRunning} {
			reloadsCount.WithLabelValues(k, r)
		}
	}
	gate := lb.NewClaimGate(m, lb.ClaimDelay)
	ctl := &lb.Controller{
		Model:     m,
		Templates: tpl,
		Validator: l.tools,
		Outputs:   outs,
		Loaded:    &loaded,
		Log:       log,
		Hooks: lb.Hooks{
			Refused: func(error) { refusedCount.Inc() },
			Planned: func(p lb.Plan) {
				gate.Update(p, time.Now())
				if ann := l.announcer(); ann != nil {
					ann.SetGroups(bgpGroups(p))
					l.updateRelay(p)
				}
			},
			Rendered: func() { rendersCount.Inc() },
			Invalid:  func(k lb.Kind, _ error) { validationFailures.WithLabelValues(string(k)).Inc() },
			Written:  func(k lb.Kind) { writesCount.WithLabelValues(string(k)).Inc() },
			Reloaded: func(k lb.Kind, err error) {
				reloadsCount.WithLabelValues(string(k), reloadResult(err)).Inc()
			},
			Succeeded: func(t time.Time) {
				l.applied.Store(true)
				lastSuccess.Set(float64(t.UnixNano()) / 1e9)
			},
		},
	}
	return ctl, gate, nil
}

// run owns the output files for its lifetime. During a CoreDNS reload the new
// instance starts before the old one stops; the per-path lock makes the new
// one wait, so two controllers never write and reload the same files at once.
func (l *LBConfig) run(ctx context.Context, ctl *lb.Controller, gate *lb.ClaimGate) {
	var paths []string
	for _, o := range ctl.Outputs {
		paths = append(paths, o.Path)
	}
	release, err := lockPaths(ctx, l.generation(), paths)
	if err != nil {
		if ctx.Err() == nil {
			log.Errorf("not writing: %v", err)
		}
		return
	}
	defer release()

	if ann := l.announcer(); ann != nil {
		keepAnnouncedSeries(ctl.Model.VIPs())
		defer l.startProbers(ctx, ctl.Model, nil, ann, nil)()
		if l.services == nil {
			// A reload that dropped 'services': the process's announcer
			// must not keep the last instance's.
			ann.SetServices(nil)
			servicesAnnounced.Set(0)
		}
	}
	if _, ok := l.outputs[lb.Keepalived]; ok {
		drainer := newDrainer(ctl.Model)
		drainer.SetStandby(rememberedStandby(ctl.Model), true)
		defer l.startProbers(ctx, ctl.Model, gate, nil, func(vips []netip.Addr, on bool) {
			rememberStandby(vips, on)
			drainer.SetStandby(vips, on)
		})()
		var heard *vrrp.Heard
		var relay *vrrp.Relay
		if l.guardWindow > 0 {
			gd := newGuard(ctl.Model, l.guardWindow)
			var relayDone func()
			relay, relayDone = l.startRelay(ctx, ctl.Model, gd.own.has)
			// Removed before the lock goes: a reloaded instance's tables
			// are never deleted by the instance it replaces.
			defer relayDone()
			gd.link.Resigned = relay.Observe
			defer gd.run(ctx)()
			ctl.Gate = gd.gate
			heard = &gd.heard
		}
		if r := l.reload[lb.Keepalived]; r.method == "pidfile" {
			defer l.startVIPChecker(ctx, ctl.Model, r.path, heard)()
		}
		sc := newSplitCheck(ctl.Model, heard)
		sc.relay = relay
		hb := newHolderBoost(ctl.Model, heard)
		hb.frozen = newFrozenBackends(l.reload[lb.HAProxyCfg])
		if relay != nil {
			drainer.Arrived = liveTakeover(ctl.Model, heard, relay)
		}
		drainer.Changed = hb.changed
		// Its own context: on a process stop it outlives ctx (lingerDrainer).
		drainCtx, stopDrain := context.WithCancel(context.Background())
		waitDrain := startDrainer(drainCtx, drainer)
		defer func() {
			if processStopping.Load() {
				lingerDrainer(drainer)
			}
			stopDrain()
			waitDrain()
		}()
		defer sc.run(ctx)()
		defer hb.run(ctx)()
		gate := ctl.Gate
		ctl.Gate = func(k lb.Kind, p lb.Plan) error {
			sc.update(p)
			hb.update(ctl.Model, p)
			if gate == nil {
				return nil
			}
			return gate(k, p)
		}
	}
	status := &vipStatus{model: ctl.Model, namespace: l.statusNS}
	statusDone := make(chan struct{})
	go func() {
		defer close(statusDone)
		status.run(ctx)
	}()
	defer func() { <-statusDone }()

	if !l.haveAPI() {
		retryLoop(ctx, func() (bool, error) { return false, ctl.Apply(ctx, cluster.Snapshot{}) })
		<-ctx.Done()
		return
	}

	// One apply at a time, and the bootstrap render never after the first
	// snapshot from the API: it checks under the same lock the watcher's
	// handler takes, after the watcher has marked itself synced.
	var applyMu sync.Mutex
	o := kube.NewOptions()
	o.IngressNamespace, o.IngressService = ctl.Model.IngressService()
	o.NodeName = ctl.Model.NodeName()
	o.Dropped = func(d kube.Drop) {
		droppedValues.WithLabelValues(d.Field, d.Reason).Inc()
		log.Warningf("left out of the render: %s %s %q (%s)", d.Object, d.Field, d.Value, d.Reason)
	}
	var w atomic.Pointer[kube.Watcher]
	var wg sync.WaitGroup
	defer wg.Wait()
	if len(ctl.Model.Spec().StaticBackends) > 0 {
		// Bootstrap: render from the static backends until the API answers.
		wg.Add(1)
		go func() {
			defer wg.Done()
			retryLoop(ctx, func() (bool, error) {
				applyMu.Lock()
				defer applyMu.Unlock()
				if ww := w.Load(); ww != nil && ww.HasSynced() {
					return true, nil
				}
				return false, ctl.Apply(ctx, cluster.Snapshot{})
			})
		}()
	}
	client := kube.WaitClient(ctx, l.client, log.Warningf)
	if client == nil {
		return // cancelled
	}
	defer kube.Follow(ctx, client)()
	status.client.Store(&client)
	var svcs *serviceAnnouncer
	if ann := l.announcer(); ann != nil && l.services != nil {
		svcs = &serviceAnnouncer{ann: ann, node: ctl.Model.NodeName(), own: ctl.Model.VIPs()}
		wg.Go(func() { l.announceServices(ctx, client, svcs) })
	}
	watcher := kube.New(client, o)
	w.Store(watcher)
	l.watcher.Store(watcher)
	err = watcher.Run(ctx, func(ctx context.Context, s cluster.Snapshot) error {
		if svcs != nil {
			svcs.setNode(s.Node(ctl.Model.NodeName()))
		}
		applyMu.Lock()
		defer applyMu.Unlock()
		return ctl.Apply(ctx, s)
	})
	if err != nil {
		log.Errorf("watch: %v", err)
	}
}

// retryLoop calls f with backoff (200 ms doubling to 30 s) until it reports
// done, or succeeds, or ctx ends. done without error ends it too.
func retryLoop(ctx context.Context, f func() (done bool, err error)) {
	delay := 200 * time.Millisecond
	for {
		done, err := f()
		if done || err == nil {
			return
		}
		log.Warningf("apply: %v (retry in %s)", err, delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

// startProbers keeps the VIP groups in step with their health checks, one
// prober per check (api, ingress): with VRRP (gate set) it writes the track
// files of every group the check gates and tells standby (the drainer's
// IPv6 copies) each verdict for their VIPs, in BGP mode (ann set) it feeds
// the verdicts to the announcer, which withdraws at once. They stop with
// ctx, and the returned func waits for them.
func (l *LBConfig) startProbers(ctx context.Context, m *cluster.Model, gate *lb.ClaimGate, ann *bgp.Announcer, standby func([]netip.Addr, bool)) (wait func()) {
	var wg sync.WaitGroup
	for _, check := range []string{cluster.CheckAPI, cluster.CheckIngress} {
		url := m.HealthURL(check)
		var paths []string
		var vips []netip.Addr
		gated := false
		for _, g := range m.Groups() {
			if g.Check == check && len(g.VIPs) > 0 {
				gated = true
				vips = append(vips, g.VIPs...)
				if gate != nil {
					paths = append(paths, lb.TrackPath(m, g.Name))
				}
			}
		}
		if !gated {
			continue
		}
		// BGP: the API VIP, every node's second nameserver, waits for the
		// node's own resolver (see resolver-ready).
		awaitResolver := func() {}
		if ann != nil && check == cluster.CheckAPI && l.resolverReady != "" {
			awaitResolver = func() { waitResolver(ctx, l.resolverReady, resolverWait) }
		}
		if url == cluster.HealthNone {
			if ann != nil {
				// No check of ours: eligible is enough to announce.
				wg.Go(func() {
					awaitResolver()
					ann.SetHealth(check, true)
				})
			}
			// Nor a standby copy on lo: without a check nothing says this
			// node serves the VIP (its own connections would meet no
			// listener).
			continue
		}
		what := strings.Join(paths, " ")
		if ann != nil {
			what = "announcements"
		}
		p := &lb.Prober{URL: url, Paths: paths, Interval: lb.DefaultProbeInterval, Rise: 2, Fall: 2,
			Changed: func(ok bool) {
				log.Infof("%s health %s: %s", check, map[bool]string{true: "ok", false: "failing"}[ok], what)
				if ann != nil {
					ann.SetHealth(check, ok)
				}
				if standby != nil {
					standby(vips, ok)
				}
			},
			WriteFailed: func(err error) { log.Warningf("%s health: %v", check, err) },
		}
		if ann != nil {
			p.Stops = func() {
				log.Infof("%s health failing: %s (its daemon stops; the open connections stay served here)", check, what)
				ann.SetStopping(check)
				if standby != nil {
					standby(vips, false)
				}
			}
		}
		if gate != nil {
			p.Open = gate.Open
		}
		if check == cluster.CheckAPI {
			p.Stopping = l.haproxyStopping()
		}
		wg.Go(func() {
			awaitResolver()
			_ = p.Run(ctx)
		})
	}
	return wg.Wait
}

// resolverWait bounds how long a starting lbconfig waits for the node's
// resolver before it holds and announces the API VIP anyway: a resolver
// that never comes up must not take the API's capacity with it.
const resolverWait = 30 * time.Second

// waitResolver returns once url answers 2xx, after limit, or when ctx
// ends, polling every 100 ms.
func waitResolver(ctx context.Context, url string, limit time.Duration) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	logged := false
	for {
		if lb.Passes(ctx, client, url) {
			if logged {
				log.Infof("the node's resolver is ready (%s) after %s: the API VIP may be held and announced", url, time.Since(start).Round(time.Millisecond))
			}
			return
		}
		if !logged {
			log.Infof("the API VIP waits for the node's resolver (%s) before it is held and announced", url)
			logged = true
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				log.Warningf("the node's resolver (%s) is not ready after %s: holding and announcing the API VIP anyway", url, limit)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// haproxyStopping is the file haproxy's pod creates when it is being
// stopped (lb.HAProxyStopping), in the directory of its master socket
// (haproxy's own run directory): "" when haproxy is reloaded another way
// (a pid file may sit in a directory shared with anything).
func (l *LBConfig) haproxyStopping() string {
	r := l.reload[lb.HAProxyCfg]
	if r.method != "socket" {
		return ""
	}
	return filepath.Join(filepath.Dir(r.path), lb.HAProxyStopping)
}

// newDrainer is the drainer of the VIPs of m (see vrrp.Drainer).
func newDrainer(m *cluster.Model) *vrrp.Drainer {
	return &vrrp.Drainer{
		Interface: m.Interface(),
		VIPs:      m.VIPs(),
		Kept: func(p netip.Prefix) {
			log.Infof("%s left %s: kept on lo for %s so clients that still send here are served", p, m.Interface(), vrrp.DefaultDrain)
		},
		Failed: func(p netip.Prefix, err error) { log.Warningf("drain copy of %s on lo: %v", p, err) },
	}
}

// startDrainer keeps each VIP keepalived releases on lo for a second, and
// the IPv6 VIPs on standby there (see vrrp.Drainer); the returned func
// waits for it to stop.
func startDrainer(ctx context.Context, d *vrrp.Drainer) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			err := d.Run(ctx)
			if ctx.Err() != nil {
				return
			}
			log.Warningf("released VIPs are not kept for a drain: %v (retry in 5s)", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
		}
	}()
	return func() { <-done }
}

// lingerDrainer keeps the drainer running, when the process stops, until
// keepalived has released the VIPs this node holds and their copies on lo
// have drained (vrrp.LingerOver): kubelet stops the lbconfig and keepalived
// pods at the same time, and the rolling-upgrade test lost a connection
// when lbconfig's drainer was gone 106 ms before keepalived's release.
func lingerDrainer(d *vrrp.Drainer) {
	start := time.Now()
	said := false
	for {
		held, draining := d.Holding()
		if vrrp.LingerOver(held, draining, time.Since(start), vrrp.StopHoldWait) {
			if said {
				log.Infof("stopping: drain copies done after %v", time.Since(start).Round(time.Millisecond))
			}
			return
		}
		if !said {
			said = true
			log.Infof("stopping: VIPs kept on lo while keepalived releases them (at most %v, then %v each)", vrrp.StopHoldWait, vrrp.DefaultDrain)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startRelay keeps the hand-over relay (see vrrp.Relay) until ctx ends: the
// guard's listener feeds it the resignations it hears. Without nft or
// CAP_NET_ADMIN the hand-overs still work, with a reset for the connections
// open at that moment. The returned func waits for its tables to go.
func (l *LBConfig) startRelay(ctx context.Context, m *cluster.Model, own func(netip.Addr) bool) (*vrrp.Relay, func()) {
	advert := m.Spec().VRRP.AdvertInterval
	r := &vrrp.Relay{
		Interface: m.Interface(),
		VIPs:      m.VIPs(),
		// The LiveHolder window: a router silent for longer has stopped,
		// and its connections are gone with it.
		Live: lb.MasterDown(advert) - advert,
		Own:  own,
		Relayed: func(vip, to netip.Addr) {
			handoverRelays.WithLabelValues("started").Inc()
			log.Infof("%s resigned by %s: its open connections' packets go back to it for %s", vip, to, vrrp.DefaultRelay)
		},
		Failed: func(err error) {
			handoverRelays.WithLabelValues("failed").Inc()
			log.Warningf("hand-over relay: %v", err)
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(ctx); err != nil {
			log.Warningf("hand-over relay off: %v", err)
		}
	}()
	return r, func() { <-done }
}

// liveTakeover starts the hand-over relay for each VIP this node takes
// from a router still advertising it (vrrp.LiveHolder: this node's
// keepalived missed its adverts, the guard's listener did not): no
// resignation came, so nothing else would pass that router's open
// connections back to it. For DefaultRelay, as after a resignation: the
// address event can come before the listener has read a resignation sent
// a few milliseconds earlier (the upgrade lab: one graceful hand-over was
// taken for this), and the resigner's copy on lo ends a drain after it.
func liveTakeover(m *cluster.Model, heard *vrrp.Heard, relay *vrrp.Relay) func(netip.Prefix) {
	advert := m.Spec().VRRP.AdvertInterval
	down := lb.MasterDown(advert)
	return func(p netip.Prefix) {
		v, now := p.Addr(), time.Now()
		from, last, ok := heard.Latest(v)
		if !ok || !vrrp.LiveHolder(last, now, down, advert) {
			return
		}
		if relay.TakenOver(v, from, vrrp.DefaultRelay) {
			handoverRelays.WithLabelValues("started").Inc()
			log.Infof("%s taken over from %s, which advertised it %v before (our keepalived missed its adverts): its open connections' packets go back to it for %s",
				v, from, now.Sub(last).Round(time.Millisecond), vrrp.DefaultRelay)
		}
	}
}

// startVIPChecker removes VIPs a dead keepalived left on the interface
// (only when keepalived's pid file tells whether it runs) once another node
// advertises them (heard, from the VRRP guard's listener; nil: at once);
// the returned func waits for it to stop.
func (l *LBConfig) startVIPChecker(ctx context.Context, m *cluster.Model, pidfile string, heard *vrrp.Heard) (wait func()) {
	iface := m.Interface()
	v := &vrrp.VIPChecker{
		Interface: iface,
		VIPs:      m.VIPs(),
		Alive:     vrrp.PidAlive(pidfile, "keepalived"),
		// Dead for 3 checks 50 ms apart, and gone as soon as a backup has
		// taken over (~270 ms). A stale VIP on the dead node answers ARP
		// beside the new holder; removed only after 3 checks 1 s apart,
		// clients followed it for 1.3 s in 1 of 20 crash rounds (lab). A
		// check is two small file reads.
		Interval: 50 * time.Millisecond,
		Confirm:  3,
		Removed: func(p netip.Prefix, err error) {
			if err != nil {
				log.Errorf("keepalived is not running (%s) but %s is on %s and cannot be removed: %v", pidfile, p, iface, err)
				return
			}
			staleVIPsRemoved.Inc()
			log.Warningf("keepalived is not running (%s): removed %s it left on %s", pidfile, p, iface)
		},
	}
	if heard != nil {
		v.HeldElsewhere, v.Wake = heard.Since, heard.Wake()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = v.Run(ctx)
	}()
	return func() { <-done }
}

// followKubeconfig is the client of the kubeconfig at path, rebuilt when
// the file or one it names changes (the caller runs it): a pod may read it
// mid-edit, and its credentials are rotated with no restart.
func followKubeconfig(path, agent string) (kube.Client, error) {
	r, err := kube.NewReloading(path, agent, log.Infof, log.Warningf)
	if err != nil {
		return nil, err
	}
	kubeClient.Store(r)
	return r, nil
}

// haveAPI says whether an API server can be reached in principle: a
// kubeconfig option, an in-cluster environment or $KUBECONFIG.
func (l *LBConfig) haveAPI() bool {
	return l.newClient != nil || l.kubeconfig != "" || os.Getenv("KUBERNETES_SERVICE_HOST") != "" || os.Getenv("KUBECONFIG") != ""
}

func (l *LBConfig) client() (kube.Client, error) {
	if l.newClient != nil {
		return l.newClient()
	}
	const agent = "infradns-lbconfig"
	if l.kubeconfig != "" {
		return followKubeconfig(l.kubeconfig, agent)
	}
	// In a pod, client-go re-reads the service account's token itself.
	rc, err := rest.InClusterConfig()
	if errors.Is(err, rest.ErrNotInCluster) {
		if p := os.Getenv("KUBECONFIG"); p != "" {
			return followKubeconfig(p, agent)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("in-cluster config: %w", err)
	}
	rc.UserAgent = agent
	return kube.NewForConfig(rc)
}

func reloader(k lb.Kind, r reloadSpec) lb.Reloader {
	switch r.method {
	case "pidfile":
		// Signalled only when the pid is still the daemon's (its name,
		// and started before it wrote the file).
		sig, name := syscall.SIGHUP, "keepalived"
		if k == lb.HAProxyCfg {
			sig, name = syscall.SIGUSR2, "haproxy" // the master in -W mode
		}
		return lb.SignalPidfile{Path: r.path, Signal: sig, Name: name}
	case "socket":
		return lb.MasterSocket{Path: r.path}
	case "command":
		return lb.Command{Argv: r.argv}
	}
	return nil
}

// loaded is what the daemons are known to run, for the whole process: a
// Corefile reload's new controller reloads nothing already loaded, and
// reloads what the old one wrote but could not reload; a new process knows
// nothing and reloads each daemon once (lb.Loaded).
var loaded lb.Loaded

// pathLock is one output path's lock, and the newest generation that held it.
type pathLock struct {
	ch  chan struct{}
	gen uint64
}

var (
	locksMu sync.Mutex
	locks   = map[string]*pathLock{}
)

// errSuperseded: a newer lbconfig instance has owned the path already.
var errSuperseded = errors.New("a newer lbconfig instance has written these files: this one is stale")

// lockPaths takes the lock of every path for generation gen. A generation
// older than one that held a path never gets it: what a newer instance
// wrote is never overwritten by a stale one.
func lockPaths(ctx context.Context, gen uint64, paths []string) (func(), error) {
	paths = slices.Clone(paths)
	slices.Sort(paths) // one order for everyone: no deadlock between instances
	var held []*pathLock
	release := func() {
		for _, pl := range held {
			<-pl.ch
		}
	}
	for _, p := range paths {
		locksMu.Lock()
		pl, ok := locks[p]
		if !ok {
			pl = &pathLock{ch: make(chan struct{}, 1)}
			locks[p] = pl
		}
		locksMu.Unlock()
		select {
		case pl.ch <- struct{}{}:
			held = append(held, pl)
		case <-ctx.Done():
			release()
			return nil, ctx.Err()
		}
		locksMu.Lock()
		stale := gen < pl.gen
		if !stale {
			pl.gen = gen
		}
		locksMu.Unlock()
		if stale {
			release()
			return nil, fmt.Errorf("%s: %w", p, errSuperseded)
		}
	}
	// Stopped while it waited: the select may have picked the lock.
	if err := ctx.Err(); err != nil {
		release()
		return nil, err
	}
	return release, nil
}
