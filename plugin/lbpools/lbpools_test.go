package lbpools

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kube/kubefake"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestServeDNSPassesOn(t *testing.T) {
	l := &LBPools{Next: test.NextHandler(dns.RcodeRefused, nil)}
	m := new(dns.Msg)
	m.SetQuestion("example.org.", dns.TypeA)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	if rc, err := l.ServeDNS(context.Background(), rec, m); rc != dns.RcodeRefused || err != nil {
		t.Errorf("ServeDNS = %d, %v; want the next plugin's REFUSED", rc, err)
	}
}

// TestAllocate runs two instances against one fake API: one writes,
// Services get their addresses and events, and when the writer stops the
// other takes over and allocates the next Service.
func TestAllocate(t *testing.T) {
	cs := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "infradns", Name: kube.PoolsConfigMap},
			Data: map[string]string{PoolsKey: "pools:\n- name: default\n  addresses: [192.0.2.10-192.0.2.20]\n"}},
		svc("shop/web", ptr(kube.DefaultClass)),
		svc("shop/db", ptr(kube.DefaultClass), "192.0.2.15"),
		svc("shop/other", ptr("metallb.io/metallb")),
	)
	client := kubefake.FromClientset(cs)
	newInstance := func(id string) *LBPools {
		return &LBPools{
			class: kube.DefaultClass, poolsNS: "infradns", poolsName: kube.PoolsConfigMap,
			leaseNS: "infradns", leaseName: kube.AllocatorLease, leaseDuration: 600 * time.Millisecond,
			identity: id, retry: 50 * time.Millisecond, debounce: 5 * time.Millisecond,
			newClient: func() (kube.Client, error) { return client, nil },
		}
	}
	a, b := newInstance("a"), newInstance("b")
	a.Start()
	defer a.Stop()
	b.Start()
	defer b.Stop()
	ctx := context.Background()
	status := func(name string) string {
		s, err := cs.CoreV1().Services("shop").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		var ips []string
		for _, in := range s.Status.LoadBalancer.Ingress {
			ips = append(ips, in.IP+"/"+string(ptrOr(in.IPMode)))
		}
		return strings.Join(ips, " ")
	}
	eventually(t, "web allocated", func() error {
		if got := status("web"); got != "192.0.2.10/VIP" {
			return fmt.Errorf("web: %q", got)
		}
		return nil
	})
	if got := status("db"); got != "192.0.2.15/" {
		t.Errorf("db: %q, want its address kept as it was (no rewrite)", got)
	}
	if got := status("other"); got != "" {
		t.Errorf("another class's Service: %q, want untouched", got)
	}
	if a.leading.Load() == b.leading.Load() {
		t.Errorf("leading: a %v, b %v; want exactly one", a.leading.Load(), b.leading.Load())
	}
	eventually(t, "an event IPAllocated on web", func() error {
		evs, err := cs.CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(evs.Items) != 1 || evs.Items[0].Reason != "IPAllocated" || evs.Items[0].InvolvedObject.Name != "web" {
			return fmt.Errorf("events %+v; want one IPAllocated on web", evs.Items)
		}
		return nil
	})

	writer, other := a, b
	if b.leading.Load() {
		writer, other = b, a
	}
	writer.Stop()
	if _, err := cs.CoreV1().Services("shop").Create(ctx, svc("shop/next", ptr(kube.DefaultClass)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "next allocated by the other instance", func() error {
		if got := status("next"); got != "192.0.2.11/VIP" {
			return fmt.Errorf("next: %q (other leads: %v)", got, other.leading.Load())
		}
		return nil
	})
}

func ptrOr[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPoolsKeepLastValid: an edit that does not parse and a deleted
// ConfigMap leave the last valid pools in use; before any, there are none.
func TestPoolsKeepLastValid(t *testing.T) {
	l := &LBPools{poolsNS: "infradns", poolsName: kube.PoolsConfigMap, class: kube.DefaultClass}
	cm := func(text string) *corev1.ConfigMap {
		return &corev1.ConfigMap{Data: map[string]string{PoolsKey: text}}
	}
	names := func(c []string) string { return strings.Join(c, ",") }
	for _, step := range []struct {
		what  string
		cm    *corev1.ConfigMap
		pools string
		valid float64
	}{
		{"no ConfigMap yet", nil, "", 1},
		{"broken before any valid", cm("pools: [{name: a}]"), "", 0},
		{"valid", cm("pools: [{name: a, addresses: [192.0.2.1]}]"), "a", 1},
		{"broken edit", cm("pools: [{name: b, adresses: [192.0.2.2]}]"), "a", 0},
		{"empty key", cm(""), "a", 0},
		{"fixed", cm("pools: [{name: b, addresses: [192.0.2.2]}, {name: c, addresses: [192.0.2.3]}]"), "b,c", 1},
		{"deleted", nil, "b,c", 1},
	} {
		cfg := l.pools(step.cm)
		var got []string
		for _, p := range cfg.Pools {
			got = append(got, p.Name)
		}
		if names(got) != step.pools {
			t.Errorf("%s: pools %q, want %q", step.what, names(got), step.pools)
		}
		if v := testutil.ToFloat64(configValid()); v != step.valid {
			t.Errorf("%s: config_valid %v, want %v", step.what, v, step.valid)
		}
	}
}
