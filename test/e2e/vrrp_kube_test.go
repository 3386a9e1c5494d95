//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/test/e2e/lab"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// vrrpKubeBound bounds a cluster change reaching every node's files; the
// target is < 1 s, the bound is loose because the lab shares 2 cores.
const vrrpKubeBound = 20 * time.Second

// vrrpStartKube runs etcd and kube-apiserver in a namespace of their own on
// the lab bridge (the nodes reach it as they would a real control plane;
// the test reaches it through a socket opened inside that namespace) and
// registers the lab's nodes: a Node per node (control plane, InternalIP)
// and the default/kubernetes EndpointSlice listing every node's apiserver
// as ready.
func vrrpStartKube(t *testing.T, l *lab.Lab) *kubetest.Cluster {
	t.Helper()
	c := startLabKube(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var idx []int
	for i, n := range l.Nodes() {
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, controlPlaneNode(n.Name, n.IPv4.String()), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create Node %s: %v", n.Name, err)
		}
		idx = append(idx, i)
	}
	if _, err := c.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, vrrpAPISlice(l, idx), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the default/kubernetes EndpointSlice: %v", err)
	}
	return c
}

// vrrpKubeNS names the lab namespace of etcd and kube-apiserver.
const vrrpKubeNS = "kubeapi"

// startLabKube runs etcd and kube-apiserver in a namespace of their own on
// the lab bridge; the test's client reaches it through sockets opened in
// that namespace.
func startLabKube(t *testing.T, l *lab.Lab) *kubetest.Cluster {
	t.Helper()
	return startLabKubeWith(t, l)
}

// startLabKubeWith is startLabKube with more kube-apiserver arguments.
func startLabKubeWith(t *testing.T, l *lab.Lab, apiserverArgs ...string) *kubetest.Cluster {
	t.Helper()
	ns := l.AddClient(vrrpKubeNS)
	return kubetest.StartWith(t, kubetest.Options{
		BindAddress:        ns.IPv4.String(),
		Wrap:               []string{"ip", "netns", "exec", ns.NS},
		Dial:               ns.DialContext,
		Listen:             ns.Listen,
		ExtraAPIServerArgs: apiserverArgs,
	})
}

// vrrpAPISlice is default/kubernetes's EndpointSlice with the apiservers of
// the nodes in idx ready.
func vrrpAPISlice(l *lab.Lab, idx []int) *discoveryv1.EndpointSlice {
	var addrs []string
	for _, i := range idx {
		addrs = append(addrs, l.Nodes()[i].IPv4.String())
	}
	return apiServerSlice("kubernetes", vrrpAPIPort, addrs...)
}

// leaseHolder is who the API VIP's status Lease names, and when that
// holder last wrote it.
func (v *vrrpLab) leaseHolder(ctx context.Context) (string, time.Time, error) {
	name := vrrpCluster + "-api-vip-v4"
	l, err := v.kube.Client.CoordinationV1().Leases(vrrpLeaseNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", time.Time{}, err
	}
	if l.Spec.HolderIdentity == nil || l.Spec.RenewTime == nil {
		return "", time.Time{}, fmt.Errorf("lease %s has no holder or renew time: %+v", name, l.Spec)
	}
	return *l.Spec.HolderIdentity, l.Spec.RenewTime.Time, nil
}

// waitLease waits until the status Lease names node i and returns when,
// counted from from, that node wrote it (the lab's processes share the
// test's clock). A holder writes the Lease within a second of taking the
// VIP, so this is how long "kubectl get lease" lags behind a failover.
func (v *vrrpLab) waitLease(what string, from time.Time, i int) time.Duration {
	v.t.Helper()
	want := v.nodes[i].n.Name
	var renewed time.Time
	// A renewal is due every 10 s, and a SIGKILLed holder's lbconfig may
	// renew once more while keepalived's stale VIP is still on its link.
	lab.Eventually(v.t, 25*time.Second, 100*time.Millisecond, what, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h, at, err := v.leaseHolder(ctx)
		if err != nil {
			return err
		}
		if h != want {
			return fmt.Errorf("lease names %s, want %s", h, want)
		}
		renewed = at
		return nil
	})
	return renewed.Sub(from)
}

// dropBackend takes node drop's apiserver out of default/kubernetes and
// measures the change reaching every node's haproxy.cfg and the client no
// longer being served by it. No client request may fail: the holder's
// haproxy is reloaded in master-worker mode.
func (v *vrrpLab) dropBackend(drop int) {
	v.t.Helper()
	var keep []int
	for i := range v.nodes {
		if i != drop {
			keep = append(keep, i)
		}
	}
	gone := netip.AddrPortFrom(v.nodes[drop].n.IPv4, vrrpAPIPort).String()
	for i := range v.nodes {
		if b, err := os.ReadFile(v.haConf(i)); err != nil || !strings.Contains(string(b), gone) {
			v.t.Fatalf("%s: haproxy.cfg does not list %s before the change (%v):\n%s", v.nodes[i].n.Name, gone, err, b)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	if _, err := v.kube.Client.DiscoveryV1().EndpointSlices("default").Update(ctx, vrrpAPISlice(v.lab, keep), metav1.UpdateOptions{}); err != nil {
		v.t.Fatal(err)
	}
	onDisk := make([]time.Duration, len(v.nodes))
	lab.Eventually(v.t, vrrpKubeBound, 10*time.Millisecond, fmt.Sprintf("every haproxy.cfg drops %s", gone), func() error {
		var left []string
		for i := range v.nodes {
			if onDisk[i] != 0 {
				continue
			}
			b, err := os.ReadFile(v.haConf(i))
			if err != nil {
				return err
			}
			if strings.Contains(string(b), gone) {
				left = append(left, v.nodes[i].n.Name)
				continue
			}
			onDisk[i] = time.Since(t0)
		}
		if len(left) > 0 {
			return fmt.Errorf("still listed on %v", left)
		}
		return nil
	})
	var slowest time.Duration
	for _, d := range onDisk {
		slowest = max(slowest, d)
	}
	// Served only by the others once vrrpSteadyOK answers in a row came
	// from them.
	old := "hello_from_" + v.nodes[drop].n.Name
	var fromOld int
	lab.Eventually(v.t, vrrpKubeBound, 20*time.Millisecond, "client no longer served by "+v.nodes[drop].n.Name, func() error {
		var rs []fakeapiResult
		for _, r := range v.probes() {
			if !r.start.Before(t0) {
				rs = append(rs, r)
			}
		}
		if len(rs) < vrrpSteadyOK {
			return fmt.Errorf("%d requests since the change", len(rs))
		}
		for _, r := range rs[len(rs)-vrrpSteadyOK:] {
			if !r.ok || r.detail == old {
				return fmt.Errorf("latest answers include %v %q", r.ok, r.detail)
			}
		}
		fromOld = 0
		for _, r := range rs {
			if r.ok && r.detail == old {
				fromOld++
			}
		}
		return nil
	})
	served := time.Since(t0)
	st := v.waitClient("client served after the backend change", t0)
	v.t.Logf("(d) API change: %s's apiserver left default/kubernetes: haproxy.cfg rewritten on every node after %v (slowest %d ms); client served only by the others after %d ms (%d answers from it in between); %d of %d requests failed",
		v.nodes[drop].n.Name, msList(onDisk), vrrpMS(slowest), vrrpMS(served), fromOld, st.failed, st.requests)
	if st.failed != 0 {
		v.errorf("%d of %d client requests failed while haproxy was reloaded for the backend change (last error %q), want 0", st.failed, st.requests, st.lastErr)
	}
}

func msList(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = fmt.Sprint(d.Milliseconds())
	}
	return "[" + strings.Join(s, " ") + "] ms"
}
