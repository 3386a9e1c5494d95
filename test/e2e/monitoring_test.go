//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/deploy/monitoring"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/test/e2e/lab"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMonitoringMetricsExist scrapes running binaries — CoreDNS with every
// infradns plugin against a real kube-apiserver, and mdns-publisher — and
// checks that every metric deploy/monitoring's alerts and dashboard use is
// one they export: a renamed metric would otherwise silence an alert.
func TestMonitoringMetricsExist(t *testing.T) {
	c := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A control-plane Node with a link-local InternalIP: lbconfig (which
	// watches the control plane) drops the address and counts it.
	for _, n := range []struct{ name, ip string }{{"master-0", "198.51.100.11"}, {"master-9", "fe80::9"}} {
		node := mnkNode(n.name, n.ip)
		node.Labels = map[string]string{"node-role.kubernetes.io/control-plane": ""}
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Pools, so lbpools (which reports only once it writes) has some.
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "infradns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().ConfigMaps("infradns").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: kube.PoolsConfigMap},
		Data:       map[string]string{"pools.yaml": "pools: [{name: default, addresses: [192.0.2.100-192.0.2.199]}]\n"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dnsPort, dnsProm, lbProm, pubProm := freeUDPPort(t), freeTCPPort(t), freeTCPPort(t), freeTCPPort(t)
	conf := fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    prometheus 127.0.0.1:%d
    apiint 192.0.2.5 {
        zone ocp4.example.com
    }
    appswildcard 192.0.2.10 {
        zone ocp4.example.com
    }
    lbservices {
        zone ocp4.example.com
        kubeconfig %s
    }
    mdnsnodes {
        zone ocp4.example.com
        interface lo
        kubeconfig %s
    }
}
.:%d {
    bind 127.0.0.2
    prometheus 127.0.0.1:%d
    lbconfig {
        cluster ocp4
        api-vip 192.0.2.5
        interface lo
        node worker-0
        kubeconfig %s
        keepalived %s
        haproxy %s
        reload keepalived none
        reload haproxy none
        health-check api none
        health-check ingress none
        track-dir %s
    }
    lbpools {
        kubeconfig %s
        identity master-0
        announce
    }
    whoami
}
`, dnsPort, dnsProm, c.Kubeconfig, c.Kubeconfig, dnsPort, lbProm, c.Kubeconfig, filepath.Join(dir, "keepalived.conf"), filepath.Join(dir, "haproxy.cfg"), dir, c.Kubeconfig)
	core := startHostCoreDNS(t, dir, conf)

	pub := exec.Command(lab.Binary(t, "mdns-publisher"), "-interface", "lo", "-hostname", "metrics-test", "-cluster", "ocp4",
		"-metrics-address", "127.0.0.1:"+strconv.Itoa(pubProm))
	pub.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := pub.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Process.Kill(); _ = pub.Wait() })

	// Queries, so the request counters and the latency histogram exist.
	server := net.JoinHostPort("127.0.0.1", strconv.Itoa(dnsPort))
	lab.Eventually(t, 30*time.Second, 50*time.Millisecond, "master-0 answered from the API", func() error {
		if gone, err := core.Exited(); gone {
			t.Fatalf("coredns exited: %v", err)
		}
		for _, q := range []string{"api.ocp4.example.com.", "x.apps.ocp4.example.com.", "web.shop.lb.ocp4.example.com."} {
			mnkQuery(server, q, dns.TypeA)
		}
		if a := mnkQuery(server, "master-0.ocp4.example.com.", dns.TypeA); a != "NOERROR 198.51.100.11" {
			return fmt.Errorf("%q", a)
		}
		return nil
	})

	declared := regexp.MustCompile(`(?m)^# TYPE (\S+) `)
	exported := map[string]bool{}
	lab.Eventually(t, 30*time.Second, 200*time.Millisecond, "every metric of the rules and the dashboard exported", func() error {
		for _, port := range []int{dnsProm, lbProm, pubProm} {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
			if err != nil {
				return err
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			for _, m := range declared.FindAllStringSubmatch(string(b), -1) {
				exported[m[1]] = true
			}
		}
		var missing []string
		for _, m := range monitoring.MetricNames() {
			if !exported[m] {
				missing = append(missing, m)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not exported: %v", missing)
		}
		return nil
	})
	t.Logf("all %d metrics the rules and the dashboard use are exported", len(monitoring.MetricNames()))
}
