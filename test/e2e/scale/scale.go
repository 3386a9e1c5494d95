//go:build e2e || scale

// Package scale measures what following a large cluster costs infradns'
// CoreDNS, against the real kube-apiserver (internal/kubetest): N realistic
// Nodes (kubetest.RealisticNode), kubelet-like status heartbeats, address
// changes, and several processes watching at once. It runs two ways: a
// small smoke test in `make test` (build tag e2e) that checks every figure
// is produced, and the benchmark of `make bench-scale` (build tag scale)
// that compares binaries side by side and prints the tables of
// docs/benchmarks.md. Nothing here asserts a duration.
package scale

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kubetest"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Zone is the cluster domain the processes serve.
const Zone = "ocp4.example.com"

// ControlPlane is how many of the Nodes carry the control-plane labels;
// Routers how many (the next ones) hold a ready ingress endpoint.
const (
	ControlPlane = 3
	Routers      = 3
)

// Config is one way of running CoreDNS that the benchmark compares.
type Config struct {
	Name   string // the table's label
	Binary string
	// NodesService: mdnsnodes reads node names from the infradns-nodes
	// Service's EndpointSlices, which Populate writes as the EndpointSlice
	// controller would.
	NodesService bool
	// LBConfig adds lbconfig to the server block, as a worker that holds
	// no VIP (keepalived refuses VRRP on lo, and the lab has no other
	// interface here); without it mdnsnodes alone.
	LBConfig bool
}

// Populate creates n realistic Nodes, default/kubernetes and the ingress
// service's EndpointSlices, and the infradns-nodes Service's slices (100
// endpoints each, one per family, as kube-controller-manager writes them).
func Populate(ctx context.Context, t testing.TB, c *kubetest.Cluster, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			node := kubetest.RealisticNode(i, time.Now().Unix())
			if i < ControlPlane {
				node.Labels["node-role.kubernetes.io/control-plane"] = ""
				node.Labels["node-role.kubernetes.io/master"] = ""
			}
			if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatalf("create Nodes: %v", err)
	}
	port := int32(6443)
	https := "https"
	api := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &https, Port: &port}},
	}
	for i := range ControlPlane {
		api.Endpoints = append(api.Endpoints, discoveryv1.Endpoint{Addresses: []string{v4(i)}})
	}
	if _, err := c.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, api, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "openshift-ingress"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ing := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "router", Labels: map[string]string{discoveryv1.LabelServiceName: "router-internal-default"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &https, Port: &port}},
	}
	for i := ControlPlane; i < ControlPlane+Routers && i < n; i++ {
		name := NodeName(i)
		ing.Endpoints = append(ing.Endpoints, discoveryv1.Endpoint{Addresses: []string{v4(i)}, NodeName: &name})
	}
	if _, err := c.Client.DiscoveryV1().EndpointSlices("openshift-ingress").Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for start := 0; start < n; start += 100 {
		for _, fam := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
			sl := &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Name: fmt.Sprintf("infradns-nodes-%s-%d", strings.ToLower(string(fam)), start/100), Labels: map[string]string{discoveryv1.LabelServiceName: "infradns-nodes"}},
				AddressType: fam,
			}
			for i := start; i < min(n, start+100); i++ {
				name, addr := NodeName(i), v4(i)
				if fam == discoveryv1.AddressTypeIPv6 {
					addr = v6(i)
				}
				sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: &name})
			}
			if _, err := c.Client.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, sl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// NodeName is the name of Node i.
func NodeName(i int) string { return kubetest.RealisticNode(i, 0).Name }

// v4 and v6 are Node i's InternalIPs as RealisticNode gives them.
func v4(i int) string { return kubetest.RealisticNode(i, 0).Status.Addresses[0].Address }
func v6(i int) string { return kubetest.RealisticNode(i, 0).Status.Addresses[1].Address }

// Proc is one CoreDNS process.
type Proc struct {
	cmd       *exec.Cmd
	dns, prom string
	dir       string
	started   time.Time
	log       *syncBuffer
	exited    chan struct{}
	get       *http.Client // for the metrics, inside the process's namespace
}

// Start runs cfg's binary with its Corefile; Stop kills it (t.Cleanup too).
func Start(t testing.TB, c *kubetest.Cluster, cfg Config) *Proc {
	t.Helper()
	dir := t.TempDir()
	p := &Proc{dir: dir, dns: freeAddr(t, "udp"), prom: freeAddr(t, "tcp")}
	_, dnsPort, _ := net.SplitHostPort(p.dns)
	names := ""
	if cfg.NodesService {
		names = "\n        nodes-service kube-system/infradns-nodes"
	}
	lb := ""
	if cfg.LBConfig {
		lb = fmt.Sprintf(`
    lbconfig {
        cluster ocp4
        api-vip 192.0.2.5
        ingress-vip 192.0.2.10
        interface lo
        node %s
        kubeconfig %s
        keepalived %s
        haproxy %s
        reload keepalived none
        reload haproxy none
        health-check api none
        health-check ingress none
        vrrp-guard off
        track-dir %s
    }`, NodeName(ControlPlane+Routers+1), c.Kubeconfig, filepath.Join(dir, "keepalived.conf"), filepath.Join(dir, "haproxy.cfg"), dir)
	}
	conf := fmt.Sprintf(`.:%s {
    bind 127.0.0.1
    prometheus %s
    mdnsnodes {
        zone %s
        kubeconfig %s%s
    }%s
}
`, dnsPort, p.prom, Zone, c.Kubeconfig, names, lb)
	p.run(t, cfg.Binary, conf, nil)
	return p
}

// run starts binary with the Corefile conf, inside ns when one is given
// (nsenter joins it and execs the binary in place: the PID is CoreDNS's).
func (p *Proc) run(t testing.TB, binary, conf string, ns *NetNS) {
	t.Helper()
	path := filepath.Join(p.dir, "Corefile")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	p.log = &syncBuffer{}
	p.get = http.DefaultClient
	if ns == nil {
		p.cmd = exec.Command(binary, "-conf", path)
	} else {
		p.cmd = exec.Command("nsenter", "--net=/proc/self/fd/3", binary, "-conf", path)
		p.cmd.ExtraFiles = []*os.File{ns.f}
		p.get = &http.Client{Transport: &http.Transport{DialContext: ns.Dial}}
	}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.exited = make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.Stop)
}

// syncBuffer is a process's output, read while the process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Stop kills the process and waits for it.
func (p *Proc) Stop() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Answer polls name until its A answer is want and returns the time since
// began; it fails the test after timeout.
func (p *Proc) Answer(t testing.TB, began time.Time, name, want string, timeout time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		if last = query(p.dns, name+"."+Zone); last == want {
			return time.Since(began)
		}
		select {
		case <-p.exited:
			t.Fatalf("%s: exited\n%s", p.cmd.Path, p.log.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("%s: %q, want %q after %v\n%s", name, last, want, timeout, p.log.String())
	return 0
}

func query(server, name string) string {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	c := &dns.Client{Timeout: 500 * time.Millisecond}
	r, _, err := c.Exchange(m, server)
	if err != nil {
		return "error"
	}
	out := dns.RcodeToString[r.Rcode]
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			out += " " + a.A.String()
		}
	}
	return out
}

// Metric is the sum of the series of name (with any labels) on p's
// metrics endpoint.
func (p *Proc) Metric(name string) float64 {
	v, _ := scrape("http://"+p.prom+"/metrics", p.get, nil, name)
	return v
}

// CPU is the process's user+system CPU time so far.
func (p *Proc) CPU() time.Duration { return cpu(p.cmd.Process.Pid) }

// RSS and Peak are the process's VmRSS and VmHWM in bytes.
func (p *Proc) RSS() int64  { return status(p.cmd.Process.Pid, "VmRSS:") }
func (p *Proc) Peak() int64 { return status(p.cmd.Process.Pid, "VmHWM:") }

// Wrote waits until lbconfig's keepalived.conf exists.
func (p *Proc) Wrote(t testing.TB, timeout time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(p.dir, "keepalived.conf")); err == nil {
			return time.Since(p.started)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no keepalived.conf after %v\n%s", timeout, p.log.String())
	return 0
}

// Heartbeats sends rate kubelet-like status updates per second to random
// Nodes (every condition's lastHeartbeatTime moves; nothing else changes)
// for d, and returns how many were sent.
func Heartbeats(ctx context.Context, t testing.TB, c *kubetest.Cluster, n, rate int, d time.Duration) int {
	t.Helper()
	var sent atomic.Int64
	stop := make(chan struct{})
	time.AfterFunc(d, func() { close(stop) })
	beatUntil(ctx, t, c, n, rate, stop, &sent)
	return int(sent.Load())
}

// beatUntil is Heartbeats until stop closes, counting them in sent as they go.
func beatUntil(ctx context.Context, t testing.TB, c *kubetest.Cluster, n, rate int, stop <-chan struct{}, sent *atomic.Int64) {
	var seq atomic.Int64
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	for {
		select {
		case <-stop:
			wg.Wait()
			return
		case <-tick.C:
		}
		i := rand.N(n)
		// Seconds, as the API keeps them: a counter keeps two beats of one
		// Node in the same second apart (an equal patch sends no event).
		beat := time.Now().Unix() + seq.Add(1)
		wg.Go(func() {
			node := kubetest.RealisticNode(i, beat)
			patch := mustJSON(map[string]any{"status": map[string]any{"conditions": node.Status.Conditions}})
			if _, err := c.Client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
				msg := err.Error()
				t.Errorf("heartbeat %s: %s", node.Name, msg[:min(len(msg), 300)])
				return
			}
			sent.Add(1)
		})
	}
}

// ChangeAddress sets Node i's IPv4 InternalIP to addr (kubelet's way: the
// whole status.addresses) and, with the names service, its endpoint in the
// service's IPv4 slice (the EndpointSlice controller's way).
func ChangeAddress(ctx context.Context, t testing.TB, c *kubetest.Cluster, i int, addr string, names bool) {
	t.Helper()
	node := kubetest.RealisticNode(i, 0)
	node.Status.Addresses[0].Address = addr
	patch := mustJSON(map[string]any{"status": map[string]any{"addresses": node.Status.Addresses}})
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	if !names {
		return
	}
	slices := c.Client.DiscoveryV1().EndpointSlices("kube-system")
	sl, err := slices.Get(ctx, fmt.Sprintf("infradns-nodes-ipv4-%d", i/100), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sl.Endpoints[i%100].Addresses = []string{addr}
	if _, err := slices.Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// APIWatchBytes is what the apiserver has sent to Node watchers so far
// (apiserver_watch_events_sizes_sum{resource="nodes"}), and its CPU time.
func APIWatchBytes(t testing.TB, c *kubetest.Cluster, resource string) float64 {
	t.Helper()
	v, err := scrape(c.URL+"/metrics", nil, c, `apiserver_watch_events_sizes_sum`, `resource="`+resource+`"`)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// APICPU is the apiserver's CPU time so far.
func APICPU(c *kubetest.Cluster) time.Duration {
	_, pid := c.PIDs()
	return cpu(pid)
}

// scrape sums the series of name that hold every filter: the apiserver's
// when c is given, else url's, fetched with get.
func scrape(url string, get *http.Client, c *kubetest.Cluster, name string, filters ...string) (float64, error) {
	series, err := scrapeSeries(url, get, c, name)
	total := 0.0
	for labels, v := range series {
		if !slices.ContainsFunc(filters, func(f string) bool { return !strings.Contains(labels, f) }) {
			total += v
		}
	}
	return total, err
}

// scrapeSeries is each series of name by its labels ("" without any).
func scrapeSeries(url string, get *http.Client, c *kubetest.Cluster, name string) (map[string]float64, error) {
	var body []byte
	if c != nil {
		b, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
		if err != nil {
			return nil, err
		}
		body = b
	} else {
		resp, err := get.Get(url)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(resp.Body); err != nil {
			return nil, err
		}
		body = buf.Bytes()
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err == nil {
			out[line[len(name):sp]] = v
		}
	}
	return out, nil
}

func cpu(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces), from ") ".
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100) // USER_HZ
}

func status(pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == key {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// Ports for the processes come from below the kernel's ephemeral range
// (32768-60999), where no outgoing connection takes one between the check
// and the bind, each number once per test binary whatever the protocol
// (CoreDNS serves DNS on UDP and TCP), and each free on both when handed
// out: CoreDNS binds with SO_REUSEPORT, so two processes on one port would
// share it silently.
var (
	portsMu  sync.Mutex
	nextPort = 20000 + rand.N(5000)
)

func freeAddr(t testing.TB, _ string) string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for ; nextPort < 32768; nextPort++ {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(nextPort))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		c, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		c.Close()
		nextPort++
		return addr
	}
	t.Fatal("no free port below 32768")
	return ""
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Options size a measurement.
type Options struct {
	Nodes          int
	HeartbeatRate  int           // per second (5,000 Nodes every 5 min: 17)
	HeartbeatFor   time.Duration // how long the heartbeat phase lasts
	AddressChanges int
	// FirstChange is the Node whose address changes first (each config
	// changes its own Nodes, so several share one cluster).
	FirstChange int
	// Base is the apiserver alone (Baseline): its own Node watch gets every
	// event too, and its count of open watches includes it.
	Base Base
}

// Base is what the apiserver sends and spends per heartbeat with no
// infradns process watching, and its own open Node watches.
type Base struct {
	BytesPerBeat float64
	CPUPerBeat   time.Duration
	Watches      int
}

// Baseline measures Base: a heartbeat phase with nobody else watching.
func Baseline(ctx context.Context, t testing.TB, c *kubetest.Cluster, o Options) Base {
	t.Helper()
	b := Base{Watches: NodeWatches(t, c)}
	b0, c0 := APIWatchBytes(t, c, "nodes"), APICPU(c)
	n := Heartbeats(ctx, t, c, o.Nodes, o.HeartbeatRate, o.HeartbeatFor)
	time.Sleep(500 * time.Millisecond)
	if n > 0 {
		b.BytesPerBeat = (APIWatchBytes(t, c, "nodes") - b0) / float64(n)
		b.CPUPerBeat = (APICPU(c) - c0) / time.Duration(n)
	}
	return b
}

// NodeWatches is the apiserver's count of open Node watches.
func NodeWatches(t testing.TB, c *kubetest.Cluster) int {
	t.Helper()
	v, err := scrape("", nil, c, "apiserver_longrunning_requests", `resource="nodes"`, `verb="WATCH"`)
	if err != nil {
		t.Fatal(err)
	}
	return int(v)
}

// Result is one configuration measured.
type Result struct {
	Config        string
	FirstAnswer   time.Duration // exec → a node name answered
	ConfigWritten time.Duration // exec → lbconfig's keepalived.conf (LBConfig only)
	RSSSynced     int64         // after the first answer (and config) and 2 s
	RSSAfter      int64         // after the heartbeats and address changes
	Peak          int64         // VmHWM at the end
	Heartbeats    int
	CPUBeats      time.Duration // process CPU during the heartbeat phase
	CPUIdle       time.Duration // process CPU during as long without heartbeats
	Seconds       float64       // its length
	Renders       float64       // lbconfig renders during it
	APIBytes      float64       // Node watch bytes the apiserver sent during it, its own watch's taken out
	APICPU        time.Duration // apiserver CPU during it
	NodeWatches   int           // Node watches of the process open at the apiserver
	AddressChange []time.Duration
}

// CPUPerBeat is process CPU per heartbeat: the heartbeat phase's CPU less
// what the process spends as long without them (lbconfig's status loop,
// timers, the runtime).
func (r Result) CPUPerBeat() time.Duration {
	if r.Heartbeats == 0 {
		return 0
	}
	return max(r.CPUBeats-r.CPUIdle, 0) / time.Duration(r.Heartbeats)
}

// Cores is the CPU share used while the heartbeats ran.
func (r Result) Cores() float64 { return r.CPUBeats.Seconds() / r.Seconds }

// Measure starts cfg once and measures it through a heartbeat phase and
// address changes.
func Measure(ctx context.Context, t testing.TB, c *kubetest.Cluster, cfg Config, o Options) Result {
	t.Helper()
	r := Result{Config: cfg.Name}
	p := Start(t, c, cfg)
	defer p.Stop()
	// A node past the routers: neither in the control plane nor a router,
	// what most names are.
	probe := ControlPlane + Routers
	r.FirstAnswer = p.Answer(t, p.started, NodeName(probe), "NOERROR "+v4(probe), 120*time.Second)
	if cfg.LBConfig {
		r.ConfigWritten = p.Wrote(t, 120*time.Second)
	}
	time.Sleep(2 * time.Second)
	r.RSSSynced = p.RSS()
	idle := p.CPU()
	time.Sleep(o.HeartbeatFor + 500*time.Millisecond)
	r.CPUIdle = p.CPU() - idle

	renders0, bytes0, api0, cpu0, t0 := p.Metric("coredns_lbconfig_renders_total"), APIWatchBytes(t, c, "nodes"), APICPU(c), p.CPU(), time.Now()
	r.Heartbeats = Heartbeats(ctx, t, c, o.Nodes, o.HeartbeatRate, o.HeartbeatFor)
	time.Sleep(500 * time.Millisecond) // the last events arrive
	r.CPUBeats, r.Seconds = p.CPU()-cpu0, time.Since(t0).Seconds()
	r.Renders = p.Metric("coredns_lbconfig_renders_total") - renders0
	r.APIBytes = APIWatchBytes(t, c, "nodes") - bytes0 - o.Base.BytesPerBeat*float64(r.Heartbeats)
	r.APICPU = APICPU(c) - api0
	r.NodeWatches = NodeWatches(t, c) - o.Base.Watches

	for k := range o.AddressChanges {
		i := (o.FirstChange + k) % o.Nodes
		addr := fmt.Sprintf("10.200.%d.%d", i/250, i%250+1)
		began := time.Now()
		ChangeAddress(ctx, t, c, i, addr, cfg.NodesService)
		r.AddressChange = append(r.AddressChange, p.Answer(t, began, NodeName(i), "NOERROR "+addr, 10*time.Second))
	}
	// VmHWM follows the resident set only where the kernel updates its
	// high-water mark (unmaps, exit), not when Go returns memory with
	// madvise: a sample of VmRSS taken earlier can be higher (CI: the
	// peak read 20 KB below the synced RSS). The peak is at least every
	// resident size seen.
	r.RSSAfter = p.RSS()
	r.Peak = max(p.Peak(), r.RSSSynced, r.RSSAfter)
	return r
}

// Herd starts procs processes of cfg at once and returns, sorted, how long
// each took to answer a node name.
func Herd(t testing.TB, c *kubetest.Cluster, cfg Config, procs int) []time.Duration {
	t.Helper()
	ps := make([]*Proc, procs)
	for i := range ps {
		ps[i] = Start(t, c, cfg)
	}
	probe := ControlPlane + Routers
	out := make([]time.Duration, procs)
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			out[i] = p.Answer(t, p.started, NodeName(probe), "NOERROR "+v4(probe), 180*time.Second)
		})
	}
	wg.Wait()
	for _, p := range ps {
		p.Stop()
	}
	slices.Sort(out)
	return out
}

// Watchers runs procs processes of cfg through a heartbeat phase and
// returns the apiserver's Node watch bytes per heartbeat above o.Base (its
// own watch) and its CPU per heartbeat (all of it: compare with o.Base's).
func Watchers(ctx context.Context, t testing.TB, c *kubetest.Cluster, cfg Config, procs int, o Options) (bytesPerBeat float64, cpuPerBeat time.Duration) {
	t.Helper()
	var ps []*Proc
	for range procs {
		ps = append(ps, Start(t, c, cfg))
	}
	probe := ControlPlane + Routers
	for _, p := range ps {
		p.Answer(t, p.started, NodeName(probe), "NOERROR "+v4(probe), 180*time.Second)
	}
	time.Sleep(time.Second)
	b0, c0 := APIWatchBytes(t, c, "nodes"), APICPU(c)
	n := Heartbeats(ctx, t, c, o.Nodes, o.HeartbeatRate, o.HeartbeatFor)
	time.Sleep(500 * time.Millisecond)
	b, cp := APIWatchBytes(t, c, "nodes")-b0, APICPU(c)-c0
	for _, p := range ps {
		p.Stop()
	}
	if n == 0 {
		return 0, 0
	}
	return b/float64(n) - o.Base.BytesPerBeat, cp / time.Duration(n)
}
