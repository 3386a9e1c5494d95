// Package kube watches the Kubernetes objects the load-balancer
// configuration follows (Nodes, the EndpointSlices of default/kubernetes and
// of the ingress service; or the Nodes alone, for mdnsnodes) with client-go
// reflectors, and turns each burst of changes into one cluster.Snapshot.
package kube

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infradns/infradns/internal/cluster"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Defaults for Options.
const (
	DefaultIngressNamespace = "openshift-ingress"
	DefaultIngressService   = "router-internal-default"
	// DefaultDebounce gathers a burst (a node joining touches the Node and
	// several slices) into one render, well inside the 1 s reaction target.
	DefaultDebounce = 100 * time.Millisecond
)

// Options say what to watch.
type Options struct {
	IngressNamespace string
	IngressService   string
	// Debounce is how long after the first event of a burst the snapshot is
	// taken; at most 200 ms is sensible.
	Debounce time.Duration
	// RetryBase and RetryMax bound the backoff after the handler fails.
	RetryBase, RetryMax time.Duration
	// NodesOnly watches Nodes alone: the snapshots carry no APIServers or
	// IngressNodes and the ingress service is ignored. mdnsnodes needs no
	// EndpointSlice, and its identity may only be allowed to read Nodes.
	NodesOnly bool
	// NamesService, with NodesOnly, is a Service ("namespace/name") whose
	// EndpointSlices list a pod on every node (infradns' own DNS pods):
	// while it lists any, the snapshots' Nodes are the slices' node names
	// and addresses, and no Node is watched. See NodesFromSlices.
	NamesService string
	// NodeName is this node: with it (and not NodesOnly) the watcher
	// reads only the Nodes a render needs (nodeSelectors).
	NodeName string
	// StartJitter delays the first request by a random time below it, so
	// the nodes of a cluster that start together (a power cut, an upgrade of
	// every node) do not list at the same instant.
	StartJitter time.Duration
	// Dropped, when set, hears of each value the API sent that no snapshot
	// carries (once per distinct value while the watch runs).
	Dropped func(Drop)
}

// NewOptions returns Options with the defaults set.
func NewOptions() Options {
	return Options{
		IngressNamespace: DefaultIngressNamespace,
		IngressService:   DefaultIngressService,
		Debounce:         DefaultDebounce,
		RetryBase:        200 * time.Millisecond,
		RetryMax:         30 * time.Second,
	}
}

// Handler receives each new snapshot. An error retries the same work with
// backoff (a failed reload), even when nothing changes in the cluster.
type Handler func(context.Context, cluster.Snapshot) error

// Watcher runs the reflectors and calls a Handler.
type Watcher struct {
	client Client
	opts   Options
	synced atomic.Bool
}

// New returns a Watcher; nothing starts before Run.
func New(client Client, o Options) *Watcher {
	return &Watcher{client: client, opts: o}
}

// HasSynced reports whether the first full listing has been received, for
// the ready plugin.
func (w *Watcher) HasSynced() bool { return w.synced.Load() }

const (
	serviceNameLabel = discoveryv1.LabelServiceName
	queueKey         = "render"
)

// MaxNamedNodeWatches bounds the watches of single router Nodes: with more
// nodes holding a router than this, one watch of every Node is cheaper for
// the API server than one per name.
const MaxNamedNodeWatches = 16

// nodeSelectors are the Nodes a load-balancer watcher reads: its own Node,
// the control-plane Nodes (for the API group and haproxy's server names) and
// the nodes with a ready router (the ingress groups). That is O(control
// plane), not O(cluster): a worker's kubelet updating its status reaches no
// lbconfig but its own. Without a node name, or with NodesOnly (mdnsnodes
// serves every name), it is every Node.
func (w *Watcher) nodeSelectors(routers []string, fromNames bool) []NodeSelector {
	if fromNames {
		return nil
	}
	if w.opts.NodesOnly || w.opts.NodeName == "" || len(routers) > MaxNamedNodeWatches {
		return []NodeSelector{AllNodes}
	}
	out := make([]NodeSelector, 0, len(controlPlaneLabels)+1+len(routers))
	for _, l := range controlPlaneLabels {
		out = append(out, NodeSelector{Label: l})
	}
	out = append(out, NodeSelector{Name: w.opts.NodeName})
	for _, r := range routers {
		if r != w.opts.NodeName {
			out = append(out, NodeSelector{Name: r})
		}
	}
	return out
}

// Run watches until ctx is cancelled and calls h once after the caches have
// synced and then once per burst of changes. It returns nil on cancellation.
func (w *Watcher) Run(ctx context.Context, h Handler) error {
	if !w.opts.NodesOnly && (w.opts.IngressNamespace == "" || w.opts.IngressService == "") {
		return errors.New("kube watcher: ingress service not set")
	}
	namesNS, namesSvc, _ := strings.Cut(w.opts.NamesService, "/")
	if w.opts.NamesService != "" && (!w.opts.NodesOnly || namesNS == "" || namesSvc == "") {
		return errors.New("kube watcher: NamesService needs NodesOnly and a namespace/name")
	}
	name := "infradns-lbconfig"
	if w.opts.NodesOnly {
		name = "infradns-nodes"
	}
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](w.opts.RetryBase, w.opts.RetryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
	defer queue.ShutDown()
	// One key: every event leads to a full re-render, so a burst is one item.
	// AddAfter keeps the earliest due time, so the render comes at most
	// Debounce after the first event of a burst.
	enqueue := func() { queue.AddAfter(queueKey, w.opts.Debounce) }

	if w.opts.StartJitter > 0 {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(rand.N(w.opts.StartJitter)):
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// The reflectors stop before Run returns: no goroutine outlives a reload.
	defer wg.Wait()
	defer stop()
	drops := &dropper{report: w.opts.Dropped}
	nodes := &nodeWatches{w: w, ctx: runCtx, wg: &wg, changed: enqueue, drop: drops.add, running: map[NodeSelector]*nodeWatch{}}
	l := listers{nodes: nodes, drops: drops}
	var synced []cache.InformerSynced
	namesSynced := func() bool { return true }
	if w.opts.NamesService != "" {
		names := newNotifyStore(enqueue)
		w.start(runCtx, &wg, "node name endpointslices", w.client.EndpointSlices(namesNS, serviceNameLabel+"="+namesSvc),
			&discoveryv1.EndpointSlice{}, names)
		namesSynced = names.HasSynced
		l.names = discoverylisters.NewEndpointSliceLister(names)
	}
	if !w.opts.NodesOnly {
		api := newNotifyStore(enqueue)
		ing := newNotifyStore(enqueue)
		w.start(runCtx, &wg, "apiserver endpointslices", w.client.EndpointSlices(metav1.NamespaceDefault, serviceNameLabel+"=kubernetes"),
			&discoveryv1.EndpointSlice{}, api)
		w.start(runCtx, &wg, "ingress endpointslices", w.client.EndpointSlices(w.opts.IngressNamespace, serviceNameLabel+"="+w.opts.IngressService),
			&discoveryv1.EndpointSlice{}, ing)
		synced = append(synced, api.HasSynced, ing.HasSynced)
		l.api = discoverylisters.NewEndpointSliceLister(api)
		l.ingress = discoverylisters.NewEndpointSliceLister(ing)
	}
	// The router Nodes are known once the ingress slices are: the first
	// snapshot waits for those too, so no render ranks the routers without
	// some of them.
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil // cancelled before the first listing
	}
	// The names service may be missing or not readable (RBAC): after
	// namesWait the Nodes serve, and the service takes over if it lists
	// nodes later.
	namesCtx, namesCancel := context.WithTimeout(ctx, namesWait)
	cache.WaitForCacheSync(namesCtx.Done(), namesSynced)
	namesCancel()
	if ctx.Err() != nil {
		return nil
	}
	if !nodes.set(w.nodeSelectors(l.routers(), l.fromNames())) {
		return nil
	}
	w.synced.Store(true)
	queue.Add(queueKey)

	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	for {
		key, quit := queue.Get()
		if quit {
			return nil
		}
		if !nodes.set(w.nodeSelectors(l.routers(), l.fromNames())) {
			queue.Done(key)
			return nil
		}
		err := h(ctx, l.snapshot())
		if err != nil && ctx.Err() == nil {
			queue.AddRateLimited(key)
		} else {
			queue.Forget(key)
		}
		queue.Done(key)
	}
}

func (w *Watcher) start(ctx context.Context, wg *sync.WaitGroup, name string, lw cache.ListerWatcher, obj runtime.Object, store cache.ReflectorStore) {
	b := reconnectBackoff
	r := cache.NewReflectorWithOptions(lw, obj, store, cache.ReflectorOptions{Name: name, Backoff: &b})
	wg.Go(func() { r.RunWithContext(ctx) })
}

// nodeWatches runs one Node watch per selector and follows the set asked
// for: a router moving to another node starts a watch of that Node and stops
// the old one.
type nodeWatches struct {
	w       *Watcher
	ctx     context.Context
	wg      *sync.WaitGroup
	changed func()
	drop    func(Drop)

	running map[NodeSelector]*nodeWatch
}

type nodeWatch struct {
	store *nodeStore
	stop  context.CancelFunc
}

// namesWait bounds the wait for the names service's first listing.
const namesWait = 3 * time.Second

// syncWait bounds the wait for a new Node watch's first listing; a watch
// that has not listed by then is read as empty and asks for a render when it
// has.
const syncWait = 5 * time.Second

// set runs exactly the watches of sel and waits until each has listed (at
// most syncWait for one started now). It reports false when ctx ended.
func (n *nodeWatches) set(sel []NodeSelector) bool {
	want := map[NodeSelector]bool{}
	for _, s := range sel {
		want[s] = true
	}
	for s, r := range n.running {
		if !want[s] {
			r.stop()
			delete(n.running, s)
		}
	}
	var started []cache.InformerSynced
	for _, s := range sel {
		if n.running[s] != nil {
			continue
		}
		ctx, stop := context.WithCancel(n.ctx)
		store := newNodeStore(n.changed, n.drop)
		n.w.start(ctx, n.wg, "nodes ("+s.String()+")", n.w.client.Nodes(s), &corev1.Node{}, store)
		n.running[s] = &nodeWatch{store: store, stop: stop}
		started = append(started, store.HasSynced)
	}
	if len(started) == 0 {
		return n.ctx.Err() == nil
	}
	wait := n.ctx.Done()
	if n.w.synced.Load() {
		// Already serving: a late router watch must not hold up other
		// changes for long.
		ctx, cancel := context.WithTimeout(n.ctx, syncWait)
		defer cancel()
		wait = ctx.Done()
	}
	cache.WaitForCacheSync(wait, started...)
	return n.ctx.Err() == nil
}

// Nodes are the Nodes every watch holds, sorted by name, each once. With one
// watch it is that watch's shared slice, not a copy.
func (n *nodeWatches) Nodes() []cluster.Node {
	if len(n.running) == 1 {
		for _, r := range n.running {
			return r.store.Nodes()
		}
	}
	seen := map[string]bool{}
	var out []cluster.Node
	for _, r := range n.running {
		for _, node := range r.store.Nodes() {
			if !seen[node.Name] {
				seen[node.Name] = true
				out = append(out, node)
			}
		}
	}
	slices.SortFunc(out, func(a, b cluster.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// listers read the stores; api and ingress are nil with NodesOnly, names
// without NamesService.
type listers struct {
	nodes   *nodeWatches
	api     discoverylisters.EndpointSliceLister
	ingress discoverylisters.EndpointSliceLister
	names   discoverylisters.EndpointSliceLister
	drops   *dropper
}

// fromNames says the names service lists nodes: they come from its slices.
func (l listers) fromNames() bool {
	if l.names == nil {
		return false
	}
	sl, _ := l.names.List(labels.Everything())
	for _, s := range sl {
		for _, ep := range s.Endpoints {
			if ep.NodeName != nil && *ep.NodeName != "" && len(ep.Addresses) > 0 {
				return true
			}
		}
	}
	return false
}

// routers are the nodes with a ready ingress endpoint.
func (l listers) routers() []string {
	if l.ingress == nil {
		return nil
	}
	ings, _ := l.ingress.List(labels.Everything())
	return readyNodes(ings, l.drops.add)
}

// snapshot is what the stores hold, every value checked on its way in:
// Node names, addresses, ports and endpoint node names end up in
// keepalived.conf and haproxy.cfg, which root runs. A value that fails is
// left out (and reported); it never reaches a render. The Nodes are shared
// with the store: a handler must not modify them.
func (l listers) snapshot() cluster.Snapshot {
	var s cluster.Snapshot
	if l.fromNames() {
		sl, _ := l.names.List(labels.Everything())
		s.Nodes = nodesFromSlices(sl, l.drops.add)
	} else {
		s.Nodes = l.nodes.Nodes()
	}
	if l.api == nil {
		return s
	}
	apis, _ := l.api.List(labels.Everything())
	s.APIServers = readyEndpoints(apis, l.drops.add)
	ings, _ := l.ingress.List(labels.Everything())
	s.IngressNodes = readyNodes(ings, l.drops.add)
	return s
}

// Control-plane role labels: the current one and the one OpenShift still sets.
var controlPlaneLabels = []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

// LabelExcludeFromLB is Kubernetes' well-known label for a node that must
// not receive load-balanced traffic (what an admin sets to drain one): such
// a node gives up its VIPs (cluster.Node.Excluded).
const LabelExcludeFromLB = "node.kubernetes.io/exclude-from-external-load-balancers"

// ToNode cuts a Node down to what the render needs: its InternalIP
// addresses, whether it is in the control plane and whether it is drained.
// Values that fail the checks of toNode are left out silently; the watcher
// reports them.
func ToNode(n *corev1.Node) cluster.Node {
	node, _ := toNode(n, func(Drop) {})
	return node
}

// toNode is ToNode with the checks: a Node whose name is no Node name is
// left out whole (false), an address that is no plain unicast address (an
// IPv6 zone can carry any text, newlines included) is left out alone.
func toNode(n *corev1.Node, drop func(Drop)) (cluster.Node, bool) {
	var trimmed corev1.Node
	trimNode(&trimmed, n)
	return fromTrimmed(&trimmed, drop)
}

// fromTrimmed is toNode's conversion. It is given the Node as trimNode
// leaves it, never the one the API sent, so it cannot read what the
// store's transform drops.
func fromTrimmed(n *corev1.Node, drop func(Drop)) (cluster.Node, bool) {
	if err := cluster.CheckNodeName(n.Name); err != nil {
		drop(Drop{Object: "Node", Field: "name", Value: n.Name, Reason: ReasonName})
		return cluster.Node{}, false
	}
	out := cluster.Node{Name: n.Name}
	for _, l := range controlPlaneLabels {
		if _, ok := n.Labels[l]; ok {
			out.ControlPlane = true
		}
	}
	_, out.Excluded = n.Labels[LabelExcludeFromLB]
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, ok := unicast(a.Address, "Node "+n.Name, "InternalIP", drop); ok {
			out.Addresses = append(out.Addresses, ip)
		}
	}
	slices.SortFunc(out.Addresses, netip.Addr.Compare)
	return out, true
}

// unicast parses an address from the API, or reports why it is dropped.
func unicast(s, object, field string, drop func(Drop)) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		drop(Drop{Object: object, Field: field, Value: s, Reason: ReasonAddress})
		return netip.Addr{}, false
	}
	if cluster.CheckUnicast(ip) != nil {
		drop(Drop{Object: object, Field: field, Value: s, Reason: ReasonUnicast})
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// ReadyEndpoints are the ready addresses of the slices with their port,
// sorted and without duplicates. A nil Ready condition means ready (the
// EndpointSlice API's rule); a terminating endpoint is not ready.
func ReadyEndpoints(slicesIn []*discoveryv1.EndpointSlice) []netip.AddrPort {
	return readyEndpoints(slicesIn, func(Drop) {})
}

func readyEndpoints(slicesIn []*discoveryv1.EndpointSlice, drop func(Drop)) []netip.AddrPort {
	var out []netip.AddrPort
	for _, sl := range slicesIn {
		object := "EndpointSlice " + sl.Namespace + "/" + sl.Name
		port, ok := slicePort(sl, object, drop)
		if !ok {
			continue
		}
		for _, ep := range sl.Endpoints {
			if !ready(ep) {
				continue
			}
			for _, a := range ep.Addresses {
				if ip, ok := unicast(a, object, "address", drop); ok {
					out = append(out, netip.AddrPortFrom(ip, port))
				}
			}
		}
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return slices.Compact(out)
}

// ReadyNodes are the names of the nodes that hold a ready endpoint.
func ReadyNodes(slicesIn []*discoveryv1.EndpointSlice) []string {
	return readyNodes(slicesIn, func(Drop) {})
}

func readyNodes(slicesIn []*discoveryv1.EndpointSlice, drop func(Drop)) []string {
	var out []string
	for _, sl := range slicesIn {
		for _, ep := range sl.Endpoints {
			if !ready(ep) || ep.NodeName == nil || *ep.NodeName == "" {
				continue
			}
			if cluster.CheckNodeName(*ep.NodeName) != nil {
				drop(Drop{Object: "EndpointSlice " + sl.Namespace + "/" + sl.Name, Field: "nodeName", Value: *ep.NodeName, Reason: ReasonName})
				continue
			}
			out = append(out, *ep.NodeName)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func ready(ep discoveryv1.Endpoint) bool {
	return ep.Conditions.Ready == nil || *ep.Conditions.Ready
}

// slicePort is the port of the slice: the "https" one of default/kubernetes,
// else the first with a number. A port out of [1, 65535] is dropped (as a
// uint16 70000 would have been 4464).
func slicePort(sl *discoveryv1.EndpointSlice, object string, drop func(Drop)) (uint16, bool) {
	var first *int32
	for _, p := range sl.Ports {
		if p.Port == nil {
			continue
		}
		if *p.Port < 1 || *p.Port > 65535 {
			drop(Drop{Object: object, Field: "port", Value: strconv.Itoa(int(*p.Port)), Reason: ReasonPort})
			continue
		}
		if p.Name != nil && *p.Name == "https" {
			return uint16(*p.Port), true
		}
		if first == nil {
			first = p.Port
		}
	}
	if first == nil {
		return 0, false
	}
	return uint16(*first), true
}
