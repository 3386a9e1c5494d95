//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/test/e2e/lab"
)

// The rogue host's flood (issue 25): what any host on the link can send.
const (
	rogueRate = 1000 // adverts a second
	// rogueQuiet is each window of the flood in which nothing may change:
	// before the graceful hand-over, and after the cluster settles again.
	rogueQuiet = 6 * time.Second
	// rogueRSSLimit is how much lbconfig's process may grow over the flood.
	rogueRSSLimit = 8 << 20
)

var resignedBy = regexp.MustCompile(`resigned by (\S+): its open connections`)

// rogueFlood has a host on the bridge that is no node flood the link with
// VRRP adverts (vrrpflood: 255 addresses each, random router IDs and the
// cluster's, spoofed sources among them the nodes' own addresses, a third
// resignations, and resignations of the VIP under foreign router IDs) while
// the client calls the VIP, and a graceful hand-over (SIGTERM of the
// holder's keepalived) happens in the middle of it. Nothing may change but
// the hand-over: no VRRP state change and no failed request in the quiet
// windows, the hand-over loses no request and is relayed to the node that
// resigned (never to the rogue or a forged source), and lbconfig's resident
// memory grows by less than 8 MiB on every node.
func (v *vrrpLab) rogueFlood() {
	t := v.t
	t.Helper()
	flood := filepath.Join(t.TempDir(), "vrrpflood")
	if out, err := exec.Command("go", "build", "-o", flood, lab.Path(t, "test/e2e/internal/vrrpflood")).CombinedOutput(); err != nil {
		t.Fatalf("build vrrpflood: %v\n%s", err, out)
	}
	rogue := v.lab.AddClient("rogue")
	h := v.waitSettled("before the rogue's flood")
	conf, err := os.ReadFile(v.kaConf(h))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`virtual_router_id (\d+)`).FindSubmatch(conf)
	if m == nil {
		t.Fatalf("no virtual_router_id in %s:\n%s", v.kaConf(h), conf)
	}
	rss := func() []int64 {
		out := make([]int64, len(v.nodes))
		for i, vn := range v.nodes {
			b, err := kubetest.RSS(vn.coredns.Pid())
			if err != nil {
				t.Fatalf("%s: %v", vn.n.Name, err)
			}
			out[i] = b
		}
		return out
	}
	counts := func(verdict string) []int {
		out := make([]int, len(v.nodes))
		for i := range v.nodes {
			out[i] = max(0, metricCount(v.metrics(i), `coredns_lbconfig_vrrp_adverts_total{verdict="`+verdict+`"}`))
		}
		return out
	}
	otherBefore, logBefore := counts("other"), make([]int, len(v.nodes))
	for i, vn := range v.nodes {
		logBefore[i] = len(vn.coredns.Log())
	}
	rssBefore := rss()

	quiet := func(what string, from time.Time) {
		t.Helper()
		n0 := v.transitions()
		time.Sleep(rogueQuiet)
		if n := v.transitions() - n0; n != 0 {
			t.Errorf("rogue flood, %s: %d VRRP state changes in %s, want 0", what, n, rogueQuiet)
		}
		reqs, fails := 0, 0
		for _, r := range v.probes() {
			if !r.start.Before(from) && r.end.Before(from.Add(rogueQuiet)) {
				reqs++
				if !r.ok {
					fails++
				}
			}
		}
		t.Logf("rogue flood, %s: %d of %d requests failed in %s", what, fails, reqs, rogueQuiet)
		if fails > 0 || reqs == 0 {
			t.Errorf("rogue flood, %s: %d of %d requests failed, want 0 of some", what, fails, reqs)
		}
	}

	duration := 3*rogueQuiet + 10*time.Second // both quiet windows and the hand-over
	t0 := time.Now()
	p := rogue.Start("vrrpflood", []string{flood, "-interface", lab.Iface, "-vrids", string(m[1]),
		"-vips", vrrpVIP.String(), "-spoof", lab.Subnet4.String(), "-rate", fmt.Sprint(rogueRate), "-duration", duration.String()})
	time.Sleep(time.Second) // the flood under way
	quiet("before the hand-over", time.Now())

	to, moved, st := v.stopKeepalived(h) // asserts 0 failed requests and a relay on the new holder
	t.Logf("rogue flood: SIGTERM keepalived on %s: VIP on %s after %d ms; client: %d of %d requests failed",
		v.nodes[h].n.Name, v.nodes[to].n.Name, vrrpMS(moved), st.failed, st.requests)
	if p.Exited() {
		t.Fatalf("the flood ended before the hand-over was done (%s): lengthen it\n%s", time.Since(t0), p.Log())
	}
	quiet("after the hand-over", time.Now())
	if p.Exited() {
		t.Errorf("the flood ended before the last quiet window did (%s)", time.Since(t0))
	}
	rssAfter := rss()
	if err := p.Stop(5 * time.Second); err != nil {
		t.Logf("vrrpflood: %v", err)
	}
	t.Logf("rogue flood: %s", strings.TrimSpace(p.Log()))

	otherAfter := counts("other")
	for i, vn := range v.nodes {
		grew := rssAfter[i] - rssBefore[i]
		t.Logf("rogue flood: %s: lbconfig's RSS %d → %d KiB (%+d KiB); adverts judged other: %d",
			vn.n.Name, rssBefore[i]>>10, rssAfter[i]>>10, grew>>10, otherAfter[i]-otherBefore[i])
		if grew > rogueRSSLimit {
			t.Errorf("rogue flood: lbconfig on %s grew by %d KiB, want < %d KiB", vn.n.Name, grew>>10, rogueRSSLimit>>10)
		}
		// The flood reached lbconfig: a few seconds at 1,000 a second, one
		// in eight under the cluster's router ID, half naming the VIP.
		if d := otherAfter[i] - otherBefore[i]; d < 1000 {
			t.Errorf("rogue flood: %s judged %d adverts about the cluster from strangers: did the flood reach it?", vn.n.Name, d)
		}
		// Only the node that resigned is ever a relay target.
		for _, sm := range resignedBy.FindAllStringSubmatch(vn.coredns.Log()[logBefore[i]:], -1) {
			if sm[1] != v.nodes[h].n.IPv4.String() {
				t.Errorf("rogue flood: %s relayed a VIP to %s, want only %s (%s resigned)", vn.n.Name, sm[1], v.nodes[h].n.IPv4, v.nodes[h].n.Name)
			}
		}
	}
}
