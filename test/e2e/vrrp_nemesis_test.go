//go:build e2e

package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/test/e2e/lab"
)

// Nemesis settings: $INFRADNS_NEMESIS runs faults for that long (a Go
// duration; make test runs each kind once), $INFRADNS_NEMESIS_SEED replays
// an order (the test logs its seed), $INFRADNS_NEMESIS_FAULTS keeps the
// kinds whose names match a regular expression (to drill one sequence,
// such as "paused|reloaded").
const (
	vrrpNemesisEnv       = "INFRADNS_NEMESIS"
	vrrpNemesisSeedEnv   = "INFRADNS_NEMESIS_SEED"
	vrrpNemesisFaultsEnv = "INFRADNS_NEMESIS_FAULTS"
)

// nemesisQuiet is how long the lab is left alone after each fault has
// settled, within the fault's own figures.
const nemesisQuiet = 500 * time.Millisecond

// nemesisFault is one kind of fault: inject breaks something on node i (the
// holder or a backup, as on says) and returns what heals it. outage bounds
// the client's outage from the fault's start, double the longest time two
// nodes hold the VIP at once; dnsDown says the fault takes node i's DNS
// away (its CoreDNS paused, its link down): only there may lookups fail.
type nemesisFault struct {
	name           string
	onHolder       bool
	outage, double time.Duration
	dnsDown        bool
	inject         func(v *vrrpLab, i int) (heal func())
}

// nemesisFaults are the faults of issue 28's list the VRRP lab can make.
// The bounds are the targets with room for a loaded CI host (the measured
// figures are logged): a crash or a lost link moves the VIP in ~0.2 s and
// the client is back within ~0.55 s; a pause costs the failover; a split
// brain settles ~0.8 s after it is seen; a backup's fault, a Corefile
// reload and an API outage cost nothing. Lossy links and delay spikes have
// their own test (TestVRRPAdvertLoss): their cost is a property of the
// timers, not a fault to recover from.
var nemesisFaults = []nemesisFault{
	{"holder crash (kill -9 keepalived and haproxy)", true, 1500 * time.Millisecond, 500 * time.Millisecond, false, func(v *vrrpLab, i int) func() {
		v.crash(i)
		return func() { v.startDaemons(i) }
	}},
	{"backup crash", false, 500 * time.Millisecond, 0, false, func(v *vrrpLab, i int) func() {
		v.crash(i)
		return func() { v.startDaemons(i) }
	}},
	// A paused node cannot take its address off the interface: it counts
	// as a holder until it resumes, so the bound is the pause plus issue
	// 28's 500 ms.
	{"holder paused 1 s (SIGSTOP of its daemons)", true, 2500 * time.Millisecond, 1500 * time.Millisecond, true, func(v *vrrpLab, i int) func() {
		signal := v.stunner(i)
		signal(syscall.SIGSTOP)
		time.Sleep(time.Second)
		signal(syscall.SIGCONT)
		return func() {}
	}},
	{"holder's link down 2 s", true, 1500 * time.Millisecond, 500 * time.Millisecond, true, func(v *vrrpLab, i int) func() {
		if err := v.nodes[i].n.LinkDown(); err != nil {
			v.t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		return func() {
			if err := v.nodes[i].n.LinkUp(); err != nil {
				v.t.Fatal(err)
			}
		}
	}},
	// One backup stops hearing the holder (ARP and unicast still flow),
	// takes over, and the split-brain check settles it (~0.8 s in the
	// split tests). Cut off from every backup, the holder would keep its
	// VIP (lowest MAC) while each backup took over and stepped down in
	// turn: two holders for as long as the drop.
	{"VRRP dropped between the holder and one backup 2 s (split brain)", true, 2500 * time.Millisecond, 1500 * time.Millisecond, false, func(v *vrrpLab, i int) func() {
		other := v.nodes[(i+1)%len(v.nodes)].n
		if err := v.nodes[i].n.DropVRRPWith(other); err != nil {
			v.t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		return func() {
			if err := v.nodes[i].n.AllowVRRP(); err != nil {
				v.t.Fatal(err)
			}
		}
	}},
	{"holder's haproxy killed", true, 1 * time.Second, 500 * time.Millisecond, false, func(v *vrrpLab, i int) func() {
		if err := v.nodes[i].haproxy.Kill(); err != nil {
			v.t.Fatal(err)
		}
		time.Sleep(time.Second)
		return func() { v.startHAProxy(i) }
	}},
	{"holder's Corefile reloaded (SIGUSR1)", true, 0, 0, false, func(v *vrrpLab, i int) func() {
		vn := v.nodes[i]
		before := strings.Count(vn.coredns.Log(), "Reloading complete")
		if err := vn.coredns.Signal(syscall.SIGUSR1); err != nil {
			v.t.Fatal(err)
		}
		lab.Eventually(v.t, 10*time.Second, 50*time.Millisecond, "Corefile reloaded on "+vn.n.Name, func() error {
			if strings.Count(vn.coredns.Log(), "Reloading complete") <= before {
				return fmt.Errorf("no completed reload in the log yet")
			}
			return nil
		})
		return func() {}
	}},
	// The apiserver's switch port down: every lbconfig's watch breaks and
	// reconnects; what it rendered last stays, and nothing moves.
	{"API server cut off 3 s", true, 0, 0, false, func(v *vrrpLab, i int) func() {
		api := v.lab.Node(vrrpKubeNS)
		if api == nil {
			v.t.Fatal("the lab has no apiserver (the nemesis runs with the kube feed)")
		}
		if err := api.Unplug(); err != nil {
			v.t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		return func() {
			if err := api.Plug(); err != nil {
				v.t.Fatal(err)
			}
		}
	}},
}

// TestVRRPNemesis injects random faults into the three-node lab (a real
// kube-apiserver feeding lbconfig, CoreDNS answering the cluster names on
// every node), one at a time, with a client calling the VIP every 20 ms
// and DNS lookups on every node every 50 ms, and checks after each the
// invariants issue 28 asks for: never two holders for longer than the
// fault allows, the lab back to one holder (every node MASTER or BACKUP) by
// itself, the client's outage within the fault's bound, every DNS answer
// right and lookups failing only where the fault took DNS down. The
// summary gives the faults injected and the invariants broken (goal 0),
// with the per-fault figures.
func TestVRRPNemesis(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(vrrpNemesisSeedEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a number", vrrpNemesisSeedEnv, s)
		}
		seed = n
	}
	var budget time.Duration
	if s := os.Getenv(vrrpNemesisEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive Go duration such as 30m", vrrpNemesisEnv, s)
		}
		budget = d
	}
	faults := nemesisFaults
	if s := os.Getenv(vrrpNemesisFaultsEnv); s != "" {
		re, err := regexp.Compile(s)
		if err != nil {
			t.Fatalf("%s=%q: %v", vrrpNemesisFaultsEnv, s, err)
		}
		faults = nil
		for _, f := range nemesisFaults {
			if re.MatchString(f.name) {
				faults = append(faults, f)
			}
		}
		if len(faults) == 0 {
			t.Fatalf("%s=%q matches no fault", vrrpNemesisFaultsEnv, s)
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	t.Logf("nemesis seed %d (%s=%d replays this order)", seed, vrrpNemesisSeedEnv, seed)

	v := startVRRPLabWith(t, vrrpKube, vrrpLabConfig{nodes: 3, dns: true})
	holder := v.waitSettled("start")
	dns := v.startDNSProbes()
	// The order: every kind once in a random order (make test), or random
	// kinds until the budget is spent.
	order := rng.Perm(len(faults))
	type figure struct{ outage, double, settle []int64 }
	figures := map[string]*figure{}
	var violations []string
	start := time.Now()
	pick := func(n int) (nemesisFault, bool) {
		switch {
		case budget == 0 && n < len(order):
			return faults[order[n]], true
		case budget > 0 && time.Since(start) < budget:
			return faults[rng.IntN(len(faults))], true
		}
		return nemesisFault{}, false
	}
	for n := 0; ; n++ {
		f, ok := pick(n)
		if !ok {
			break
		}
		target := holder
		if !f.onHolder {
			target = (holder + 1 + rng.IntN(len(v.nodes)-1)) % len(v.nodes)
		}
		name := fmt.Sprintf("fault %d: %s on %s", n, f.name, v.nodes[target].n.Name)

		// The holders, sampled until the lab has settled again.
		stop := make(chan struct{})
		var mu sync.Mutex
		var doubleFor, longestDouble time.Duration
		var sampleErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			last := time.Now()
			for {
				select {
				case <-stop:
					return
				case <-time.After(25 * time.Millisecond):
				}
				hs, err := v.holders()
				now := time.Now()
				mu.Lock()
				if err != nil {
					sampleErr = err
				} else if len(hs) > 1 {
					doubleFor += now.Sub(last)
					longestDouble = max(longestDouble, doubleFor)
				} else {
					doubleFor = 0
				}
				mu.Unlock()
				last = now
			}
		})
		t0 := time.Now()
		heal := f.inject(v, target)
		heal()
		v.waitClient(name+": client served", t0)
		next := v.waitSettled(name + ": one holder, every node MASTER or BACKUP")
		settled := time.Since(t0)
		// What a fault still costs once the lab has settled is its own, not
		// the next fault's: the client's figures and the holders' sampling
		// take in a quiet spell before the next one. Without it the 30-min
		// run charged a Corefile reload with a request reset 100-150 ms
		// after it, which the holder paused just before had caused (its
		// gratuitous ARP on resuming; 19 of 135 steps after a pause, before
		// the hand-over relay took announcements).
		time.Sleep(nemesisQuiet)
		st := v.waitClient(name+": client served after the quiet spell", t0)
		dnsFigures := dns.check(t0, time.Now(), target, f.dnsDown, func(s string) {
			violations = append(violations, name+": "+s)
		})
		close(stop)
		wg.Wait()
		if sampleErr != nil {
			t.Fatalf("%s: %v", name, sampleErr)
		}
		fg := figures[f.name]
		if fg == nil {
			fg = &figure{}
			figures[f.name] = fg
		}
		fg.outage = append(fg.outage, vrrpMS(st.outage))
		fg.double = append(fg.double, vrrpMS(longestDouble))
		fg.settle = append(fg.settle, vrrpMS(settled))
		t.Logf("%s: client outage %d ms (%d of %d requests failed), two holders for %d ms at most, settled on %s after %d ms; DNS %s",
			name, vrrpMS(st.outage), st.failed, st.requests, vrrpMS(longestDouble), v.nodes[next].n.Name, vrrpMS(settled), dnsFigures)
		if st.outage > f.outage {
			violations = append(violations, fmt.Sprintf("%s (at %s): client outage %v, bound %v; last failure %v after the fault, took %v: %s",
				name, t0.Format("15:04:05.000"), st.outage.Round(time.Millisecond), f.outage, st.lastStart.Round(time.Millisecond), st.lastTook.Round(time.Millisecond), st.lastErr))
		}
		if longestDouble > f.double {
			violations = append(violations, fmt.Sprintf("%s: two holders for %v, bound %v", name, longestDouble.Round(time.Millisecond), f.double))
		}
		holder = next
	}
	var kinds []string
	for k := range figures {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	injected := 0
	for _, k := range kinds {
		fg := figures[k]
		injected += len(fg.outage)
		mmm := func(xs []int64) string {
			s := slices.Sorted(slices.Values(xs))
			return fmt.Sprintf("%d/%d/%d", s[0], s[len(s)/2], s[len(s)-1])
		}
		t.Logf("measure: %s × %d: client outage %s ms, two holders %s ms, settled %s ms (min/median/max)", k, len(fg.outage), mmm(fg.outage), mmm(fg.double), mmm(fg.settle))
	}
	t.Logf("measure: nemesis: %d faults in %v, %d invariant violations", injected, time.Since(start).Round(time.Second), len(violations))
	for _, s := range violations {
		t.Error(s)
	}
}

// nemesisDNS asks every node's CoreDNS for the API and an apps name every
// 50 ms from the client (fakeapi resolve, one process per node).
type nemesisDNS struct {
	v      *vrrpLab
	probes []*lab.Process
	want   map[string]string // name → the answer, as fakeapi writes it
}

func (v *vrrpLab) startDNSProbes() *nemesisDNS {
	v.t.Helper()
	d := &nemesisDNS{v: v, want: map[string]string{
		"api-int." + vrrpDomain + ".": vrrpVIP.String(),
		"x.apps." + vrrpDomain + ".":  vrrpIngressVIP.String(),
	}}
	var names []string
	for n := range d.want {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, vn := range v.nodes {
		server := netip.AddrPortFrom(vn.n.IPv4, 1053).String()
		d.probes = append(d.probes, v.lab.Client().Start("dns-"+vn.n.Name,
			[]string{v.fakeapi, "resolve", "-server", server, "-names", strings.Join(names, ","), "-interval", "50ms", "-timeout", "1s"}))
	}
	return d
}

// check reads the lookups begun in [from, to) on every node, once each
// prober has begun one after to, and reports through violate a wrong
// answer anywhere and a failed lookup on any node but the faulted one when
// the fault took its DNS down. It returns the figures for the log.
func (d *nemesisDNS) check(from, to time.Time, target int, dnsDown bool, violate func(string)) string {
	d.v.t.Helper()
	var total, failed, failedOnTarget int
	for i, p := range d.probes {
		var rs []fakeapiResult
		lab.Eventually(d.v.t, 5*time.Second, 20*time.Millisecond, "DNS lookups on "+d.v.nodes[i].n.Name+" up to the fault's end", func() error {
			if p.Exited() {
				return fmt.Errorf("DNS prober exited: %v", p.Err())
			}
			rs = parseFakeAPI(p.Log())
			if len(rs) == 0 || rs[len(rs)-1].start.Before(to) {
				return fmt.Errorf("no lookup begun after the fault's end yet")
			}
			return nil
		})
		var wrong, fails []string
		for _, r := range rs {
			if r.start.Before(from) || !r.start.Before(to) {
				continue
			}
			total++
			name, got, _ := strings.Cut(r.detail, "=")
			switch {
			case !r.ok:
				failed++
				fails = append(fails, r.detail)
			case got != d.want[name]:
				wrong = append(wrong, r.detail)
			}
		}
		if len(wrong) > 0 {
			violate(fmt.Sprintf("%d wrong DNS answers from %s: %v", len(wrong), d.v.nodes[i].n.Name, wrong))
		}
		if i == target && dnsDown {
			failedOnTarget += len(fails)
		} else if len(fails) > 0 {
			violate(fmt.Sprintf("%d DNS lookups failed on %s: %v", len(fails), d.v.nodes[i].n.Name, fails))
		}
	}
	return fmt.Sprintf("%d lookups, %d failed (%d on the faulted node, whose DNS was down)", total, failed, failedOnTarget)
}
