//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/test/e2e/lab"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubeconfigFollowed starts mdnsnodes with a kubeconfig that names the
// wrong server, as a pod that read the file between `kubeadm kubeconfig
// user > FILE` and the `sed` that fixes its server did (CI saw lbconfig call
// https://0.0.0.0:6443 for good), then renames the right kubeconfig into
// place, as the operator guide does: the plugin must rebuild its client and
// answer from a real kube-apiserver without a restart.
func TestKubeconfigFollowed(t *testing.T) {
	kubeParallel(t)
	c := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, mnkNode("worker-0", "198.51.100.20"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	serverLine := regexp.MustCompile(`(?m)^(\s*server:\s*)\S+$`)
	if !serverLine.Match(good) {
		t.Fatalf("no server line in %s:\n%s", c.Kubeconfig, good)
	}
	// A port nothing listens on: refused, as kubeadm's own 0.0.0.0:6443
	// is from a pod (or a certificate error: either way no list).
	wrong := serverLine.ReplaceAll(good, []byte("${1}https://127.0.0.1:"+strconv.Itoa(freeTCPPort(t))))

	dir := t.TempDir()
	kcDir := filepath.Join(dir, "infradns")
	if err := os.MkdirAll(kcDir, 0o755); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(kcDir, "kubeconfig")
	if err := os.WriteFile(kc, wrong, 0o600); err != nil {
		t.Fatal(err)
	}
	dnsPort := freeUDPPort(t)
	conf := fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    mdnsnodes {
        zone %s
        kubeconfig %s
    }
}
`, dnsPort, mnkZone, kc)
	core := startHostCoreDNS(t, dir, conf)
	server := net.JoinHostPort("127.0.0.1", strconv.Itoa(dnsPort))
	name := "worker-0." + mnkZone
	// With the wrong server nothing comes from the API (and nothing from
	// mDNS: no interface): no answer for the Node for 3 s.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if a := mnkQuery(server, name, dns.TypeA); a == "NOERROR 198.51.100.20" {
			t.Fatalf("%s answered %q through a kubeconfig naming the wrong server", name, a)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if gone, err := core.Exited(); gone {
		t.Fatalf("coredns exited: %v", err)
	}

	// The guide's way: the complete file beside its place, renamed into it.
	if err := os.WriteFile(kc+".new", good, 0o600); err != nil {
		t.Fatal(err)
	}
	fixed := time.Now()
	if err := os.Rename(kc+".new", kc); err != nil {
		t.Fatal(err)
	}
	var last string
	if err := lab.Poll(ctx, 30*time.Second, 20*time.Millisecond, func() error {
		if last = mnkQuery(server, name, dns.TypeA); last != "NOERROR 198.51.100.20" {
			return fmt.Errorf("%q", last)
		}
		return nil
	}); err != nil {
		t.Fatalf("%s after the kubeconfig was fixed: %v (coredns.log is shown below)", name, err)
	}
	took := time.Since(fixed)
	if b, _ := os.ReadFile(filepath.Join(dir, "coredns.log")); !strings.Contains(string(b), "changed: client rebuilt") {
		t.Errorf("coredns did not log the rebuilt client:\n%s", b)
	}
	t.Logf("measure: kubeconfig renamed into place → the Node answered %v (the file is looked at every 2 s)", took.Round(time.Millisecond))
}
