//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/test/e2e/lab"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLBConfigAgainstKubeAPIServer runs bin/coredns with the lbconfig plugin
// against a real kube-apiserver: EndpointSlice changes must reach haproxy's
// file (the test reports how fast; the target is < 1 s), and an API outage
// of 30 s must leave the file untouched and the process running.
// keepalived's output is not rendered here: keepalived -t refuses VRRP on lo, and a real interface needs a lab
// namespace (the lab e2e covers it). It stays on the host: reloads, the
// VRRP guard and health checks are off, so it only renders, validates with
// the real keepalived and haproxy and writes files in a temporary directory.
func TestLBConfigAgainstKubeAPIServer(t *testing.T) {
	// Most of it is a 30-s API outage: it waits beside the other
	// outage test (see kubeParallel) instead of after it.
	kubeParallel(t)
	c := kubetest.Start(t)
	ctx := context.Background()

	ready := true
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, controlPlaneNode("master-0", "198.51.100.10"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, apiServerSlice("kubernetes", 6443, "198.51.100.10"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	haproxy := filepath.Join(dir, "haproxy.cfg")
	dnsPort := freeUDPPort(t)
	conf := fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    lbconfig {
        cluster ocp4
        api-vip 192.0.2.5
        interface lo
        node master-0
        kubeconfig %s
        haproxy %s
        reload keepalived none
        reload haproxy none
        health-check api none
        health-check ingress none
        vrrp-guard off
        track-dir %s
    }
    whoami
}
`, dnsPort, c.Kubeconfig, haproxy, dir)
	core := startHostCoreDNS(t, dir, conf)

	contains := func(path, s string) func() error {
		return func() error {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if !bytes.Contains(b, []byte(s)) {
				return fmt.Errorf("%s has no %q", filepath.Base(path), s)
			}
			return nil
		}
	}
	lab.Eventually(t, 20*time.Second, 20*time.Millisecond, "first render", func() error {
		return contains(haproxy, "198.51.100.10:6443")()
	})

	// Each change adds or removes one ready apiserver; the time runs from
	// just before the API call to the file on disk showing it.
	addrs := []string{"198.51.100.10"}
	change := func(i int) time.Duration {
		t.Helper()
		var want string
		var gone bool
		if i%2 == 0 {
			want = fmt.Sprintf("198.51.100.%d", 20+i)
			addrs = append(addrs, want)
		} else {
			want = addrs[len(addrs)-1]
			addrs = addrs[:len(addrs)-1]
			gone = true
		}
		began := time.Now()
		sl, err := c.Client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sl.Endpoints = []discoveryv1.Endpoint{{Addresses: slices.Clone(addrs), Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}
		if _, err := c.Client.DiscoveryV1().EndpointSlices("default").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		lab.Eventually(t, 5*time.Second, 2*time.Millisecond, "change "+want, func() error {
			err := contains(haproxy, want+":6443")()
			if gone {
				if err == nil {
					return fmt.Errorf("%s still in haproxy.cfg", want)
				}
				return nil
			}
			return err
		})
		return time.Since(began)
	}
	measure := func(label string, n, from int) {
		t.Helper()
		var d []time.Duration
		for i := range n {
			d = append(d, change(from+i))
		}
		slices.Sort(d)
		t.Logf("measure: %s change → haproxy.cfg over %d changes: min %v median %v max %v", label, n,
			d[0].Round(time.Millisecond), d[n/2].Round(time.Millisecond), d[n-1].Round(time.Millisecond))
		// The figures are reported, not asserted: the < 1 s target is a
		// speed, and speed is measured, not held to a timer a loaded CI
		// runner crosses (median 1.087 s once beside the other e2e tests,
		// 219-475 ms in the runs around it). What can fail is a lost
		// event: no periodic resync papers over one, so a change the
		// watch missed never reaches the file and change() fails at its
		// 5 s bound.
	}
	measure("before outage", 12, 0)

	// An outage of 30 s (the reconnect backoff reaches its 5 s cap after
	// ~6 s): the files stay as they were and coredns runs on.
	before := map[string][]byte{}
	stat := map[string]time.Time{}
	for _, p := range []string{haproxy} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		before[p], stat[p] = b, st.ModTime()
	}
	c.StopFor(30 * time.Second)
	if gone, err := core.Exited(); gone {
		t.Fatalf("coredns exited during the API outage: %v", err)
	}
	for _, p := range []string{haproxy} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, before[p]) || !st.ModTime().Equal(stat[p]) {
			t.Errorf("%s changed during the API outage:\n%s", filepath.Base(p), b)
		}
		if !strings.Contains(string(b), "198.51.100.10") {
			t.Errorf("%s lost its content during the outage", filepath.Base(p))
		}
	}

	// After the restart the watches resume on their own; the first change
	// waits for the next list (reconnect backoff capped at 5 s, 7.5 s with
	// jitter; client-go's default waited up to 60 s after a 60 s outage).
	back := time.Now()
	lab.Eventually(t, 20*time.Second, 100*time.Millisecond, "first change after restart", func() error {
		sl, err := c.Client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(sl.Endpoints, func(e discoveryv1.Endpoint) bool { return slices.Contains(e.Addresses, "198.51.100.99") }) {
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{"198.51.100.99"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
			if _, err := c.Client.DiscoveryV1().EndpointSlices("default").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		return contains(haproxy, "198.51.100.99:6443")()
	})
	t.Logf("first change on disk %v after the API server was ready again", time.Since(back).Round(time.Millisecond))
	// Back to the measured state, then measure again.
	sl, err := c.Client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sl.Endpoints = []discoveryv1.Endpoint{{Addresses: slices.Clone(addrs), Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}
	if _, err := c.Client.DiscoveryV1().EndpointSlices("default").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 5*time.Second, 10*time.Millisecond, "198.51.100.99 removed", func() error {
		if contains(haproxy, "198.51.100.99")() == nil {
			return fmt.Errorf("198.51.100.99 still in haproxy.cfg")
		}
		return nil
	})
	measure("after outage", 10, 100)
}
