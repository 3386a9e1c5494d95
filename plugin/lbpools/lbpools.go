// Package lbpools implements the lbpools plugin: it allocates the addresses
// of Services of type LoadBalancer from pools kept in a ConfigMap, and
// writes them into each Service's status. One instance writes at a time
// (a Lease elects it); the others follow the same watches, ready to take
// over.
package lbpools

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coredns/coredns/plugin"

	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/lbpool"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PoolsKey is the ConfigMap's data key holding the pools.
const PoolsKey = kube.PoolsKey

// LBPools is the lbpools plugin. It answers no query.
type LBPools struct {
	Next plugin.Handler

	kubeconfig         string
	poolsNS, poolsName string // the ConfigMap
	class              string
	isDefault          bool
	// announce: the nodes announce the Services' addresses over BGP (lbconfig's
	// 'services'); the writer tells each Service who does.
	announce           bool
	leaseNS, leaseName string
	leaseDuration      time.Duration
	identity           string
	newClient          func() (kube.Client, error)
	retry              time.Duration // after a failed write
	debounce           time.Duration
	cancel             context.CancelFunc
	done               chan struct{}
	leading            atomic.Bool
	lastCfg            *lbpool.Config // the last valid pools; loop only
	lastCfgErr         string
	written            map[string]written // this term's writes the watch has not returned yet
	reported           kube.Once[string]
}

// ServeDNS implements the plugin.Handler interface: lbpools answers nothing.
func (l *LBPools) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	return plugin.NextOrFailure(l.Name(), l.Next, ctx, w, r)
}

// Name implements the plugin.Handler interface.
func (l *LBPools) Name() string { return pluginName }

// Start runs the watches and the election until Stop.
func (l *LBPools) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go func() {
		defer close(l.done)
		l.run(ctx)
	}()
}

// Stop ends the election (releasing the Lease when held, so a peer takes
// over at once) and the watches, and waits for them.
func (l *LBPools) Stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
}

func (l *LBPools) client() (kube.Client, error) {
	if l.newClient != nil {
		return l.newClient()
	}
	return kube.NewReloading(l.kubeconfig, "infradns-lbpools", log.Infof, log.Warningf)
}

func (l *LBPools) run(ctx context.Context) {
	client := kube.WaitClient(ctx, l.client, log.Warningf)
	if client == nil {
		return
	}
	defer kube.Follow(ctx, client)()
	kick := make(chan struct{}, 1)
	changed := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	// Every instance follows the Services and the pools, so one that
	// becomes the writer allocates at once from what it already holds.
	svcs := kube.NewMirror(changed, kube.TrimClaimService)
	cms := kube.NewMirror(changed, nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { svcs.Run(ctx, "lbpools services", client.Services(), &corev1.Service{}) })
	wg.Go(func() { cms.Run(ctx, "lbpools pools", client.ConfigMap(l.poolsNS, l.poolsName), &corev1.ConfigMap{}) })
	synced := func() bool { return svcs.HasSynced() && cms.HasSynced() }

	leader().Set(0)
	e := &kube.Elector{
		Leases: client.Leases(l.leaseNS), Namespace: l.leaseNS, Name: l.leaseName, Identity: l.identity,
		Duration: l.leaseDuration, RenewDeadline: l.leaseDuration * 2 / 3, Retry: l.leaseDuration / 7,
		OnHolder: func(h string) { log.Infof("allocating: %s", orNobody(h)) },
		OnError:  leaseErrors(),
	}
	e.Run(ctx, func(ctx context.Context) {
		l.leading.Store(true)
		leader().Set(1)
		defer func() {
			l.leading.Store(false)
			leader().Set(0)
			// Only the writer reports the pools: a former writer's
			// figures would go stale beside the new one's.
			poolSize.Reset()
			poolUsed.Reset()
			pending().Set(0)
			orphaned().Set(0)
			if l.announce {
				unannounced().Set(0)
			}
		}()
		l.written = nil // a new term trusts only the watch
		if l.announce {
			var aw sync.WaitGroup
			defer aw.Wait()
			aw.Go(func() {
				l.followAnnouncers(ctx, client, func(key string) *corev1.Service {
					ns, name, _ := strings.Cut(key, "/")
					for _, o := range svcs.List() {
						if s := o.(*corev1.Service); s.Namespace == ns && s.Name == name {
							return s
						}
					}
					return nil
				})
			})
		}
		l.lead(ctx, client, kick, synced, func() ([]*corev1.Service, *corev1.ConfigMap) {
			var cm *corev1.ConfigMap
			if objs := cms.List(); len(objs) > 0 {
				cm = objs[0].(*corev1.ConfigMap)
			}
			list := svcs.List()
			out := make([]*corev1.Service, 0, len(list))
			for _, o := range list {
				out = append(out, o.(*corev1.Service))
			}
			return out, cm
		})
	})
}

// leaseErrors logs the election's failed requests when the reason
// changes and once a minute while it lasts, not at every retry: they say
// why no instance allocates (InfradnsLBNoAllocator's runbook).
func leaseErrors() func(error) {
	var last string
	var logged time.Time
	return func(err error) {
		if msg := err.Error(); msg != last || time.Since(logged) >= time.Minute {
			log.Warningf("%v (retrying)", err)
			last, logged = msg, time.Now()
		}
	}
}

func orNobody(h string) string {
	if h == "" {
		return "nobody"
	}
	return h
}

// lead allocates while this instance leads: after the first full listing
// of both watches, then after each burst of changes.
func (l *LBPools) lead(ctx context.Context, client kube.Client, kick chan struct{}, synced func() bool, read func() ([]*corev1.Service, *corev1.ConfigMap)) {
	for !synced() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	var retry <-chan time.Time
	for {
		svcs, cm := read()
		if l.reconcile(ctx, client, svcs, cm) {
			retry = time.After(l.retry)
		} else {
			retry = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-retry:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(l.debounce):
		}
		select {
		case <-kick: // folded into this pass
		default:
		}
	}
}

// pools returns the pools to allocate from: cm's, or the last valid ones
// while cm does not parse or has been deleted (a typo or a mistaken delete
// must not leave new Services pending). With no ConfigMap ever, there are
// no pools: nothing is allocated. No address in use is taken away in any
// case (lbpool.Allocate keeps orphans).
func (l *LBPools) pools(cm *corev1.ConfigMap) lbpool.Config {
	what := fmt.Sprintf("ConfigMap %s/%s", l.poolsNS, l.poolsName)
	if cm == nil {
		configValid().Set(1)
		if l.lastCfg != nil {
			if l.reported.First("deleted") {
				log.Warningf("%s deleted: the last pools stay in use", what)
			}
			return *l.lastCfg
		}
		if l.reported.First("missing") {
			log.Warningf("no %s: no pools, Services of class %s stay pending", what, l.class)
		}
		return lbpool.Config{}
	}
	cfg, err := lbpool.Parse([]byte(cm.Data[PoolsKey]))
	if err != nil {
		configValid().Set(0)
		msg := fmt.Sprintf("%s key %s:%v", what, PoolsKey, err)
		if msg != l.lastCfgErr {
			l.lastCfgErr = msg
			if l.lastCfg != nil {
				log.Errorf("%s; the last valid pools stay in use", msg)
			} else {
				log.Errorf("%s; nothing is allocated until it is fixed", msg)
			}
		}
		if l.lastCfg != nil {
			return *l.lastCfg
		}
		return lbpool.Config{}
	}
	configValid().Set(1)
	l.lastCfgErr = ""
	l.lastCfg = &cfg
	return cfg
}

// reconcile runs one pass; it reports whether a write failed (retry).
func (l *LBPools) reconcile(ctx context.Context, client kube.Client, svcs []*corev1.Service, cm *corev1.ConfigMap) bool {
	cfg := l.pools(cm)
	if l.written == nil {
		l.written = map[string]written{}
	}
	o := plan(cfg, withWritten(svcs, l.written), l.class, l.isDefault)
	l.metrics(cfg, o)
	failed := false
	for _, w := range o.writes {
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		err := client.PatchServiceStatus(wctx, w.svc.Namespace, w.svc.Name, kube.StatusPatch(w.svc.ResourceVersion, w.addrs))
		cancel()
		key := w.svc.Namespace + "/" + w.svc.Name
		if err == nil {
			l.written[key] = written{rv: w.svc.ResourceVersion, addrs: w.addrs}
		}
		switch {
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Deleted or changed since read: the watch brings the news
			// and the next pass decides again.
			failed = true
		case err != nil:
			failed = true
			log.Warningf("Service %s: writing its status: %v", key, err)
			writeErrors.Inc()
		case w.ours:
			allocations.Inc()
			log.Infof("Service %s: %s", key, addrList(w.addrs))
			l.event(ctx, client, w.svc, corev1.EventTypeNormal, "IPAllocated", "Assigned IP "+addrList(w.addrs)+poolsOf(cfg, w.addrs))
		default:
			log.Infof("Service %s is no longer of type LoadBalancer: its addresses are released", key)
		}
	}
	for _, v := range o.verdicts {
		key := v.svc.Namespace + "/" + v.svc.Name
		if v.result.Pending != "" && l.reported.First(key+" pending "+v.result.Pending) {
			log.Warningf("Service %s: %s", key, v.result.Pending)
			l.event(ctx, client, v.svc, corev1.EventTypeWarning, "AllocationFailed", v.result.Pending)
		}
		if len(v.result.Orphaned) > 0 && l.reported.First(key+" orphaned "+addrList(v.result.Orphaned)) {
			msg := addrList(v.result.Orphaned) + " is no longer in a pool of namespace " + v.svc.Namespace + ": kept while the Service uses it"
			log.Warningf("Service %s: %s", key, msg)
			l.event(ctx, client, v.svc, corev1.EventTypeWarning, "AddressOrphaned", msg)
		}
	}
	return failed
}

// writeTimeout bounds one status write or event.
const writeTimeout = 5 * time.Second

// event records an Event on svc; a failure is only logged (events are
// best effort, as kubelet's).
func (l *LBPools) event(ctx context.Context, client kube.Client, svc *corev1.Service, typ, reason, msg string) {
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		// Named as client-go's recorder names them: unique per instant.
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", svc.Name, now.UnixNano()), Namespace: svc.Namespace},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Service", APIVersion: "v1", Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID, ResourceVersion: svc.ResourceVersion,
		},
		Reason: reason, Message: msg, Type: typ, Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
		Source:              corev1.EventSource{Component: "infradns-lbpools", Host: l.identity},
		ReportingController: "infradns.io/lbpools", ReportingInstance: l.identity,
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if err := client.CreateEvent(ctx, ev); err != nil && !errors.Is(err, context.Canceled) {
		log.Warningf("Service %s/%s: event %s: %v", svc.Namespace, svc.Name, reason, err)
	}
}

func addrList(as []netip.Addr) string {
	if len(as) == 0 {
		return "none"
	}
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

func poolsOf(cfg lbpool.Config, as []netip.Addr) string {
	var names []string
	for _, a := range as {
		if p := cfg.Of(a); p != nil && !slices.Contains(names, p.Name) {
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return " from pool " + strings.Join(names, ", ")
}
