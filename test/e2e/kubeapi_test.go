//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kubetest"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// TestKubeAPIServerInformers proves the harness: a real kube-apiserver on a
// real etcd (>= 3.5, which client-go's streaming list-watch needs), seen
// through shared informers across an apiserver outage.
func TestKubeAPIServerInformers(t *testing.T) {
	began := time.Now()
	c := kubetest.Start(t)
	t.Logf("measure: start to ready %v", time.Since(began).Round(time.Millisecond))
	logRSS(t, c, "after start")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan string, 100)
	handler := func(kind string) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { events <- fmt.Sprintf("add %s %s", kind, obj.(metav1.Object).GetName()) },
			UpdateFunc: func(_, obj any) {
				events <- fmt.Sprintf("update %s %s %s", kind, obj.(metav1.Object).GetName(), obj.(metav1.Object).GetLabels()["step"])
			},
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				events <- fmt.Sprintf("delete %s %s", kind, obj.(metav1.Object).GetName())
			},
		}
	}
	f := informers.NewSharedInformerFactory(c.Client, 0)
	if _, err := f.Core().V1().Nodes().Informer().AddEventHandler(handler("node")); err != nil {
		t.Fatal(err)
	}
	sf := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace("default"),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = discoveryv1.LabelServiceName + "=kubernetes"
		}))
	if _, err := sf.Discovery().V1().EndpointSlices().Informer().AddEventHandler(handler("slice")); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	sf.Start(ctx.Done())
	// Shutdown waits for the informers, which stop only once ctx is done.
	defer func() {
		cancel()
		f.Shutdown()
		sf.Shutdown()
	}()
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}
	for typ, ok := range sf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}

	expect := func(want string) {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case got := <-events:
				if got == want {
					return
				}
				t.Logf("event %q (waiting for %q)", got, want)
			case <-timeout:
				t.Fatalf("no event %q within 20 s", want)
			}
		}
	}

	if _, err := c.Client.CoreV1().Nodes().Create(ctx, controlPlaneNode("master-0", "198.51.100.10"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("add node master-0")
	if _, err := c.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, apiServerSlice("kubernetes-test", 6443, "198.51.100.10"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("add slice kubernetes-test")

	updateLabel := func(step string) {
		t.Helper()
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "master-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels["step"] = step
		if _, err := c.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	updateLabel("1")
	expect("update node master-0 1")

	// An outage: the reflectors must re-establish their watches by
	// themselves and deliver what changed in the meantime.
	c.Stop()
	time.Sleep(3 * time.Second)
	restart := time.Now()
	c.Restart()
	t.Logf("measure: restart to ready %v", time.Since(restart).Round(time.Millisecond))
	updateLabel("2")
	expect("update node master-0 2")
	if err := c.Client.DiscoveryV1().EndpointSlices("default").Delete(ctx, "kubernetes-test", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("delete slice kubernetes-test")
	if err := c.Client.CoreV1().Nodes().Delete(ctx, "master-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("delete node master-0")

	logRSS(t, c, "at end")
}

func logRSS(t *testing.T, c *kubetest.Cluster, when string) {
	t.Helper()
	etcdPID, apiPID := c.PIDs()
	e, err1 := kubetest.RSS(etcdPID)
	a, err2 := kubetest.RSS(apiPID)
	if err1 != nil || err2 != nil {
		t.Fatalf("rss: %v %v", err1, err2)
	}
	t.Logf("measure: RSS %s: etcd %d MiB, kube-apiserver %d MiB", when, e>>20, a>>20)
}

// kubeParallel runs a test that spends most of its time waiting out an API
// outage beside the other such tests, once every sequential test of the
// package is done (make e2e's -parallel 4), with TestVRRPStability. No
// failover timing runs meanwhile, and kubeadm's three-node control plane
// neither (see TestKubeadm). It keeps make test's warm run under 10 minutes.
func kubeParallel(t *testing.T) {
	t.Helper()
	t.Parallel()
}
