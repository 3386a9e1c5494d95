//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/test/e2e/lab"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodesServiceKubeAPI runs bin/coredns with mdnsnodes' nodes-service
// against a real kube-apiserver (which stands in for kube-controller-manager:
// the test writes the EndpointSlices its EndpointSlice controller would).
// While the Service lists no node the names come from the Nodes; once its
// slices list nodes they come from the slices and the Node watch is closed
// (the apiserver's own count of open Node watches drops to 0); a slice change
// is answered within a second; deleting the slices brings the Nodes back.
func TestNodesServiceKubeAPI(t *testing.T) {
	c := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := range 3 {
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, mnkNode(fmt.Sprintf("worker-%d", i), fmt.Sprintf("198.51.100.%d", 20+i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The apiserver watches Nodes itself: count ours above its own.
	base := nodeWatches(ctx, t, c)
	dnsPort := freeUDPPort(t)
	readyPort := freeTCPPort(t)
	conf := fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    ready 127.0.0.1:%d
    mdnsnodes {
        zone %s
        kubeconfig %s
        nodes-service kube-system/infradns-nodes
    }
}
`, dnsPort, readyPort, mnkZone, c.Kubeconfig)
	core := startHostCoreDNS(t, t.TempDir(), conf)
	server := net.JoinHostPort("127.0.0.1", strconv.Itoa(dnsPort))
	answer := func(what, name, want string, within time.Duration) time.Duration {
		t.Helper()
		began := time.Now()
		var last string
		if err := lab.Poll(ctx, within, 5*time.Millisecond, func() error {
			if gone, err := core.Exited(); gone {
				t.Fatalf("coredns exited: %v", err)
			}
			if last = mnkQuery(server, name+"."+mnkZone, dns.TypeA); last != want {
				return fmt.Errorf("%q", last)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %s A: want %q: %v", what, name, want, err)
		}
		return time.Since(began)
	}
	// The names service does not exist: after at most 3 s (its first
	// listing) and the 1 s start spread, the Nodes serve.
	answer("no service", "worker-1", "NOERROR 198.51.100.21", 20*time.Second)
	t.Logf("measure: start → worker-1 answered from the Nodes (no names service) %v", (time.Since(core.started)).Round(time.Millisecond))
	if w := nodeWatches(ctx, t, c) - base; w != 1 {
		t.Errorf("%d Node watches of ours open at the apiserver, want 1 (the fallback)", w)
	}

	// The Service's slices appear: one per family, as the controller writes
	// them; their addresses differ from the Nodes' so the source shows.
	slices := c.Client.DiscoveryV1().EndpointSlices("kube-system")
	eps := func(base int) []discoveryv1.Endpoint {
		var out []discoveryv1.Endpoint
		for i := range 3 {
			name := fmt.Sprintf("worker-%d", i)
			out = append(out, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("198.51.100.%d", base+i)}, NodeName: &name})
		}
		return out
	}
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "infradns-nodes-v4", Labels: map[string]string{discoveryv1.LabelServiceName: "infradns-nodes"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps(50),
	}
	began := time.Now()
	sl, err := slices.Create(ctx, sl, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	answer("slices created", "worker-1", "NOERROR 198.51.100.51", 5*time.Second)
	t.Logf("measure: names service slice created → answered from it %v", time.Since(began).Round(time.Millisecond))
	lab.Eventually(t, 10*time.Second, 50*time.Millisecond, "Node watch closed", func() error {
		if w := nodeWatches(ctx, t, c) - base; w != 0 {
			return fmt.Errorf("%d Node watches of ours open at the apiserver", w)
		}
		return nil
	})

	// A Node's address change reaches nobody now.
	n, err := c.Client.CoreV1().Nodes().Get(ctx, "worker-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = mnkNode("worker-2", "198.51.100.99").Status.Addresses
	if _, err := c.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A slice change is answered within a second.
	sl.Endpoints = eps(60)
	began = time.Now()
	if _, err := slices.Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := answer("slice updated", "worker-2", "NOERROR 198.51.100.62", 5*time.Second)
	t.Logf("measure: names service slice updated → new address answered %v", d.Round(time.Millisecond))
	if d > time.Second {
		t.Errorf("slice change answered after %v, want < 1 s", d)
	}

	// The slices go: back to the Nodes, as they are now.
	if err := slices.Delete(ctx, sl.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	answer("slices deleted", "worker-2", "NOERROR 198.51.100.99", 10*time.Second)
	answer("slices deleted", "worker-0", "NOERROR 198.51.100.20", time.Second)
}

// nodeWatches is the apiserver's count of open Node watches
// (apiserver_longrunning_requests, summed over its label sets).
func nodeWatches(ctx context.Context, t *testing.T, c *kubetest.Cluster) int {
	t.Helper()
	b, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("apiserver metrics: %v", err)
	}
	total := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") || !strings.Contains(line, `resource="nodes"`) || !strings.Contains(line, `verb="WATCH"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("apiserver metrics: %q: %v", line, err)
		}
		total += int(v)
	}
	return total
}
