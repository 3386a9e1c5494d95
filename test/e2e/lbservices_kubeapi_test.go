//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/test/e2e/lab"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// lbsZone is the cluster domain of TestLBServicesKubeAPI; the names are
// SERVICE.NAMESPACE.lb.<zone>.
const lbsZone = "ocp4.example.com."

// TestLBServicesKubeAPI runs bin/coredns with lbservices (and mdnsnodes
// beside it, as a node's Corefile has them) against a real kube-apiserver.
// Services of type LoadBalancer get their addresses the way MetalLB or
// infradns writes them (UpdateStatus of status.loadBalancer.ingress); it
// measures, from just before each API write to the first DNS answer that
// shows it: an address given to a Service, a hostname annotation, the type
// changed away from LoadBalancer, the Service deleted. PTR and a shared
// address are checked with dig. Then the API is stopped for 10 s: every
// name keeps its answer.
func TestLBServicesKubeAPI(t *testing.T) {
	kubeParallel(t)
	if _, err := exec.LookPath("dig"); err != nil {
		t.Fatalf("dig is not installed (hack/install-deps.sh installs it): %v", err)
	}
	c := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, ns := range []string{"shop", "bank"} {
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	shop := c.Client.CoreV1().Services("shop")

	dir := t.TempDir()
	dnsPort := freeUDPPort(t)
	promPort := freeTCPPort(t)
	conf := fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    prometheus 127.0.0.1:%d
    lbservices {
        zone %s
        kubeconfig %s
    }
    mdnsnodes {
        zone %s
        kubeconfig %s
    }
}
`, dnsPort, promPort, lbsZone, c.Kubeconfig, lbsZone, c.Kubeconfig)
	core := startHostCoreDNS(t, dir, conf)
	server := net.JoinHostPort("127.0.0.1", strconv.Itoa(dnsPort))
	name := func(svc, ns string) string { return svc + "." + ns + ".lb." + lbsZone }

	// Before the first Service list the plugin answers SERVFAIL (a name
	// may exist); after it, a name no Service has is NXDOMAIN.
	lab.Eventually(t, 20*time.Second, 10*time.Millisecond, "the first Service list", func() error {
		if got := mnkQuery(server, name("web", "shop"), dns.TypeA); got != "NXDOMAIN" {
			return fmt.Errorf("%q", got)
		}
		return nil
	})
	t.Logf("measure: coredns start → first Service list served %v", time.Since(core.started).Round(time.Millisecond))

	wait := func(began time.Time, qname string, qtype uint16, want string) time.Duration {
		t.Helper()
		mnkWait(t, ctx, server, qname, qtype, want, 10*time.Second)
		return time.Since(began)
	}
	// allocate writes the addresses as a load-balancer controller does.
	allocate := func(svc *corev1.Service, ips ...string) {
		t.Helper()
		svc.Status.LoadBalancer.Ingress = nil
		for _, ip := range ips {
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		if _, err := c.Client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// A Service created has no name until it has an address (pending).
	const n = 8
	var allocated []time.Duration
	for i := range n {
		svc, err := shop.Create(ctx, lbsService(fmt.Sprintf("web-%d", i), nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := mnkQuery(server, name(svc.Name, "shop"), dns.TypeA); got != "NXDOMAIN" {
			t.Errorf("%s pending: %q, want NXDOMAIN", svc.Name, got)
		}
		ip := fmt.Sprintf("192.0.2.%d", 10+i)
		began := time.Now()
		allocate(svc, ip)
		allocated = append(allocated, wait(began, name(svc.Name, "shop"), dns.TypeA, "NOERROR "+ip))
	}
	mnkLogDurations(t, "address written to status → A answered", allocated)

	// Dual stack, and a hostname annotation.
	db, err := c.Client.CoreV1().Services("bank").Create(ctx, lbsService("db", map[string]string{cluster.AnnotationHostname: "ledger"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	allocate(db, "192.0.2.30", "2001:db8::30")
	d := wait(began, name("db", "bank"), dns.TypeAAAA, "NOERROR 2001:db8::30")
	wait(began, name("db", "bank"), dns.TypeA, "NOERROR 192.0.2.30")
	wait(began, "ledger.lb."+lbsZone, dns.TypeA, "NOERROR 192.0.2.30")
	t.Logf("measure: dual-stack address written → AAAA answered %v", d.Round(time.Millisecond))

	// Two Services sharing one address (different ports): both names,
	// and its PTR names both.
	for _, s := range []string{"dns-tcp", "dns-udp"} {
		svc, err := shop.Create(ctx, lbsService(s, nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		allocate(svc, "192.0.2.40")
		wait(time.Now(), name(s, "shop"), dns.TypeA, "NOERROR 192.0.2.40")
	}
	dig := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, "dig", append([]string{"-p", strconv.Itoa(dnsPort), "@127.0.0.1", "+time=2", "+tries=2", "+short"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("dig %v: %v\n%s", args, err, out)
		}
		lines := strings.Fields(string(out))
		slices.Sort(lines)
		return strings.Join(lines, " ")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-x", "192.0.2.40"}, "dns-tcp.shop.lb." + lbsZone + " dns-udp.shop.lb." + lbsZone},
		{[]string{"-x", "2001:db8::30"}, "db.bank.lb." + lbsZone},
		{[]string{name("web-3", "shop"), "A"}, "192.0.2.13"},
		{[]string{"ledger.lb." + lbsZone, "AAAA"}, "2001:db8::30"},
	} {
		if got := dig(tc.args...); got != tc.want {
			t.Errorf("dig %v: %q, want %q", tc.args, got, tc.want)
		}
	}
	if got := mnkQuery(server, "shop.lb."+lbsZone, dns.TypeA); got != "NOERROR" {
		t.Errorf("the namespace shop.lb: %q, want NODATA (NOERROR, no answer)", got)
	}

	// The type changed away from LoadBalancer: the name goes, whatever
	// the status still says.
	web0, err := shop.Get(ctx, "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The API server drops the node ports and policies that only a
	// LoadBalancer has when they are left as they were.
	web0.Spec.Type = corev1.ServiceTypeClusterIP
	began = time.Now()
	if _, err := shop.Update(ctx, web0, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("measure: type LoadBalancer → ClusterIP → NXDOMAIN %v", wait(began, name("web-0", "shop"), dns.TypeA, "NXDOMAIN").Round(time.Millisecond))

	var deleted []time.Duration
	for i := 1; i < n/2; i++ {
		began := time.Now()
		if err := shop.Delete(ctx, fmt.Sprintf("web-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		deleted = append(deleted, wait(began, name(fmt.Sprintf("web-%d", i), "shop"), dns.TypeA, "NXDOMAIN"))
	}
	mnkLogDurations(t, "Service deleted → NXDOMAIN", deleted)
	for what, ds := range map[string][]time.Duration{"allocated": allocated, "deleted": deleted} {
		s := slices.Clone(ds)
		slices.Sort(s)
		if s[len(s)/2] > time.Second {
			t.Errorf("Service %s: median %v to be answered, want < 1 s", what, s[len(s)/2])
		}
	}
	if err := mnkMetric(promPort, `coredns_lbservices_services{zones="`+lbsZone+`"}`, float64(n/2+3)); err != nil {
		t.Error(err)
	}

	// What an operator sees: `infradns status -services`, the same names.
	st, err := exec.CommandContext(ctx, lab.Binary(t, "infradns"), "status", "-kubeconfig", c.Kubeconfig,
		"-services", "-domain", strings.TrimSuffix(lbsZone, "."), "-o", "json").CombinedOutput()
	if err != nil {
		t.Fatalf("infradns status -services: %v\n%s", err, st)
	}
	for _, w := range []string{`"service": "bank/db"`, `"db.bank.lb.ocp4.example.com"`, `"ledger.lb.ocp4.example.com"`, `"2001:db8::30"`, `"service": "shop/web-7"`} {
		if !strings.Contains(string(st), w) {
			t.Errorf("infradns status -services lacks %s:\n%s", w, st)
		}
	}
	if strings.Contains(string(st), "web-1.shop") {
		t.Errorf("infradns status -services lists the deleted web-1:\n%s", st)
	}

	// An API outage keeps every name.
	want := map[string]string{name("web-5", "shop"): "NOERROR 192.0.2.15", name("db", "bank"): "NOERROR 192.0.2.30", name("web-1", "shop"): "NXDOMAIN"}
	c.Stop()
	outage := time.Now()
	queries := 0
	for time.Since(outage) < 10*time.Second {
		if gone, err := core.Exited(); gone {
			t.Fatalf("coredns exited: %v", err)
		}
		for q, w := range want {
			if got := mnkQuery(server, q, dns.TypeA); got != w {
				t.Errorf("%v into the API outage: %s %q, want %q", time.Since(outage).Round(time.Millisecond), q, got, w)
			}
			queries++
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("measure: API down %v: %d queries, every answer as before: %v", time.Since(outage).Round(time.Millisecond), queries, !t.Failed())
	c.Restart()
	back, err := shop.Create(ctx, lbsService("after", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	allocate(back, "192.0.2.99")
	mnkWait(t, ctx, server, name("after", "shop"), dns.TypeA, "NOERROR 192.0.2.99", 30*time.Second)
	t.Logf("measure: after the outage, address written → A answered %v", time.Since(began).Round(time.Millisecond))
}

// lbsService is a Service of type LoadBalancer with one TCP port, as a
// user creates it (no address yet: a controller writes the status).
func lbsService(name string, annotations map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
}
