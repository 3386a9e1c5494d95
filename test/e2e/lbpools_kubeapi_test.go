//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/test/e2e/lab"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestLBPoolsKubeAPI runs three bin/coredns with lbpools (three control
// planes; one elected writer) against a real, dual-stack kube-apiserver,
// and a fourth with lbservices, as every node's resolver has it. It
// measures, from just before each create to the status the API server
// holds, how long a Service waits for its address, and checks what an
// operator relies on: requested addresses, sharing, dual stack, classes
// left alone, a pools edit that does not parse (nothing changes), a pool
// shrunk under a Service (the address is kept and reported), a freed
// address given again, a type change, events, and the writer stopped
// (SIGTERM: the Lease is released) and killed (SIGKILL: the Lease
// expires).
func TestLBPoolsKubeAPI(t *testing.T) {
	kubeParallel(t)
	c := kubetest.StartWith(t, kubetest.Options{ExtraAPIServerArgs: []string{"--service-cluster-ip-range=10.96.0.0/24,fd00:96::/112"}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, ns := range []string{"shop", "bank", "infradns"} {
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cms := c.Client.CoreV1().ConfigMaps("infradns")
	setPools := func(text string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: kube.PoolsConfigMap}, Data: map[string]string{"pools.yaml": text}}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	const pools = `pools:
- name: default
  addresses: [192.0.2.100-192.0.2.250, 2001:db8:100::/120]
- name: bank
  addresses: [198.51.100.0/29]
  namespaces: [bank]
- name: public
  addresses: [203.0.113.7]
  autoAssign: false
`
	setPools(pools)

	// Three writers-to-be, each with its metrics.
	const leaseDuration = 4 * time.Second
	type member struct {
		id   string
		core *hostCoreDNS
		prom int
	}
	var members []*member
	start := func(id string) *member {
		prom := freeTCPPort(t)
		conf := fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    prometheus 127.0.0.1:%d
    lbpools {
        kubeconfig %s
        identity %s
        lease infradns/%s %s
    }
}
`, freeUDPPort(t), prom, c.Kubeconfig, id, kube.AllocatorLease, leaseDuration)
		m := &member{id: id, core: startHostCoreDNS(t, t.TempDir(), conf), prom: prom}
		members = append(members, m)
		return m
	}
	for _, id := range []string{"cp-0", "cp-1", "cp-2"} {
		start(id)
	}
	dnsPort := freeUDPPort(t)
	startHostCoreDNS(t, t.TempDir(), fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    lbservices {
        zone %s
        kubeconfig %s
    }
}
`, dnsPort, lbsZone, c.Kubeconfig))
	server := net.JoinHostPort("127.0.0.1", strconv.Itoa(dnsPort))

	holder := func() string {
		l, err := c.Client.CoordinationV1().Leases("infradns").Get(ctx, kube.AllocatorLease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	status := func(ns, name string) string {
		svc, err := c.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "error: " + err.Error()
		}
		var ips []string
		for _, in := range svc.Status.LoadBalancer.Ingress {
			ips = append(ips, in.IP)
		}
		slices.Sort(ips)
		return strings.Join(ips, " ")
	}
	// create makes a Service and waits until its status is want (""
	// after 1 s: it must stay pending); it returns the wait.
	create := func(svc *corev1.Service, want string) time.Duration {
		t.Helper()
		began := time.Now()
		if _, err := c.Client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if want == "" {
			time.Sleep(time.Second)
			if got := status(svc.Namespace, svc.Name); got != "" {
				t.Errorf("Service %s/%s: %q, want pending", svc.Namespace, svc.Name, got)
			}
			return 0
		}
		var got string
		if err := lab.Poll(ctx, 15*time.Second, 2*time.Millisecond, func() error {
			if got = status(svc.Namespace, svc.Name); got != want {
				return fmt.Errorf("%q", got)
			}
			return nil
		}); err != nil {
			t.Fatalf("Service %s/%s: want %q: %v", svc.Namespace, svc.Name, want, err)
		}
		return time.Since(began)
	}
	waitStatus := func(ns, name, want string) {
		t.Helper()
		if err := lab.Poll(ctx, 15*time.Second, 5*time.Millisecond, func() error {
			if got := status(ns, name); got != want {
				return fmt.Errorf("%q", got)
			}
			return nil
		}); err != nil {
			t.Fatalf("Service %s/%s: want %q: %v", ns, name, want, err)
		}
	}
	lab.Eventually(t, 30*time.Second, 20*time.Millisecond, "a writer elected", func() error {
		if holder() == "" {
			return fmt.Errorf("no holder")
		}
		return nil
	})
	t.Logf("writer: %s", holder())

	// Auto-assignment, in order, and the name every resolver gives it.
	var waits []time.Duration
	for i := range 8 {
		waits = append(waits, create(lbpService("shop", fmt.Sprintf("web-%d", i), nil), fmt.Sprintf("192.0.2.%d", 100+i)))
	}
	mnkLogDurations(t, "Service created → address in its status", waits)
	mnkWait(t, ctx, server, "web-3.shop.lb."+lbsZone, dns.TypeA, "NOERROR 192.0.2.103", 10*time.Second)

	// Requested (a pool that does not auto-assign), shared, dual stack,
	// a namespace's own pool, other classes.
	create(lbpService("shop", "public", map[string]string{kube.AnnotationAddresses: "203.0.113.7"}), "203.0.113.7")
	create(lbpService("shop", "taken", map[string]string{kube.AnnotationAddresses: "203.0.113.7"}), "")
	dnsTCP := lbpService("shop", "dns-tcp", map[string]string{kube.AnnotationSharing: "dns"})
	dnsUDP := lbpService("shop", "dns-udp", map[string]string{kube.AnnotationSharing: "dns"})
	dnsUDP.Spec.Ports[0].Protocol = corev1.ProtocolUDP
	create(dnsTCP, "192.0.2.108")
	create(dnsUDP, "192.0.2.108")
	dual := lbpService("shop", "dual", nil)
	policy := corev1.IPFamilyPolicyRequireDualStack
	dual.Spec.IPFamilyPolicy, dual.Spec.IPFamilies = &policy, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	create(dual, "192.0.2.109 2001:db8:100::1")
	create(lbpService("bank", "ledger", map[string]string{kube.AnnotationPool: "bank"}), "198.51.100.1")
	metallb := lbpService("shop", "metallb", nil)
	metallb.Spec.LoadBalancerClass = ptrTo("metallb.io/metallb")
	create(metallb, "")
	noClass := lbpService("shop", "noclass", nil)
	noClass.Spec.LoadBalancerClass = nil
	create(noClass, "")

	// A pools edit that does not parse changes nothing; allocation goes on
	// from the last valid pools.
	setPools("pools:\n- name: default\n  adresses: [10.0.0.0/24]\n")
	create(lbpService("shop", "after-typo", nil), "192.0.2.110")
	for _, m := range members {
		if m.id == holder() {
			if err := mnkMetric(m.prom, "coredns_lbpools_config_valid", 0); err != nil {
				t.Error(err)
			}
		}
	}

	// The pool shrunk under web-7 (192.0.2.107): it keeps the address,
	// reported; new Services get what the new pools hold.
	setPools(strings.Replace(pools, "192.0.2.100-192.0.2.250", "192.0.2.100-192.0.2.106, 192.0.2.108-192.0.2.250", 1))
	create(lbpService("shop", "after-shrink", nil), "192.0.2.111")
	if got := status("shop", "web-7"); got != "192.0.2.107" {
		t.Errorf("web-7 after its address left the pools: %q, want it kept", got)
	}
	lab.Eventually(t, 10*time.Second, 50*time.Millisecond, "event AddressOrphaned on web-7", func() error {
		return lbpEvent(ctx, c, "shop", "web-7", "AddressOrphaned")
	})
	if err := lbpEvent(ctx, c, "shop", "web-0", "IPAllocated"); err != nil {
		t.Error(err)
	}
	if err := lbpEvent(ctx, c, "shop", "taken", "AllocationFailed"); err != nil {
		t.Error(err)
	}

	// Freed: deleted, and a type changed away from LoadBalancer.
	if err := c.Client.CoreV1().Services("shop").Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	web2, err := c.Client.CoreV1().Services("shop").Get(ctx, "web-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web2.Spec.Type = corev1.ServiceTypeClusterIP
	web2.Spec.LoadBalancerClass = nil
	web2.Spec.AllocateLoadBalancerNodePorts = nil
	for i := range web2.Spec.Ports {
		web2.Spec.Ports[i].NodePort = 0
	}
	if _, err := c.Client.CoreV1().Services("shop").Update(ctx, web2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitStatus("shop", "web-2", "")
	create(lbpService("shop", "reuse-a", nil), "192.0.2.101")
	create(lbpService("shop", "reuse-b", nil), "192.0.2.102")
	mnkWait(t, ctx, server, "web-2.shop.lb."+lbsZone, dns.TypeA, "NXDOMAIN", 10*time.Second)

	// What the operator's status shows: the pending reason, the address
	// kept, the pools' use (as lbpools decides it, from the same input).
	out, err := exec.CommandContext(ctx, lab.Binary(t, "infradns"), "status", "-services", "-domain", "ocp4.example.com", "-kubeconfig", c.Kubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("infradns status -services: %v\n%s", err, out)
	}
	for _, want := range []string{
		"(pending: requested 203.0.113.7 is taken by Service shop/public)",
		"web-7.shop.lb.ocp4.example.com (no pool holds 192.0.2.107 any more: kept)",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("infradns status -services lacks %q:\n%s", want, out)
		}
	}
	// .100 to .111 (.101 and .102 given again), less .107, no longer in
	// the pool: 11 of the 150 the shrunk pool holds.
	if !regexp.MustCompile(`(?m)^default\s+IPv4\s+11\s+150$`).Match(out) {
		t.Errorf("infradns status -services: want pool default IPv4 11 of 150 used:\n%s", out)
	}

	// The writer stopped: it releases the Lease, a peer writes next.
	byID := func(id string) *member {
		for _, m := range members {
			if m.id == id {
				return m
			}
		}
		t.Fatalf("no member %q", id)
		return nil
	}
	for _, stop := range []struct {
		sig  syscall.Signal
		name string
	}{{syscall.SIGTERM, "stopped"}, {syscall.SIGKILL, "killed"}} {
		old := holder()
		began := time.Now()
		if err := byID(old).core.Signal(stop.sig); err != nil {
			t.Fatal(err)
		}
		create(lbpService("shop", "after-"+stop.name, nil), fmt.Sprintf("192.0.2.%d", map[string]int{"stopped": 112, "killed": 113}[stop.name]))
		t.Logf("measure: writer %s (%s) → the next Service allocated by %s after %v (lease %v)", stop.name, old, holder(), time.Since(began).Round(time.Millisecond), leaseDuration)
		if holder() == old {
			t.Errorf("writer %s still holds the Lease after it was %s", old, stop.name)
		}
	}
	// The survivor saw everything: nothing moved across two changes of writer.
	for i, want := range map[int]string{0: "192.0.2.100", 3: "192.0.2.103", 7: "192.0.2.107"} {
		if got := status("shop", fmt.Sprintf("web-%d", i)); got != want {
			t.Errorf("web-%d after two writers went: %q, want %q", i, got, want)
		}
	}
	if got := status("shop", "dual"); got != "192.0.2.109 2001:db8:100::1" {
		t.Errorf("dual after two writers went: %q", got)
	}

	// A burst: 100 Services at once, the time until the last has its address.
	began := time.Now()
	for i := range 100 {
		if _, err := c.Client.CoreV1().Services("bank").Create(ctx, lbpService("bank", fmt.Sprintf("burst-%d", i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	created := time.Since(began)
	first := map[string]string{} // the first address each burst Service was seen with
	lab.Eventually(t, 60*time.Second, 20*time.Millisecond, "100 Services allocated", func() error {
		list, err := c.Client.CoreV1().Services("bank").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		n, seen := 0, map[string]string{}
		for _, s := range list.Items {
			for _, in := range s.Status.LoadBalancer.Ingress {
				if other, dup := seen[in.IP]; dup {
					t.Fatalf("%s given to %s and %s", in.IP, other, s.Name)
				}
				seen[in.IP] = s.Name
			}
			if strings.HasPrefix(s.Name, "burst-") && len(s.Status.LoadBalancer.Ingress) == 1 {
				n++
				ip := s.Status.LoadBalancer.Ingress[0].IP
				if was, ok := first[s.Name]; ok && was != ip {
					t.Errorf("%s moved from %s to %s during the burst", s.Name, was, ip)
				}
				first[s.Name] = ip
			}
		}
		if n != 100 {
			return fmt.Errorf("%d of 100", n)
		}
		return nil
	})
	t.Logf("measure: 100 Services created in %v, all allocated %v after the first create", created.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))

	// The API away for 10 s, longer than the Lease: the writer stops
	// writing (it cannot renew) and a writer is elected again after. Not
	// one address moves; the next Service is allocated.
	all := func() map[string]string {
		out := map[string]string{}
		for _, ns := range []string{"shop", "bank"} {
			list, err := c.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range list.Items {
				var ips []string
				for _, in := range s.Status.LoadBalancer.Ingress {
					ips = append(ips, in.IP)
				}
				out[ns+"/"+s.Name] = strings.Join(ips, " ")
			}
		}
		return out
	}
	before := all()
	c.StopFor(10 * time.Second)
	back := time.Now()
	create(lbpService("shop", "after-outage", nil), "192.0.2.214") // the burst took .114 to .213
	t.Logf("measure: API back → the next Service allocated after %v (writer %s)", time.Since(back).Round(time.Millisecond), holder())
	after := all()
	delete(after, "shop/after-outage")
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s across the API outage: %q, was %q", k, after[k], v)
		}
	}
}

// lbpService is a Service of type LoadBalancer of infradns' class.
func lbpService(ns, name string, annotations map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: corev1.ServiceSpec{
			Type:              corev1.ServiceTypeLoadBalancer,
			LoadBalancerClass: ptrTo(kube.DefaultClass),
			Selector:          map[string]string{"app": name},
			Ports:             []corev1.ServicePort{{Name: "p", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(5353)}},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

// lbpEvent checks that the Service has an Event of reason.
func lbpEvent(ctx context.Context, c *kubetest.Cluster, ns, name, reason string) error {
	list, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return err
	}
	var seen []string
	for _, e := range list.Items {
		if e.Reason == reason && e.InvolvedObject.Kind == "Service" {
			return nil
		}
		seen = append(seen, e.Reason+": "+e.Message)
	}
	return fmt.Errorf("Service %s/%s: no event %s (has %q)", ns, name, reason, seen)
}
