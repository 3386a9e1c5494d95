package lbconfig

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/vrrp"
)

// guardModel is a cluster on an interface no test namespace has.
func guardModel(t *testing.T) *cluster.Model {
	t.Helper()
	m, err := cluster.New(cluster.Spec{Name: "ocp4", Node: "master-0", Interface: "idnsv-none0",
		APIVIPs: []netip.Addr{netip.MustParseAddr("192.0.2.5")}, IngressVIPs: []netip.Addr{netip.MustParseAddr("192.0.2.10")}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestGuardGate(t *testing.T) {
	gd := newGuard(guardModel(t), time.Hour)
	gd.g.Start(time.Now())
	p := lb.Plan{Instances: []lb.Instance{{Name: "ocp4_api_v4", VRID: 222, VIPs: []string{"192.0.2.5/32"}}}}
	if err := gd.gate(lb.Keepalived, p); !errors.Is(err, vrrp.ErrListening) {
		t.Errorf("keepalived inside the window: %v", err)
	}
	if err := gd.gate(lb.HAProxyCfg, p); err != nil {
		t.Errorf("haproxy is never held: %v", err)
	}

	// Once claimed, keepalived is never held again.
	gd = newGuard(guardModel(t), time.Nanosecond)
	gd.g.Start(time.Now().Add(-time.Second))
	if err := gd.gate(lb.Keepalived, p); err != nil {
		t.Fatalf("After the window: %v", err)
	}
	if !gd.claimed.Load() {
		t.Error("Not marked claimed")
	}
}

// TestGuardOpensWithoutListener: when the listener cannot run (here: no
// such interface), nothing can be detected and nothing is held back.
func TestGuardOpensWithoutListener(t *testing.T) {
	gd := newGuard(guardModel(t), time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	wait := gd.run(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for !gd.open.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := gd.gate(lb.Keepalived, lb.Plan{}); err != nil {
		t.Errorf("Guard without a listener held keepalived: %v", err)
	}
	cancel()
	wait()
}
