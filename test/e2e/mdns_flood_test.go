//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infradns/infradns/test/e2e/lab"
)

// Goals of the flood test (issue #12): what one host on the link can make an
// unsigned resolver spend.
const (
	floodAddrs    = 200000           // addresses announced by the flooder, from one source
	floodHosts    = 1000             // names they are spread over, 200 each
	floodRSSLimit = 16.0             // MiB the resolver's resident set may grow
	floodHostCap  = 16               // addresses a name may answer with (mdns.MaxHostAddrs)
	floodJoin     = time.Second      // a legitimate node announced during the flood resolves within
	floodSettle   = 40 * time.Second // bound on waiting for the resolver to finish the flood
)

// TestMDNSFlood has one lab node flood an unsigned resolver (the default) with
// 200,000 addresses over 1,000 names, from one IPv4 source and with the wire's
// largest TTL, while a legitimate node announces itself in the middle of it.
// It asserts the goals of issue #12: the resolver's resident memory grows by
// less than 16 MiB, a flooded name answers with at most 16 addresses, and the
// legitimate node resolves within a second of its announcement. The figures
// (RSS, CPU, answer count, time to resolve) are logged.
func TestMDNSFlood(t *testing.T) {
	l := lab.New(t, lab.Config{Prefix: "mflood", Nodes: 3, TeardownGrace: time.Second})
	server, flooder, legit := l.Nodes()[0], l.Nodes()[1], l.Nodes()[2]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	dir := t.TempDir()
	rogue := filepath.Join(dir, "rogue")
	if out, err := exec.Command("go", "build", "-o", rogue, lab.Path(t, "test/e2e/internal/rogue")).CombinedOutput(); err != nil {
		t.Fatalf("build rogue: %v\n%s", err, out)
	}
	const promPort = 9153
	srv := server.Start("coredns", []string{lab.Binary(t, "coredns"), "-conf", mdnsCorefile(t, 53, readyPort, promPort, "")})
	lab.Eventually(t, 20*time.Second, 50*time.Millisecond, "coredns ready", func() error {
		if srv.Exited() {
			return fmt.Errorf("coredns exited: %v\n%s", srv.Err(), lab.Tail(srv.LogPath, 20))
		}
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		defer rcancel()
		_, err := server.HTTPGet(rctx, fmt.Sprintf("http://127.0.0.1:%d/ready", readyPort))
		return err
	})
	base, baseCPU := rss(t, srv.Pid()), cpuTime(t, srv.Pid())

	// The resident set is sampled all along: the peak is what the node pays.
	var peak float64
	var peakMu sync.Mutex
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", srv.Pid())); err == nil {
				if m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(b); m != nil {
					kb, _ := strconv.ParseFloat(string(m[1]), 64)
					peakMu.Lock()
					peak = max(peak, kb/1024)
					peakMu.Unlock()
				}
			}
			select {
			case <-sampleCtx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	floodStart := time.Now()
	flood := flooder.Start("rogue-flood", []string{rogue, "-mode", "flood", "-host", "flood", "-cluster", "ocp4",
		"-hosts", strconv.Itoa(floodHosts), "-addrs", strconv.Itoa(floodAddrs), "-batch", strconv.Itoa(floodAddrs / floodHosts), "-gap", "2ms"})

	// The legitimate node announces itself (three announcements 250 ms
	// apart, as a publisher does after probing) once the flood is under way.
	time.Sleep(time.Second)
	joinStart := time.Now()
	join := legit.Start("legit-announce", []string{rogue, "-mode", "announce", "-host", legit.Name, "-cluster", "ocp4",
		"-addr", legit.IPv4.String(), "-count", "3", "-gap", "250ms"})
	took, joinErr := mdnsWaitAll(ctx, joinStart, []*lab.Node{server}, 53, mdnsName(legit.Name), "A", mdnsExactly(legit.IPv4))
	joinDuring := !flood.Exited()

	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	err := flood.Wait(fctx)
	fcancel()
	if err != nil {
		t.Fatalf("Flooder: %v\n%s", err, flood.Log())
	}
	floodSent := time.Since(floodStart)
	jctx, jcancel := context.WithTimeout(ctx, 10*time.Second)
	if err := join.Wait(jctx); err != nil {
		t.Errorf("Legitimate announcer: %v\n%s", err, join.Log())
	}
	jcancel()

	// The flood has been sent; the resolver may still be working through the
	// packets its socket holds. Wait until it is idle: no CPU used in 500 ms.
	settled := false
	last := cpuTime(t, srv.Pid())
	for deadline := time.Now().Add(floodSettle); time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		cur := cpuTime(t, srv.Pid())
		if cur-last < 20*time.Millisecond {
			settled = true
			break
		}
		last = cur
	}
	busy := time.Since(floodStart)
	stopSampling()
	<-sampled
	after, cpu := rss(t, srv.Pid()), cpuTime(t, srv.Pid())-baseCPU

	// The answer of one flooded name, over TCP so that no truncation hides
	// how many addresses it holds.
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	res, err := server.Run(dctx, "dig", "+tcp", "+time=5", "+tries=1", "+noall", "+answer", "-p", "53", "@127.0.0.1", mdnsName("flood-0"), "A")
	dcancel()
	if err != nil {
		t.Fatalf("dig flood-0: %v\n%s%s", err, res.Stdout, res.Stderr)
	}
	answers := 0
	for _, line := range strings.Split(res.Stdout, "\n") {
		if f := strings.Fields(line); len(f) >= 5 && f[3] == "A" {
			answers++
		}
	}
	dropped := mdnsDropped(ctx, t, server, promPort)

	peakMu.Lock()
	grew := max(peak, after.hwm) - base.rss
	peakMu.Unlock()
	t.Logf("measure: flood of %d addresses over %d names from one source: sent in %v, resolver busy until %v after its start (settled: %v)",
		floodAddrs, floodHosts, floodSent.Round(time.Millisecond), busy.Round(time.Millisecond), settled)
	t.Logf("measure: RSS %.1f MiB before, %.1f MiB after, peak %.1f MiB: grew %.1f MiB; CPU %.2f s",
		base.rss, after.rss, max(peak, after.hwm), grew, cpu.Seconds())
	t.Logf("measure: flood-0 answers with %d A records; dropped %v", answers, dropped)
	if joinErr == nil {
		t.Logf("measure: legitimate node %s resolvable %v after its announcement (during the flood: %v)", legit.Name, mdnsSlowest(took), joinDuring)
	} else {
		t.Logf("measure: legitimate node %s not resolvable within %v: %v", legit.Name, mdnsBound, joinErr)
	}

	if grew >= floodRSSLimit {
		t.Errorf("The resolver's RSS grew by %.1f MiB under the flood, want < %.0f MiB", grew, floodRSSLimit)
	}
	if answers > floodHostCap {
		t.Errorf("flood-0 answers with %d addresses, want at most %d", answers, floodHostCap)
	}
	if answers == 0 {
		t.Errorf("flood-0 is not served at all: the flood did not reach the resolver, so nothing was measured")
	}
	if joinErr != nil || mdnsSlowest(took).hi > floodJoin {
		t.Errorf("The legitimate node took %v to resolve during the flood (err %v), want within %v", mdnsSlowest(took), joinErr, floodJoin)
	}
	if !joinDuring {
		t.Errorf("The flood had ended before the legitimate node resolved: the join was not measured under the flood")
	}
	if !settled {
		t.Errorf("The resolver was still busy %v after the flood started", busy)
	}
	if dropped["host_limit"] == 0 || dropped["source_limit"] == 0 {
		t.Errorf("Dropped counters %v: want drops for host_limit and source_limit", dropped)
	}
}

// cpuTime reads the user plus system CPU time a process has used.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name (field 2) may hold spaces: count from after it.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		t.Fatalf("short /proc/%d/stat: %q", pid, s)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

var mdnsDroppedRE = regexp.MustCompile(`(?m)^coredns_mdnsnodes_records_dropped_total\{[^}]*reason="([a-z_]+)"[^}]*\} (\S+)$`)

// mdnsDropped reads the dropped-record counters of the resolver, by reason.
func mdnsDropped(ctx context.Context, t *testing.T, n *lab.Node, promPort int) map[string]float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := n.HTTPGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", promPort))
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	m := map[string]float64{}
	for _, s := range mdnsDroppedRE.FindAllStringSubmatch(body, -1) {
		v, _ := strconv.ParseFloat(s[2], 64)
		m[s[1]] += v
	}
	return m
}
