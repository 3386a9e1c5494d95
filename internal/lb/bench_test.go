package lb

import (
	"context"
	"fmt"
	"testing"

	"github.com/infradns/infradns/internal/cluster"
)

// benchSnapshot is n nodes: three control-plane nodes with apiservers and a
// router on every node, rendered in unicast mode so the ingress peer list
// grows with the cluster (the largest output the plan can produce).
func benchSnapshot(n int) (Snapshot, *cluster.Model) {
	s := snap(n, false)
	s.APIServers = s.APIServers[:min(3, n)]
	s.IngressNodes = nil
	for i := range s.Nodes {
		s.Nodes[i].ControlPlane = i < 3
		s.IngressNodes = append(s.IngressNodes, s.Nodes[i].Name)
	}
	c := spec(false)
	c.VRRP.Unicast = true
	return s, mustModel(c)
}

// BenchmarkRender is the pure part: Desired and both templates.
func BenchmarkRender(b *testing.B) {
	for _, n := range []int{3, 100, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			s, c := benchSnapshot(n)
			b.ReportAllocs()
			for b.Loop() {
				p, err := Desired(s, c)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := RenderKeepalived(p); err != nil {
					b.Fatal(err)
				}
				if _, err := RenderHAProxy(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRenderValidate adds the real keepalived -t and haproxy -c runs,
// which dominate: what one change in the cluster costs before the write.
func BenchmarkRenderValidate(b *testing.B) {
	tools := labTools(b)
	ctx := context.Background()
	for _, n := range []int{3, 100, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			s, c := benchSnapshot(n)
			b.ReportAllocs()
			var size int
			for b.Loop() {
				p, err := Desired(s, c)
				if err != nil {
					b.Fatal(err)
				}
				k, err := RenderKeepalived(p)
				if err != nil {
					b.Fatal(err)
				}
				h, err := RenderHAProxy(p)
				if err != nil {
					b.Fatal(err)
				}
				if err := tools.Validate(ctx, Keepalived, k); err != nil {
					b.Fatal(err)
				}
				if err := tools.Validate(ctx, HAProxyCfg, h); err != nil {
					b.Fatal(err)
				}
				size = len(k) + len(h)
			}
			b.ReportMetric(float64(size), "bytes-out")

		})
	}
}
