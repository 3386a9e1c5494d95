//go:build e2e

package scale

import (
	"context"
	"slices"
	"strings"
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

// TestScaleLBSmoke runs the LoadBalancer-Services scenario of `make
// bench-scale-lb` at 50 Nodes and 20 Services with 1-s windows, so it
// cannot rot: every Service gets its address, every figure comes out, the
// report renders, and a Local Service's endpoint change moves its own
// routes alone (Move.Check). It asserts no duration.
func TestScaleLBSmoke(t *testing.T) {
	c := kubetest.StartWith(t, kubetest.Options{ExtraAPIServerArgs: LBAPIServerArgs})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := LBOptions{Nodes: 50, Services: 20, Rate: 20, HeartbeatRate: 20, Window: time.Second}
	Populate(ctx, t, c, o.Nodes)
	r := MeasureLB(ctx, t, c, lab.Binary(t, "coredns"), o)
	if len(r.Alloc) != o.Services || slices.Min(r.Alloc) <= 0 {
		t.Errorf("allocation times: %v", r.Alloc)
	}
	for name, cs := range map[string][2]Cost{"allocator": r.Allocator, "announcer": r.Announcer} {
		for k, c := range cs {
			if c.Beats == 0 || c.RSS <= 0 || c.Total <= 0 {
				t.Errorf("%s, window %d: a figure is missing: %+v", name, k, c)
			}
		}
	}
	if r.AnnouncerRoutes != float64(r.WantRoutes) || r.AllocatorRoutes != float64(r.WantRoutes) || r.WantRoutes == 0 {
		t.Errorf("routes for the Services: allocator %.0f, announcer %.0f, want %d", r.AllocatorRoutes, r.AnnouncerRoutes, r.WantRoutes)
	}
	if len(r.Moves) != 2 {
		t.Fatalf("%d endpoint changes measured, want 2", len(r.Moves))
	}
	for _, m := range r.Moves {
		m.Check(t)
	}
	rep := LBReport(r, o, "smoke")
	if n := strings.Count(rep, "\n|---"); n != 3 {
		t.Errorf("the report has %d tables, want 3:\n%s", n, rep)
	}
	t.Log(rep)
}
