package lbconfig

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kube/kubefake"
	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/lb/netnstest"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestServeDNSPassesOn(t *testing.T) {
	l := New()
	l.Next = test.NextHandler(dns.RcodeRefused, nil)
	m := new(dns.Msg)
	m.SetQuestion("api.ocp4.example.com.", dns.TypeA)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	rc, err := l.ServeDNS(context.Background(), rec, m)
	if rc != dns.RcodeRefused || err != nil || rec.Msg != nil {
		t.Errorf("ServeDNS = %d, %v; wrote %v", rc, err, rec.Msg)
	}
}

// labTools runs keepalived -t and haproxy -c in a namespace made for the
// test that holds an eth0, so validation does not depend on the host's links.
func labTools(t testing.TB) lb.Tools {
	t.Helper()
	for _, tool := range []string{"keepalived", "haproxy"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (run hack/install-deps.sh as root): %v", tool, err)
		}
	}
	ns := netnstest.New(t, "plug")
	return lb.Tools{Wrap: []string{"ip", "netns", "exec", ns}, Dir: t.TempDir(), Timeout: 5 * time.Second}
}

func newPlugin(t testing.TB, extra string) (*LBConfig, string) {
	t.Helper()
	dir := t.TempDir()
	track := "track-dir " + dir
	if strings.Contains(extra, "track-dir") {
		track = ""
	}
	input := fmt.Sprintf(`lbconfig {
		cluster ocp4
		node master-0
		api-vip 192.0.2.5
		ingress-vip 192.0.2.10
		interface eth0
		%[3]s
		keepalived %[1]s/keepalived.conf
		haproxy %[1]s/haproxy.cfg
		reload keepalived sh -c "echo k >> %[1]s/reloads"
		reload haproxy sh -c "echo h >> %[1]s/reloads"
		vrrp-guard off
		%[2]s
	}`, dir, extra, track)
	l, err := parse(caddy.NewTestController("dns", input))
	if err != nil {
		t.Fatal(err)
	}
	l.tools = labTools(t)
	return l, dir
}

func masterNode(name, ip string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}},
	}
}

func apiSlice(ips ...string) *discoveryv1.EndpointSlice {
	name, port := "https", int32(6443)
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "kubernetes", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
	}
	return s
}

// TestLifecycleWithAPI runs the plugin's controller against a fake clientset
// with real informers and the real validators: start → files written and
// reloaded → an apiserver leaves → haproxy.cfg follows → stop.
func TestLifecycleWithAPI(t *testing.T) {
	l, dir := newPlugin(t, "")
	client := fake.NewClientset(
		masterNode("master-0", "198.51.100.11"), masterNode("master-1", "198.51.100.12"), masterNode("master-2", "198.51.100.13"),
		apiSlice("198.51.100.11", "198.51.100.12", "198.51.100.13"),
	)
	l.newClient = func() (kube.Client, error) { return kubefake.FromClientset(client), nil }
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	defer l.Stop()

	haproxy := filepath.Join(dir, "haproxy.cfg")
	waitFile(t, haproxy, func(s string) bool { return strings.Contains(s, "server master-2_v4 198.51.100.13:6443") })
	waitFile(t, filepath.Join(dir, "reloads"), func(s string) bool { return s == "k\nh\n" })
	if !l.Ready() {
		t.Error("Not ready after the first render")
	}
	k, _ := os.ReadFile(filepath.Join(dir, "keepalived.conf"))
	if !strings.Contains(string(k), "vrrp_instance ocp4_api_v4") || strings.Contains(string(k), "ingress_v4 {") {
		t.Errorf("keepalived.conf: want the API instance only (no router on master-0):\n%s", k)
	}

	if _, err := client.DiscoveryV1().EndpointSlices("default").Update(context.Background(),
		apiSlice("198.51.100.11", "198.51.100.12"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFile(t, haproxy, func(s string) bool { return !strings.Contains(s, "master-2") })
	waitFile(t, filepath.Join(dir, "reloads"), func(s string) bool { return s == "k\nh\nh\n" })

	l.Stop()
	l.Stop() // idempotent
}

// TestHostileAPI: an API that sends hostile values (a Node name and an
// InternalIP zone that would close a keepalived block and add a
// notify_master script, a zoned and a loopback apiserver, a port out of
// range) gets the good values rendered, validated by the real keepalived
// and haproxy, and the bad ones counted, never written.
func TestHostileAPI(t *testing.T) {
	l, dir := newPlugin(t, "unicast\nnode-ip 198.51.100.11")
	evil := masterNode("master-2", "198.51.100.13")
	evil.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.13%eth0}\n notify_master \"/bin/sh -c id\"\n{"}}
	bad := apiSlice("198.51.100.11", "fd00::1%lo}\n    server x 127.0.0.1:22 check\n", "::1")
	bad.Name = "kubernetes-bad"
	port := int32(70000)
	badPort := apiSlice("198.51.100.99")
	badPort.Name, badPort.Ports[0].Port = "kubernetes-port", &port
	client := fake.NewClientset(
		masterNode("master-0", "198.51.100.11"), masterNode("master-1", "198.51.100.12"),
		masterNode("master-3\n}\nglobal_defs {", "198.51.100.14"), evil,
		apiSlice("198.51.100.11", "198.51.100.12"), bad, badPort,
	)
	l.newClient = func() (kube.Client, error) { return kubefake.FromClientset(client), nil }
	dropped := func() float64 {
		n := 0.0
		for _, f := range []string{"name", "InternalIP", "address", "port", "nodeName"} {
			for _, r := range []string{kube.ReasonName, kube.ReasonAddress, kube.ReasonUnicast, kube.ReasonPort} {
				n += testutil.ToFloat64(droppedValues.WithLabelValues(f, r))
			}
		}
		return n
	}
	before := dropped()
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	haproxy, keepalived := filepath.Join(dir, "haproxy.cfg"), filepath.Join(dir, "keepalived.conf")
	waitFile(t, haproxy, func(s string) bool { return strings.Contains(s, "server master-1_v4 198.51.100.12:6443") })
	waitFile(t, keepalived, func(s string) bool { return strings.Contains(s, "198.51.100.12") })
	for _, p := range []string{haproxy, keepalived} {
		b, _ := os.ReadFile(p)
		for _, bad := range []string{"notify_master", "global_defs {\n\n", "master-3", "198.51.100.13", "fd00::1", "::1", "198.51.100.99"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s holds %q:\n%s", filepath.Base(p), bad, b)
			}
		}
	}
	if n := dropped() - before; n != 5 {
		t.Errorf("dropped_values_total rose by %v, want 5 (a name, an InternalIP, two addresses, a port)", n)
	}
}

// TestLifecycleStatic renders from static backends with no API at all.
func TestLifecycleStatic(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	l, dir := newPlugin(t, "backends 198.51.100.10 198.51.100.11:6443\nhealth-check api "+srv.URL+"\nhealth-check ingress none")
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	waitFile(t, filepath.Join(dir, "haproxy.cfg"), func(s string) bool {
		return strings.Contains(s, "server addr_198-51-100-10_v4 198.51.100.10:6443")
	})
	waitFile(t, filepath.Join(dir, "reloads"), func(s string) bool { return s == "k\nh\n" })
	deadline := time.Now().Add(10 * time.Second)
	for !l.Ready() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !l.Ready() {
		t.Error("Not ready after the static render")
	}
	// The API health check passes: its track file says healthy.
	waitFile(t, filepath.Join(dir, "ocp4-api.health"), func(s string) bool { return s == "0\n" })
	l.Stop()
	if _, err := os.Stat(filepath.Join(dir, "ocp4-ingress.health")); err == nil {
		t.Error("Ingress track file written although its check is none")
	}
}

func TestStartErrors(t *testing.T) {
	l, _ := newPlugin(t, "")
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if err := l.Start(); err == nil || !strings.Contains(err.Error(), "nothing to render from") {
		t.Errorf("Start without API and backends: %v", err)
	}
	l, _ = newPlugin(t, "backends 198.51.100.10")
	l.outputs[lb.Keepalived] = output{path: l.outputs[lb.Keepalived].path, template: "/nonexistent/template"}
	if err := l.Start(); err == nil || !strings.Contains(err.Error(), "template") {
		t.Errorf("Start with a missing template: %v", err)
	}
}

// waitFile polls a file until ok accepts its content, for at most 10 s (a
// bound for a stuck controller, not a timing assertion).
func waitFile(t *testing.T, path string, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil {
			last = string(b)
			if ok(last) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never reached the expected content; last:\n%s", path, last)
}

// TestLifecycleBootstrapThenAPI: the API is not there at first, so the
// static backends are rendered; once the client works, the API's view
// replaces them.
func TestLifecycleBootstrapThenAPI(t *testing.T) {
	l, dir := newPlugin(t, "backends 198.51.100.10")
	client := fake.NewClientset(masterNode("master-0", "198.51.100.11"), masterNode("master-1", "198.51.100.12"),
		apiSlice("198.51.100.11", "198.51.100.12"))
	var calls atomic.Int32
	l.newClient = func() (kube.Client, error) {
		if calls.Add(1) == 1 {
			return nil, errors.New("connection refused")
		}
		return kubefake.FromClientset(client), nil
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	haproxy := filepath.Join(dir, "haproxy.cfg")
	waitFile(t, haproxy, func(s string) bool { return strings.Contains(s, "server addr_198-51-100-10_v4 198.51.100.10:6443") })
	waitFile(t, haproxy, func(s string) bool {
		return strings.Contains(s, "server master-1_v4 198.51.100.12:6443") && !strings.Contains(s, "198.51.100.10")
	})
}

// TestStartCreatesTrackDir: keepalived drops a track_file whose directory
// is missing, so the directory exists before Start returns (before the
// first keepalived.conf), as on a node booting with an empty /run.
func TestStartCreatesTrackDir(t *testing.T) {
	track := filepath.Join(t.TempDir(), "run", "infradns", "track")
	l, _ := newPlugin(t, "backends 198.51.100.10\nhealth-check api none\nhealth-check ingress none\ntrack-dir "+track)
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	if st, err := os.Stat(track); err != nil || !st.IsDir() {
		t.Fatalf("track-dir %s after Start: %v", track, err)
	}
}
