//go:build e2e || scale

package scale

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/template"
	"time"

	"github.com/infradns/infradns/deploy"
	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/internal/nodecfg"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
)

// LBNamespace holds the scenario's Services; LBPools is the pools
// ConfigMap's text: room for every Service, both families.
const (
	LBNamespace = "shop"
	LBPools     = `pools:
- name: default
  addresses: [10.100.0.0/20, fd00:100::/116]
`
)

// LBAPIServerArgs give the apiserver cluster IPs and node ports for
// thousands of Services of type LoadBalancer, dual-stack ones too
// (kubetest's own range holds 254, IPv4 only).
var LBAPIServerArgs = []string{"--service-cluster-ip-range=10.96.0.0/16,fd00:96::/108"}

// Allocator and Announcer are the Nodes whose lbconfig Corefiles run: a
// control-plane node (lbconfig announcing the Services and the elected
// lbpools, as render-node gives it with lbPools in vipMode bgp) and a
// plain worker (lbconfig announcing them). No Local Service's endpoint is
// on either until the endpoint change moves one there.
const (
	Allocator = 0
	Announcer = ControlPlane + Routers + 1
)

// LBOptions size the LoadBalancer-Services scenario.
type LBOptions struct {
	Nodes, Services int
	Rate            int           // Services created per second
	HeartbeatRate   int           // per second, the whole run
	Window          time.Duration // each heartbeat-only window
}

// Cost is a process over a heartbeat-only window.
type Cost struct {
	Beats int
	CPU   time.Duration
	RSS   int64         // at its end
	Total time.Duration // the process's CPU since it started, at its end
}

// PerBeat is the process's CPU per heartbeat sent in the window (all of
// its CPU: timers and Lease renewals too).
func (c Cost) PerBeat() time.Duration {
	if c.Beats == 0 {
		return 0
	}
	return c.CPU / time.Duration(c.Beats)
}

// Move is one endpoint change of a Local Service, seen on the announcer.
type Move struct {
	Service string
	Want    []string      // the Service's routes, which alone may change
	Changed []string      // the routes that did change on the announcer ("+" announced, "-" withdrawn)
	Logged  []string      // the announcer's log lines about routes since the change
	Others  []string      // routes that changed on the allocator's node
	Seen    time.Duration // the slice written → the announcer's routes changed
}

// LBResult is the scenario measured.
type LBResult struct {
	Local, Dual int
	Alloc       []time.Duration // Create → status.loadBalancer.ingress seen by a watch, in creation order
	// [0] with no Service, [1] with all of them.
	Allocator, Announcer [2]Cost
	// Routes each node announces for the Services at the end.
	AllocatorRoutes, AnnouncerRoutes float64
	WantRoutes                       int
	Moves                            []Move
}

// lbNode is a node's lbconfig Corefile process, in a namespace of its own.
type lbNode struct {
	*Proc
	index int
}

// startLBNode runs Node i's lbconfig Corefile as `infradns render-node`
// renders it in vipMode bgp with lbPools (deploy/static-pods/
// lbconfig.Corefile.tmpl): lbconfig announcing the VIPs and the Services
// through a kernel table (bgp-speaker table: no peer to run; the
// hand-over relay off, it has none), and on a control-plane node the
// lbpools allocator, elected by its Lease. Not rendered: haproxy (none
// runs here: the API check is off, as on a node without it).
func startLBNode(t testing.TB, c *kubetest.Cluster, binary string, i int) *lbNode {
	t.Helper()
	ns := NewNetNS(t)
	dir := t.TempDir()
	api := ns.Forward(t, strings.TrimPrefix(c.URL, "https://"))
	kc, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, bytes.ReplaceAll(kc, []byte(c.URL), []byte("https://"+api)), 0o600); err != nil {
		t.Fatal(err)
	}
	role := "worker"
	if i < ControlPlane {
		role = "control-plane"
	}
	// Ports inside the namespace: render-node's own would do, any do.
	v := nodecfg.Values{
		Cluster: "ocp4", Role: role, Node: NodeName(i), Interface: "lo",
		APIVIPs: []string{"192.0.2.5"}, IngressVIPs: []string{"192.0.2.10"},
		Kubeconfig: kubeconfig, TrackDir: dir,
		BGP: true, BGPOptions: []string{"bgp-speaker table 198", "bgp-relay off"},
		LBPools: i < ControlPlane, LBServices: true,
		LBDNSPort: 5353, LBHealthPort: 8080, LBReadyPort: 8181, LBMetrics: "127.0.0.1:9153",
	}
	tmpl := template.Must(template.New("").Option("missingkey=error").Funcs(template.FuncMap{
		"join": func(s []string) string { return strings.Join(s, " ") },
	}).ParseFS(deploy.Templates, "static-pods/lbconfig.Corefile.tmpl"))
	var conf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&conf, "lbconfig.Corefile.tmpl", v); err != nil {
		t.Fatal(err)
	}
	p := &Proc{dir: dir, prom: v.LBMetrics}
	p.run(t, binary, conf.String(), ns)
	return &lbNode{Proc: p, index: i}
}

// ready waits for the ready plugin's 200 (lbconfig's first listing).
func (n *lbNode) ready(t testing.TB, timeout time.Duration) {
	t.Helper()
	n.until(t, timeout, "ready", func() bool {
		resp, err := n.get.Get("http://127.0.0.1:8181/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// until polls ok every 10 ms, failing the test after timeout or when the
// process exits.
func (n *lbNode) until(t testing.TB, timeout time.Duration, what string, ok func() bool) time.Duration {
	t.Helper()
	began := time.Now()
	for !ok() {
		if time.Since(began) > timeout {
			t.Fatalf("%s: not %s after %v\n%s", NodeName(n.index), what, timeout, n.log.String())
		}
		select {
		case <-n.exited:
			t.Fatalf("%s: exited (%v)\n%s", NodeName(n.index), n.cmd.ProcessState, n.log.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return time.Since(began)
}

// routes are the routes the node announces (coredns_lbconfig_bgp_announced
// at 1), by address.
func (n *lbNode) routes() map[string]bool {
	series, err := scrapeSeries("http://"+n.prom+"/metrics", n.get, nil, "coredns_lbconfig_bgp_announced")
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for labels, v := range series {
		if v == 1 {
			_, vip, _ := strings.Cut(labels, `vip="`)
			out[strings.TrimSuffix(vip, `"}`)] = true
		}
	}
	return out
}

// cost starts a window; the function it returns ends it.
func (n *lbNode) cost(sent *atomic.Int64) func() Cost {
	cpu0, beats0 := n.CPU(), sent.Load()
	return func() Cost {
		total := n.CPU()
		return Cost{Beats: int(sent.Load() - beats0), CPU: total - cpu0, RSS: n.RSS(), Total: total}
	}
}

// MeasureLB runs the scenario on a cluster Populate has filled with
// o.Nodes Nodes: the allocator's and the announcer's Corefiles started,
// heartbeats the whole time; a heartbeat-only window with no Service;
// o.Services Services of type LoadBalancer created at o.Rate (every other
// one Local with two endpoints elsewhere, every third dual-stack), each
// timed from Create to its address seen; a second window; then one Local
// dual-stack Service's endpoint moved onto the announcer and back.
func MeasureLB(ctx context.Context, t testing.TB, c *kubetest.Cluster, binary string, o LBOptions) LBResult {
	t.Helper()
	lbSetup(ctx, t, c)
	var sent atomic.Int64
	stop := make(chan struct{})
	var beats sync.WaitGroup
	beats.Go(func() { beatUntil(ctx, t, c, o.Nodes, o.HeartbeatRate, stop, &sent) })
	defer func() {
		close(stop)
		beats.Wait()
	}()

	alloc, ann := startLBNode(t, c, binary, Allocator), startLBNode(t, c, binary, Announcer)
	alloc.ready(t, 180*time.Second)
	ann.ready(t, 180*time.Second)
	alloc.until(t, 60*time.Second, "the allocator (coredns_lbpools_leader)", func() bool { return alloc.Metric("coredns_lbpools_leader") == 1 })
	// The control-plane node announces the API VIP: the kernel-table
	// speaker works in its namespace.
	alloc.until(t, 30*time.Second, "announcing the API VIP", func() bool { return alloc.routes()["192.0.2.5"] })
	// The start's and the creations' work done before a window opens.
	settle := min(2*time.Second, o.Window)
	time.Sleep(settle)

	var r LBResult
	window := func(k int) {
		a, b := alloc.cost(&sent), ann.cost(&sent)
		time.Sleep(o.Window)
		r.Allocator[k], r.Announcer[k] = a(), b()
	}
	window(0)

	r.Alloc = createServices(ctx, t, c, o, &r)
	alloc.until(t, 60*time.Second, "done allocating (coredns_lbpools_services_pending 0)", func() bool {
		return alloc.Metric("coredns_lbpools_services_pending") == 0
	})
	for _, n := range []*lbNode{alloc, ann} {
		n.until(t, 60*time.Second, fmt.Sprintf("announcing the %d Cluster Services' routes", r.WantRoutes), func() bool {
			return n.Metric("coredns_lbconfig_services_announced") == float64(r.WantRoutes)
		})
	}
	time.Sleep(settle)
	window(1)
	r.AllocatorRoutes = alloc.Metric("coredns_lbconfig_services_announced")
	r.AnnouncerRoutes = ann.Metric("coredns_lbconfig_services_announced")

	// A Local dual-stack Service (i = 3): its endpoint onto the announcer
	// and away again.
	target := lbName(3)
	for _, on := range []bool{true, false} {
		r.Moves = append(r.Moves, moveEndpoint(ctx, t, c, alloc, ann, target, on))
	}
	return r
}

// lbSetup creates the namespaces and the pools ConfigMap.
func lbSetup(ctx context.Context, t testing.TB, c *kubetest.Cluster) {
	t.Helper()
	for _, ns := range []string{"infradns", LBNamespace} {
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: kube.PoolsConfigMap}, Data: map[string]string{kube.PoolsKey: LBPools}}
	if _, err := c.Client.CoreV1().ConfigMaps("infradns").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func lbName(i int) string { return fmt.Sprintf("svc-%04d", i) }

// lbService is Service i: Local when odd, dual-stack when a multiple of 3.
func lbService(i int) *corev1.Service {
	class := cluster.LoadBalancerClass
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: LBNamespace, Name: lbName(i)},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &class,
			Selector:              map[string]string{"app": lbName(i)},
			Ports:                 []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster},
	}
	if i%2 == 1 {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	if i%3 == 0 {
		p := corev1.IPFamilyPolicyRequireDualStack
		s.Spec.IPFamilyPolicy = &p
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	}
	return s
}

// lbSlice is a Local Service's EndpointSlice as the controller writes it:
// two ready endpoints on Nodes past the allocator and the announcer.
func lbSlice(i, nodes int) *discoveryv1.EndpointSlice {
	port, proto := int32(8080), corev1.ProtocolTCP
	name := "http"
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: LBNamespace, Name: lbName(i) + "-x1", Labels: map[string]string{discoveryv1.LabelServiceName: lbName(i)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	first, span := Announcer+1, nodes-Announcer-1
	for _, k := range []int{first + (i*7)%span, first + (i*13+1)%span} {
		sl.Endpoints = append(sl.Endpoints, lbEndpoint(k))
	}
	return sl
}

func lbEndpoint(node int) discoveryv1.Endpoint {
	ready, name := true, NodeName(node)
	return discoveryv1.Endpoint{Addresses: []string{v4(node)}, NodeName: &name, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
}

// createServices creates the Services one after another at o.Rate (and a
// Local one's slice right after it) and returns, in creation order, the
// time from each Create to the watch's first sight of an address in its
// status.
func createServices(ctx context.Context, t testing.TB, c *kubetest.Cluster, o LBOptions, r *LBResult) []time.Duration {
	t.Helper()
	svcs := c.Client.CoreV1().Services(LBNamespace)
	w, err := svcs.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	created, seen := map[string]time.Time{}, map[string]time.Time{}
	all := make(chan struct{})
	go func() {
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*corev1.Service)
			if !ok || ev.Type == watch.Deleted || len(s.Status.LoadBalancer.Ingress) == 0 {
				continue
			}
			mu.Lock()
			if _, ok := seen[s.Name]; !ok {
				seen[s.Name] = time.Now()
				if len(seen) == o.Services {
					close(all)
				}
			}
			mu.Unlock()
		}
	}()
	tick := time.NewTicker(time.Second / time.Duration(o.Rate))
	defer tick.Stop()
	for i := range o.Services {
		<-tick.C
		s := lbService(i)
		mu.Lock()
		created[s.Name] = time.Now()
		mu.Unlock()
		if _, err := svcs.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", s.Name, err)
		}
		routes := len(s.Spec.IPFamilies)
		if routes == 0 {
			routes = 1
		} else {
			r.Dual++
		}
		if s.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
			r.Local++
			if _, err := c.Client.DiscoveryV1().EndpointSlices(LBNamespace).Create(ctx, lbSlice(i, o.Nodes), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		} else {
			r.WantRoutes += routes
		}
	}
	select {
	case <-all:
	case <-time.After(60 * time.Second):
		mu.Lock()
		t.Fatalf("%d of %d Services have an address 60 s after the last was created", len(seen), o.Services)
	}
	mu.Lock()
	defer mu.Unlock()
	out := make([]time.Duration, o.Services)
	for i := range out {
		out[i] = seen[lbName(i)].Sub(created[lbName(i)])
	}
	return out
}

// moveEndpoint puts a ready endpoint of Service name on the announcer's
// Node (on) or takes it away, and waits for the announcer's routes to
// change; it then waits a second more for any other route to move.
func moveEndpoint(ctx context.Context, t testing.TB, c *kubetest.Cluster, alloc, ann *lbNode, name string, on bool) Move {
	t.Helper()
	svc, err := c.Client.CoreV1().Services(LBNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := Move{Service: name}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		m.Want = append(m.Want, sign(on)+in.IP)
	}
	slices.Sort(m.Want)
	eps := c.Client.DiscoveryV1().EndpointSlices(LBNamespace)
	sl, err := eps.Get(ctx, name+"-x1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if on {
		sl.Endpoints = append(sl.Endpoints, lbEndpoint(Announcer))
	} else {
		sl.Endpoints = sl.Endpoints[:len(sl.Endpoints)-1]
	}
	before, others, logged := ann.routes(), alloc.routes(), len(ann.log.String())
	began := time.Now()
	if _, err := eps.Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ann.until(t, 30*time.Second, "moving "+name+"'s routes", func() bool { return !maps.Equal(ann.routes(), before) })
	m.Seen = time.Since(began)
	time.Sleep(time.Second)
	m.Changed = changes(before, ann.routes())
	m.Others = changes(others, alloc.routes())
	for _, l := range strings.Split(ann.log.String()[logged:], "\n") {
		if strings.Contains(l, "announcing ") || strings.Contains(l, "withdrew ") {
			m.Logged = append(m.Logged, strings.TrimSpace(l))
		}
	}
	return m
}

func sign(on bool) string {
	if on {
		return "+"
	}
	return "-"
}

// changes lists the routes of after not in before ("+") and those gone
// ("-"), sorted.
func changes(before, after map[string]bool) []string {
	var out []string
	for a := range after {
		if !before[a] {
			out = append(out, "+"+a)
		}
	}
	for b := range before {
		if !after[b] {
			out = append(out, "-"+b)
		}
	}
	slices.Sort(out)
	return out
}

// Check fails the test unless the move changed the Service's own routes
// alone, on the announcer and in its log, and nothing on the allocator's
// node (which has no endpoint of it).
func (m Move) Check(t testing.TB) {
	t.Helper()
	if !slices.Equal(m.Changed, m.Want) {
		t.Errorf("%s's endpoint: the announcer's routes changed %v, want %v", m.Service, m.Changed, m.Want)
	}
	if len(m.Others) != 0 {
		t.Errorf("%s's endpoint: the allocator's node's routes changed %v, want none", m.Service, m.Others)
	}
	var logged []string
	for _, l := range m.Logged {
		f := strings.Fields(l)
		p, err := netip.ParsePrefix(f[len(f)-1])
		if err != nil {
			t.Errorf("log line %q: %v", l, err)
			continue
		}
		logged = append(logged, sign(f[len(f)-2] == "announcing")+p.Addr().String())
	}
	slices.Sort(logged)
	if !slices.Equal(logged, m.Want) {
		t.Errorf("%s's endpoint: the announcer logged %q, want %v", m.Service, m.Logged, m.Want)
	}
}

// Quantile is the q-th quantile (nearest rank) of sorted d.
func Quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	k := int(q*float64(len(d))+0.999999) - 1
	return d[min(max(k, 0), len(d)-1)]
}

// lbHeading starts the LoadBalancer-Services section, the report's last:
// each test rewrites its own part of SCALE_OUT and keeps the other's.
const lbHeading = "## LoadBalancer Services"

// LBReport is the scenario's section of docs/scale-benchmarks.md.
func LBReport(r LBResult, o LBOptions, load string) string {
	var rep strings.Builder
	fmt.Fprintf(&rep, "%s: %d on %d Nodes\n\n", lbHeading, o.Services, o.Nodes)
	fmt.Fprintf(&rep, "Generated by `make bench-scale-lb` (test/e2e/scale, TestScaleBenchLB) on %s. Do not edit by hand.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&rep, "- %s, %d CPUs, load before `%s`; the apiserver, etcd, both CoreDNS processes and the load generator share them. A real kube-apiserver with %d RealisticNodes sent %d kubelet-like heartbeats per second the whole run.\n", runtime.Version(), runtime.NumCPU(), load, o.Nodes, o.HeartbeatRate)
	fmt.Fprintf(&rep, "- Two real CoreDNS processes (bin/coredns), each with the lbconfig Corefile `infradns render-node` renders with `lbPools: class` in `vipMode: bgp` (deploy/static-pods/lbconfig.Corefile.tmpl), in a network namespace of its own: `bgp-speaker table` (the routes go to a kernel table: no BGP peer), `bgp-relay off`, no haproxy. The **allocator** is control-plane node %s: lbconfig with `services` and the elected lbpools (`announce`); the **announcer** is worker %s: lbconfig with `services`.\n", NodeName(Allocator), NodeName(Announcer))
	fmt.Fprintf(&rep, "- %d Services of type LoadBalancer (class %s) created one after another at %d/s: %d `Local` (each with an EndpointSlice of two ready endpoints on other Nodes, created right after it), %d `Cluster`; %d of them dual-stack (`RequireDualStack`, an address of each family from one pool). Allocation: from Create to the first `status.loadBalancer.ingress` a watch sees.\n\n", o.Services, cluster.LoadBalancerClass, o.Rate, r.Local, o.Services-r.Local, r.Dual)
	fmt.Fprintf(&rep, "| Services | allocation ms: min | median | p99 | max |\n|---|---:|---:|---:|---:|\n")
	row := func(label string, d []time.Duration) {
		d = slices.Clone(d)
		slices.Sort(d)
		fmt.Fprintf(&rep, "| %s | %d | %d | %d | %d |\n", label, d[0].Milliseconds(), Quantile(d, 0.5).Milliseconds(), Quantile(d, 0.99).Milliseconds(), d[len(d)-1].Milliseconds())
	}
	row(fmt.Sprintf("all %d", len(r.Alloc)), r.Alloc)
	first := min(10, len(r.Alloc))
	row(fmt.Sprintf("the first %d", first), r.Alloc[:first])
	row(fmt.Sprintf("the last %d", first), r.Alloc[len(r.Alloc)-first:])
	fmt.Fprintf(&rep, "\nHeartbeats only (no Service or slice written) for %d s, before the Services and after them: the processes' CPU (utime+stime) and RSS at the window's end. CPU per heartbeat is all the process's CPU in the window (Lease renewals, timers) over the heartbeats sent.\n\n", int(o.Window.Seconds()))
	fmt.Fprintf(&rep, "| process | Services | heartbeats | CPU s | CPU per heartbeat ms | RSS MiB |\n|---|---:|---:|---:|---:|---:|\n")
	for _, p := range []struct {
		name string
		c    [2]Cost
	}{{"allocator (lbconfig + lbpools)", r.Allocator}, {"announcer (lbconfig)", r.Announcer}} {
		for k, n := range []int{0, o.Services} {
			fmt.Fprintf(&rep, "| %s | %d | %d | %.2f | %.3f | %.1f |\n", p.name, n, p.c[k].Beats, p.c[k].CPU.Seconds(), float64(p.c[k].PerBeat().Microseconds())/1000, mib(p.c[k].RSS))
		}
	}
	fmt.Fprintf(&rep, "\nCPU per heartbeat with %d Services over with none: allocator %s, announcer %s. Routes announced for the Services (`coredns_lbconfig_services_announced`): allocator %.0f, announcer %.0f (the Cluster Services' addresses: %d).\n\n",
		o.Services, ratio(r.Allocator), ratio(r.Announcer), r.AllocatorRoutes, r.AnnouncerRoutes, r.WantRoutes)
	fmt.Fprintf(&rep, "A Local Service's endpoint moved onto the announcer's Node and away again, among the %d Services: the routes that changed (`coredns_lbconfig_bgp_announced`) on the announcer and on the allocator's node (no endpoint there), the announcer's log lines, and the time from the EndpointSlice write to the announcer's routes changing (checked: exactly the Service's own routes, logged alone).\n\n", o.Services)
	fmt.Fprintf(&rep, "| change | announcer's routes | allocator's routes | announcer's log | slice → routes ms |\n|---|---|---|---|---:|\n")
	for i, m := range r.Moves {
		what := map[bool]string{true: "onto", false: "off"}[i == 0]
		fmt.Fprintf(&rep, "| %s's endpoint %s %s | %s | %s | %d lines: %s | %d |\n", m.Service, what, NodeName(Announcer), orNone(m.Changed), orNone(m.Others), len(m.Logged), logWords(m.Logged), m.Seen.Milliseconds())
	}
	return rep.String()
}

// ratio is the CPU per heartbeat with the Services over that without.
func ratio(c [2]Cost) string {
	if c[0].PerBeat() == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", float64(c[1].PerBeat())/float64(c[0].PerBeat()))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}

// logWords is the log lines' messages without their prefixes.
func logWords(lines []string) string {
	var out []string
	for _, l := range lines {
		if i := strings.Index(l, ": "); i >= 0 {
			l = l[i+2:]
		}
		out = append(out, "`"+l+"`")
	}
	return strings.Join(out, ", ")
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
