//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/infradns/infradns/test/e2e/lab"
)

// TestMDNSKeyRotation follows the operator guide's key rotation on three
// lab nodes, each running a keyed resolver and a signing publisher: the key
// file is stepped with `infradns gen-key -stage`, `-promote`, `-retire`,
// copied to one node at a time, and that node's publisher and resolver
// restarted. After every single node's update, every resolver must serve
// every node's name and no resolver may have refused an announcement: nodes a
// step apart accept each other, so the rotation loses no name.
//
// A real Prometheus scrapes the three resolvers from before the first
// announcement and evaluates deploy/monitoring's alert rules: the healthy
// signed cluster, and the cluster after the rotation, must have no alert
// pending or firing. The lab's links have IPv6 link-local addresses (every
// Linux interface does), so every signed answer arrives twice; the copy
// was refused as a replay (and counted as unsigned), which raised
// InfradnsMDNSRejections on every healthy signed cluster.
func TestMDNSKeyRotation(t *testing.T) {
	l := lab.New(t, lab.Config{Prefix: "mdnskr", Nodes: 3, TeardownGrace: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	nodes := l.Nodes()
	dir := t.TempDir()
	master := filepath.Join(dir, "mdns.key")
	infradns := lab.Binary(t, "infradns")
	step := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(infradns, append([]string{"gen-key", "-o", master}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("gen-key %v: %v\n%s", args, err, out)
		}
	}
	step()
	const port, ready, metrics = 5302, readyPort + 2, 9156
	keyOf := func(i int) string { return filepath.Join(dir, fmt.Sprintf("node%d.key", i)) }
	install := func(i int) {
		t.Helper()
		b, err := os.ReadFile(master)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyOf(i), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	type running struct{ pub, dns *lab.Process }
	procs := make([]running, len(nodes))
	start := func(i int) {
		t.Helper()
		if p := procs[i]; p.pub != nil {
			_ = p.pub.Stop(time.Second)
			_ = p.dns.Stop(time.Second)
		}
		n := nodes[i]
		procs[i].pub = n.Start("mdns-publisher", mdnsPublisherArgs(t, "--key", keyOf(i)))
		procs[i].dns = n.Start("coredns", []string{lab.Binary(t, "coredns"), "-conf", mdnsCorefile(t, port, ready, metrics, keyOf(i))})
	}
	// rejected: what the resolvers refused for a reason the rejections
	// alert watches (a reordered copy or a late reply is not a replay).
	rejected := func() map[string]float64 {
		t.Helper()
		got := map[string]float64{}
		for i, n := range nodes {
			m, err := mdnsRejected(ctx, n, metrics)
			if err != nil {
				t.Fatalf("node%d metrics: %v\n%s", i, err, lab.Tail(procs[i].dns.LogPath, 20))
			}
			for _, reason := range []string{"signature", "stale", "replay", "conflict"} {
				if m[reason] != 0 {
					got[fmt.Sprintf("node%d %s", i, reason)] = m[reason]
				}
			}
		}
		return got
	}
	// allServed: every resolver serves every node's name.
	allServed := func(what string) {
		t.Helper()
		for _, n := range nodes {
			if _, err := mdnsWaitAll(ctx, time.Now(), nodes, port, mdnsName(n.Name), "A", mdnsExactly(n.IPv4)); err != nil {
				t.Fatalf("%s: %s not served everywhere: %v", what, n.Name, err)
			}
		}
		// Restarted resolvers count from 0: sum what each has refused now.
		if r := rejected(); len(r) != 0 {
			t.Errorf("%s: announcements refused: %v", what, r)
		}
	}
	var targets []string
	for _, n := range nodes {
		targets = append(targets, netip.AddrPortFrom(n.IPv4, metrics).String())
	}
	prom := startLabPrometheus(t, nodes[0], targets...)
	// The resolvers first, scraped at 0, then the publishers: the first
	// answers and their copies are within what the rates see.
	for i, n := range nodes {
		install(i)
		procs[i].dns = n.Start("coredns", []string{lab.Binary(t, "coredns"), "-conf", mdnsCorefile(t, port, ready, metrics, keyOf(i))})
	}
	prom.waitUp(t, ctx, len(nodes))
	for i, n := range nodes {
		procs[i].pub = n.Start("mdns-publisher", mdnsPublisherArgs(t, "--key", keyOf(i)))
	}
	allServed("one key everywhere")
	counters := func(what string) {
		t.Helper()
		got, err := prom.query(ctx, `sum(coredns_mdnsnodes_announcements_accepted_total) or vector(0)`)
		if err != nil {
			t.Fatal(err)
		}
		rej, err := prom.query(ctx, `sum by (reason) (coredns_mdnsnodes_announcements_rejected_total{reason=~"replay|unsigned|signature"})`)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("measure: %s: announcements accepted %v, rejected %v (summed over the %d resolvers)", what, got["map[]"], rej, len(nodes))
	}
	rules := prom.checkQuiet(t, ctx, "one key everywhere")
	counters("one key everywhere")
	// Not vacuous: the rate the rejections alert takes saw signed answers.
	if acc, err := prom.query(ctx, `sum(increase(coredns_mdnsnodes_announcements_accepted_total[5m]))`); err != nil || acc["map[]"] < float64(len(nodes)) {
		t.Errorf("accepted announcements in the alerts' window: %v, %v; want at least one per node", acc, err)
	}
	t.Logf("%d alert rules evaluated by Prometheus over the healthy signed cluster", len(rules))
	for _, s := range []string{"-stage", "-promote", "-retire"} {
		// Twice, as a retried script would: a step is idempotent (a second
		// -promote swapped the keys back, and the old key signed again).
		step(s)
		step(s)
		for i := range nodes {
			install(i)
			start(i)
			allServed(fmt.Sprintf("%s on node0..node%d", s, i))
		}
		t.Logf("%s: every node updated one by one, every name served by every resolver after each, 0 announcements refused", s)
	}
	prom.checkQuiet(t, ctx, "after the rotation")
	counters("after the rotation")
}
