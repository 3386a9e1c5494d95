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
	"testing"
	"time"

	"github.com/infradns/infradns/test/e2e/lab"
)

// scaleNodes is the cluster size of the memory target: RSS < 40 MiB with
// 500 nodes cached.
const scaleNodes = 500

// TestMDNSNodesScale fills mdnsnodes with 500 nodes announced over real
// multicast (test/bench/mdnsflood on another lab node) and measures, side by
// side in the same run, against the reference way to serve the same names —
// CoreDNS's hosts plugin with a 500-line hosts file, as OpenShift's stack
// does for static host entries — the resident memory and the qps of a dnsperf
// run from a client namespace. It asserts only correctness (all 500 nodes
// cached, every dnsperf answer NOERROR); the figures are logged as ratios.
func TestMDNSNodesScale(t *testing.T) {
	l := lab.New(t, lab.Config{Prefix: "mscale", Nodes: 2, Client: true, TeardownGrace: time.Second})
	server, flooder, client := l.Nodes()[0], l.Nodes()[1], l.Client()
	dir := t.TempDir()

	flood := filepath.Join(dir, "mdnsflood")
	if out, err := exec.Command("go", "build", "-o", flood, lab.Path(t, "test/bench/mdnsflood")).CombinedOutput(); err != nil {
		t.Fatalf("build mdnsflood: %v\n%s", err, out)
	}

	var hosts, queries strings.Builder
	for i := range scaleNodes {
		name := fmt.Sprintf("worker-%03d.%s", i, domain)
		fmt.Fprintf(&hosts, "10.128.%d.%d %s\nfd00:128::%x %s\n", i/256, i%256, name, i+1, name)
		fmt.Fprintf(&queries, "%s A\n%s AAAA\n", name, name)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hostsFile := write("hosts", hosts.String())
	queryFile := write("queries.txt", queries.String())
	mdnsConf := write("mdns.Corefile", fmt.Sprintf(`.:53 {
    prometheus :9153
    ready :18181
    mdnsnodes {
        zone %s
        cluster ocp4
        interface eth0
    }
}
`, domain))
	// Same plugins around it on both sides (prometheus costs per query).
	hostsConf := write("hosts.Corefile", fmt.Sprintf(`.:5301 {
    prometheus :9154
    ready :18182
    hosts %s %s
}
`, hostsFile, domain))

	coredns := lab.Binary(t, "coredns")
	mdnsSrv := server.Start("coredns-mdns", []string{coredns, "-conf", mdnsConf})
	refSrv := server.Start("coredns-hosts", []string{coredns, "-conf", hostsConf})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, port := range []int{18181, 18182} {
		url := fmt.Sprintf("http://%s:%d/ready", server.IPv4, port)
		lab.Eventually(t, 15*time.Second, 50*time.Millisecond, "ready "+url, func() error {
			_, err := server.HTTPGet(ctx, url)
			return err
		})
	}
	baseMdns, baseRef := rss(t, mdnsSrv.Pid()), rss(t, refSrv.Pid())

	start := time.Now()
	flooder.Start("mdnsflood", []string{flood, "-interface", "eth0", "-cluster", "ocp4", "-n", strconv.Itoa(scaleNodes)})
	nodesRE := regexp.MustCompile(`(?m)^coredns_mdnsnodes_nodes\{[^}]*\} (\d+)$`)
	lab.Eventually(t, 60*time.Second, 100*time.Millisecond, "500 nodes cached", func() error {
		body, err := server.HTTPGet(ctx, fmt.Sprintf("http://%s:9153/metrics", server.IPv4))
		if err != nil {
			return err
		}
		m := nodesRE.FindStringSubmatch(body)
		if m == nil || m[1] != strconv.Itoa(scaleNodes) {
			return fmt.Errorf("coredns_mdnsnodes_nodes = %v", m)
		}
		return nil
	})
	t.Logf("measure: %d nodes announced and cached in %v", scaleNodes, time.Since(start).Round(time.Millisecond))

	perf := func(port int) float64 {
		res, err := client.Run(ctx, "dnsperf", "-s", server.IPv4.String(), "-p", strconv.Itoa(port),
			"-d", queryFile, "-l", "5", "-c", "4", "-q", "50")
		if err != nil {
			t.Fatalf("dnsperf against port %d: %v\n%s%s", port, err, res.Stdout, res.Stderr)
		}
		if !regexp.MustCompile(`NOERROR \d+ \(100\.00%\)`).MatchString(res.Stdout) {
			t.Fatalf("dnsperf against port %d: not every answer NOERROR:\n%s", port, res.Stdout)
		}
		m := regexp.MustCompile(`Queries per second:\s+([\d.]+)`).FindStringSubmatch(res.Stdout)
		if m == nil {
			t.Fatalf("dnsperf against port %d: no qps in:\n%s", port, res.Stdout)
		}
		q, _ := strconv.ParseFloat(m[1], 64)
		return q
	}
	// Interleaved, two rounds each, so machine noise hits both alike.
	var qm, qr []float64
	for range 2 {
		qm = append(qm, perf(53))
		qr = append(qr, perf(5301))
	}
	mdnsRSS, refRSS := rss(t, mdnsSrv.Pid()), rss(t, refSrv.Pid())
	t.Logf("measure: RSS idle before the nodes: mdnsnodes %.1f MiB, hosts %.1f MiB", baseMdns.rss, baseRef.rss)
	t.Logf("measure: with %d nodes after dnsperf: mdnsnodes RSS %.1f MiB (peak %.1f), hosts RSS %.1f MiB (peak %.1f); ratio %.2f",
		scaleNodes, mdnsRSS.rss, mdnsRSS.hwm, refRSS.rss, refRSS.hwm, mdnsRSS.rss/refRSS.rss)
	t.Logf("measure: qps mdnsnodes %.0f %.0f, hosts %.0f %.0f; ratio of sums %.2f (unpinned, 2 cores shared with dnsperf)",
		qm[0], qm[1], qr[0], qr[1], (qm[0]+qm[1])/(qr[0]+qr[1]))
}

type memUse struct{ rss, hwm float64 } // MiB

// rss reads a process's resident and peak resident set from /proc.
func rss(t *testing.T, pid int) memUse {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var m memUse
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			m.rss = kb / 1024
		case "VmHWM:":
			m.hwm = kb / 1024
		}
	}
	if m.rss == 0 {
		t.Fatalf("no VmRSS for pid %d", pid)
	}
	return m
}
