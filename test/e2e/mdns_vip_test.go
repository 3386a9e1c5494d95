//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/infradns/infradns/test/e2e/lab"
)

// TestMDNSVIPClaim has a rogue host announce, without a key, node names that
// point at the API VIP: the node resolver (apiint and mdnsnodes in one
// server block, as deployed) never serves the VIP as a node's address, keeps
// the rogue's other address, and counts the VIP records it dropped.
func TestMDNSVIPClaim(t *testing.T) {
	l := lab.New(t, lab.Config{Prefix: "mvip", Nodes: 2, TeardownGrace: time.Second})
	observer, rogueNode := l.Nodes()[0], l.Nodes()[1]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	dir := t.TempDir()
	rogue := filepath.Join(dir, "rogue")
	if out, err := exec.Command("go", "build", "-o", rogue, lab.Path(t, "test/e2e/internal/rogue")).CombinedOutput(); err != nil {
		t.Fatalf("build rogue: %v\n%s", err, out)
	}
	vip, other := lab.Host4(200), lab.Host4(171)
	corefile := filepath.Join(dir, "Corefile")
	body := fmt.Sprintf(`.:53 {
    prometheus :9153
    ready :%d
    apiint %s {
        zone %s
    }
    mdnsnodes {
        zone %s
        cluster ocp4
        interface eth0
    }
}
`, readyPort, vip, domain, domain)
	if err := os.WriteFile(corefile, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	startMDNSResolvers(t, []*lab.Node{observer}, "coredns", corefile, readyPort)
	announce := func(host, addrs string) {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		if res, err := rogueNode.Run(rctx, rogue, "-mode", "announce", "-host", host, "-addr", addrs); err != nil {
			t.Fatalf("rogue %s %s: %v\n%s", host, addrs, err, res.Stdout)
		}
	}
	obs := []*lab.Node{observer}

	// The VIP alongside an address of its own: the name is served, without the VIP.
	announce("master-2", vip.String()+","+other.String())
	if _, err := mdnsWaitAll(ctx, time.Now(), obs, 53, mdnsName("master-2"), "A", mdnsExactly(other)); err != nil {
		t.Fatalf("master-2 (announced with the API VIP and %v): %v", other, err)
	}
	// The VIP alone: nothing left to serve.
	announce("master-3", vip.String())
	lab.Eventually(t, mdnsBound, 50*time.Millisecond, "VIP records dropped", func() error {
		if d := mdnsDropped(ctx, t, observer, 9153); d["vip"] < 2 {
			return fmt.Errorf("dropped %v, want at least 2 for vip", d)
		}
		return nil
	})
	qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
	defer qcancel()
	for _, c := range []struct {
		name  string
		check func(mdnsAnswer) error
	}{
		{"master-3", mdnsNXDOMAIN},
		{"master-2", mdnsExactly(other)},
		{"api-int", mdnsExactly(vip)},
	} {
		a, err := mdnsLookup(qctx, observer, 53, mdnsName(c.name), "A")
		if err == nil {
			err = c.check(a)
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
