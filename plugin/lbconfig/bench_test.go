package lbconfig

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kube/kubefake"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// BenchmarkReaction measures a change in the API (an apiserver leaves or
// comes back in default/kubernetes) to the new haproxy.cfg on disk, through
// real informers on a fake clientset, the 100 ms debounce, the render, the
// real keepalived/haproxy validation and the atomic write.
func BenchmarkReaction(b *testing.B) {
	l, dir := newPlugin(b, "")
	client := fake.NewClientset(
		masterNode("master-0", "198.51.100.11"), masterNode("master-1", "198.51.100.12"), masterNode("master-2", "198.51.100.13"),
		apiSlice("198.51.100.11", "198.51.100.12", "198.51.100.13"),
	)
	l.newClient = func() (kube.Client, error) { return kubefake.FromClientset(client), nil }
	if err := l.Start(); err != nil {
		b.Fatal(err)
	}
	defer l.Stop()
	path := filepath.Join(dir, "haproxy.cfg")
	wait := func(want bool) {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			s, _ := os.ReadFile(path)
			if strings.Contains(string(s), "master-2") == want {
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		b.Fatal("haproxy.cfg did not follow within 10 s")
	}
	wait(true)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		ips := []string{"198.51.100.11", "198.51.100.12", "198.51.100.13"}
		present := i%2 == 1
		if !present {
			ips = ips[:2]
		}
		if _, err := client.DiscoveryV1().EndpointSlices("default").Update(ctx, apiSlice(ips...), metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		wait(present)
	}
}
