//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/infradns/infradns/internal/kubetest"
)

// TestKubeAPIServerReadyzLatency measures, against a real kube-apiserver,
// the two times haproxy's API checks bound: the TLS handshake (a check's
// connect phase, timeout connect 300ms) and the /readyz answer after it
// (timeout check 1s), each on a new connection as haproxy checks, idle and
// while clients keep the apiserver busy. The checks are tuned to find a
// frozen apiserver fast (TestHAProxyFrozenAPIServer); this shows what
// margin a healthy one has before they would mark it down.
func TestKubeAPIServerReadyzLatency(t *testing.T) {
	c := kubetest.Start(t)
	u, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	sample := func(n int) (hs, rd []time.Duration) {
		for range n {
			h, r, err := readyzOnce(u.Host, c.Token)
			if err != nil {
				t.Fatal(err)
			}
			hs, rd = append(hs, h), append(rd, r)
			time.Sleep(10 * time.Millisecond)
		}
		return hs, rd
	}
	report := func(what string, hs, rd []time.Duration) (time.Duration, time.Duration) {
		slices.Sort(hs)
		slices.Sort(rd)
		q := func(d []time.Duration, p int) int64 { return d[(len(d)-1)*p/100].Microseconds() }
		t.Logf("%s, %d checks: TLS handshake p50/p99/max %d/%d/%d µs; /readyz answer p50/p99/max %d/%d/%d µs",
			what, len(hs), q(hs, 50), q(hs, 99), q(hs, 100), q(rd, 50), q(rd, 99), q(rd, 100))
		return hs[len(hs)-1], rd[len(rd)-1]
	}
	ih, ir := sample(200)
	report("idle", ih, ir)

	// Load: clients creating and listing ConfigMaps as fast as they can.
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 5000, 5000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Stopped by a flag, not by cancelling ctx: a cancelled request makes
	// client-go log an error per client.
	ctx := context.Background()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	calls := 0
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("load-%d-%d", w, i%50)},
					Data: map[string]string{"k": fmt.Sprint(i)}}
				_, _ = cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
				_, _ = cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
				_ = cs.CoreV1().ConfigMaps("default").Delete(ctx, cm.Name, metav1.DeleteOptions{})
				mu.Lock()
				calls += 3
				mu.Unlock()
			}
		}()
	}
	began := time.Now()
	hs, rd := sample(300)
	elapsed := time.Since(began)
	stop.Store(true)
	wg.Wait()
	t.Logf("load: %d API calls in %v from 16 clients", calls, elapsed.Round(time.Millisecond))
	maxHS, maxRD := report("busy apiserver", hs, rd)
	if maxHS >= 300*time.Millisecond {
		t.Errorf("a healthy apiserver's TLS handshake took %v: haproxy's checks (timeout connect 300ms) would count it as frozen", maxHS)
	}
	if maxRD >= time.Second {
		t.Errorf("a healthy apiserver's /readyz took %v: haproxy's checks (timeout check 1s) would fail it", maxRD)
	}
}

// readyzOnce is one check as haproxy makes it: a new TCP connection, a TLS
// handshake, GET /readyz, the answer.
func readyzOnce(hostport, token string) (handshake, answer time.Duration, err error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	raw, err := d.Dial("tcp", hostport)
	if err != nil {
		return 0, 0, err
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true}) // the test cluster's own certificate
	t0 := time.Now()
	if err := c.Handshake(); err != nil {
		return 0, 0, err
	}
	t1 := time.Now()
	if _, err := fmt.Fprintf(c, "GET /readyz HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n", token); err != nil {
		return 0, 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, 0, err
	}
	resp.Body.Close()
	t2 := time.Now()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("/readyz: status %d", resp.StatusCode)
	}
	return t1.Sub(t0), t2.Sub(t1), nil
}
