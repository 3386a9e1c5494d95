//go:build e2e

package scale

import (
	"context"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/test/e2e/lab"
)

// TestScaleSmoke runs the scale benchmark's measurements on 100 Nodes with
// bin/coredns, both ways of reading node names, so `make bench-scale`
// cannot rot: every figure must come out, node names and address changes
// must be answered, and a heartbeat must start no render. It asserts no
// duration.
func TestScaleSmoke(t *testing.T) {
	c := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := Options{Nodes: 100, HeartbeatRate: 20, HeartbeatFor: 3 * time.Second, AddressChanges: 2}
	Populate(ctx, t, c, o.Nodes)
	o.Base = Baseline(ctx, t, c, o)
	t.Logf("the apiserver alone: %.0f bytes and %v CPU per heartbeat, %d Node watches of its own", o.Base.BytesPerBeat, o.Base.CPUPerBeat, o.Base.Watches)
	if o.Base.BytesPerBeat <= 0 {
		t.Errorf("no Node watch bytes measured for the apiserver alone")
	}
	bin := lab.Binary(t, "coredns")
	for i, cfg := range []Config{
		{Name: "nodes", Binary: bin, LBConfig: true},
		{Name: "nodes-service", Binary: bin, NodesService: true},
	} {
		o.FirstChange = 50 + 10*i
		r := Measure(ctx, t, c, cfg, o)
		t.Logf("%s: first answer %v, config %v, RSS %d/%d/%d KiB, %d heartbeats: %v CPU, %.0f renders, %.0f API bytes; address changes %v",
			r.Config, r.FirstAnswer, r.ConfigWritten, r.RSSSynced>>10, r.RSSAfter>>10, r.Peak>>10, r.Heartbeats, r.CPUBeats, r.Renders, r.APIBytes, r.AddressChange)
		// (Peak is at least the resident sizes sampled, by construction:
		// the kernel's VmHWM alone once read 20 KB below an earlier VmRSS.)
		if r.FirstAnswer <= 0 || (cfg.LBConfig && r.ConfigWritten <= 0) || r.RSSSynced <= 0 || r.RSSAfter <= 0 || r.Heartbeats == 0 || len(r.AddressChange) != o.AddressChanges {
			t.Errorf("%s: a figure is missing: %+v", cfg.Name, r)
		}
		if r.Renders != 0 {
			t.Errorf("%s: %.0f renders during %d heartbeats, want 0", cfg.Name, r.Renders, r.Heartbeats)
		}
		// mdnsnodes watches every Node, lbconfig three label or name
		// selections (control plane twice, itself; the routers each): with
		// the names service mdnsnodes watches none (and lbconfig is off).
		want := 1 + 3 + Routers
		if cfg.NodesService {
			want = 0
		}
		if r.NodeWatches != want {
			t.Errorf("%s: %d Node watches open, want %d", cfg.Name, r.NodeWatches, want)
		}
	}
	if d := Herd(t, c, Config{Name: "herd", Binary: bin, NodesService: true}, 2); len(d) != 2 || d[0] <= 0 {
		t.Errorf("herd: %v", d)
	}
	b, cpu := Watchers(ctx, t, c, Config{Name: "watchers", Binary: bin}, 2, o)
	t.Logf("2 watchers: %.0f bytes and %v apiserver CPU per heartbeat", b, cpu)
	if b <= 0 {
		t.Errorf("2 Node watchers: %.0f bytes per heartbeat", b)
	}
}
