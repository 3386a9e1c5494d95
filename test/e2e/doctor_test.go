//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/test/e2e/lab"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestDoctor runs `infradns doctor` as an administrator would on a node
// whose files are under a root directory: the node's kubeconfig is the
// infradns user's client certificate against a real kube-apiserver with
// deploy/rbac.yaml applied, the mDNS key comes from `infradns gen-key`, and
// bin/coredns answers. Everything passes; then each thing an administrator
// gets wrong (a world-readable key, forward.conf pointing at the node
// itself, an administrator's kubeconfig on the node) fails or warns with
// what to do.
func TestDoctor(t *testing.T) {
	dir := t.TempDir()
	caFile, certs := clientCertificates(t, dir, "infradns-worker", "infradns-dns", "infradns")
	c := kubetest.StartWith(t, kubetest.Options{ExtraAPIServerArgs: []string{"--client-ca-file=" + caFile}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "openshift-ingress"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	applyRBAC(t, ctx, c.Client, lab.Path(t, "deploy/rbac.yaml"))
	rbacSynced(t, ctx, c.Client)
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, mnkNode("doctor-node", "198.51.100.77"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	root := filepath.Join(dir, "root")
	for _, d := range []string{"etc/kubernetes/infradns", "etc/kubernetes/infradns-dns", "etc/infradns"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The worker's identities, as the guide makes them: lbconfig's
	// infradns-worker, the DNS pod's infradns-dns.
	kubeconfig := filepath.Join(root, "etc/kubernetes/infradns/kubeconfig")
	writeCertKubeconfig(t, kubeconfig, c.URL, certs["infradns-worker"][0], certs["infradns-worker"][1])
	dnsKubeconfig := filepath.Join(root, "etc/kubernetes/infradns-dns/kubeconfig")
	writeCertKubeconfig(t, dnsKubeconfig, c.URL, certs["infradns-dns"][0], certs["infradns-dns"][1])
	secret := func(path string) {
		t.Helper()
		if err := os.Chown(path, 0, 65532); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	secret(kubeconfig)
	secret(dnsKubeconfig)
	workerCS, err := kubernetes.NewForConfig(&rest.Config{Host: c.URL, TLSClientConfig: rest.TLSClientConfig{
		Insecure: true, CertData: certs["infradns-worker"][0], KeyData: certs["infradns-worker"][1]}})
	if err != nil {
		t.Fatal(err)
	}
	if err := workerPolicyInForce(t, ctx, c.Client, workerCS, "ocp4-api-vip-v4"); !apierrors.IsForbidden(err) {
		t.Fatalf("the worker policy: %v, want 403", err)
	}
	infradns := lab.Binary(t, "infradns")
	key := filepath.Join(root, "etc/infradns/mdns.key")
	if out, err := exec.Command(infradns, "gen-key", "-o", key).CombinedOutput(); err != nil {
		t.Fatalf("gen-key: %v\n%s", err, out)
	}
	write := func(path, s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, path), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/resolv.conf", "search ocp4.example.com\nnameserver 127.0.0.1\nnameserver 198.51.100.53\n")
	write("etc/infradns/forward.conf", "198.51.100.53\n")
	clusterFile := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(clusterFile, []byte(`cluster: ocp4
domain: ocp4.example.com
apiVIPs: [192.0.2.5, 2001:db8::5]
ingressVIPs: [192.0.2.10, 2001:db8::10]
interface: ens3
image: quay.io/infradns/infradns:v0.1.0
kubeconfig: /etc/kubernetes/infradns/kubeconfig
dnsKubeconfig: /etc/kubernetes/infradns-dns/kubeconfig
mdnsKey: /etc/infradns/mdns.key
upstreams: [198.51.100.53]
apiServers: [198.51.100.77]
`), 0o644); err != nil {
		t.Fatal(err)
	}

	dnsPort := freeUDPPort(t)
	startHostCoreDNS(t, dir, fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    apiint 192.0.2.5 2001:db8::5 {
        zone ocp4.example.com
    }
    appswildcard 192.0.2.10 2001:db8::10 {
        zone ocp4.example.com
    }
    mdnsnodes {
        zone ocp4.example.com
        kubeconfig %s
    }
}
`, dnsPort, c.Kubeconfig))
	server := fmt.Sprintf("127.0.0.1:%d", dnsPort)
	lab.Eventually(t, 20*time.Second, 50*time.Millisecond, "doctor-node answered", func() error {
		if a := mnkQuery(server, "doctor-node.ocp4.example.com.", 1); a != "NOERROR 198.51.100.77" {
			return fmt.Errorf("%q", a)
		}
		return nil
	})

	var doctorAs func(when, role string) (string, error)
	doctor := func(when string) (string, error) {
		return doctorAs(when, "worker")
	}
	doctorAs = func(when, role string) (string, error) {
		cmd := exec.Command(infradns, "doctor", "-f", clusterFile, "-role", role, "-node", "doctor-node",
			"-root", root, "-server", server, "-scan", "0")
		out, err := cmd.CombinedOutput()
		t.Logf("infradns doctor, %s:\n%s", when, out)
		return string(out), err
	}
	out, err := doctor("installed as the guide says")
	if err != nil {
		t.Errorf("doctor failed on a correct installation: %v", err)
	}
	for _, check := range []string{"cluster file", "kubeconfig", "API", "RBAC", "API VIP status", "DNS kubeconfig", "DNS API", "DNS RBAC", "mDNS key", "resolv.conf", "forward.conf", "api-int", `\*\.apps`, "node name"} {
		if !regexp.MustCompile(`(?m)^PASS  ` + check + `\s`).MatchString(out) {
			t.Errorf("no PASS for %s", check)
		}
	}

	// A worker's identity on a control-plane node: it may not write the
	// API VIP's status (the admission policy of deploy/rbac.yaml, which
	// only a dry-run write shows).
	out, err = doctorAs("with the worker's kubeconfig on a control-plane node", "control-plane")
	if err == nil || !regexp.MustCompile(`(?m)^FAIL  API VIP status\s.*may not write`).MatchString(out) {
		t.Errorf("doctor = %v, want a FAIL for the API VIP status", err)
	}

	// What an administrator gets wrong.
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	write("etc/infradns/forward.conf", "127.0.0.1\n")
	admin := filepath.Join(root, "etc/kubernetes/infradns/kubeconfig")
	b, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(admin, b, 0o640); err != nil {
		t.Fatal(err)
	}
	secret(admin)
	out, err = doctor("with a world-readable key, a forwarding loop and an administrator's kubeconfig")
	if err == nil {
		t.Error("doctor passed a broken installation")
	}
	for _, want := range []string{`(?m)^FAIL  mDNS key\s.*readable by everyone`, `(?m)^FAIL  forward.conf\s.*this node`, `(?m)^WARN  RBAC\s.*more than needed`, `(?m)^WARN  API VIP status\s.*could claim the API VIP`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("no line matching %q", want)
		}
	}
	if n := strings.Count(out, "fix: "); n < 4 {
		t.Errorf("%d fixes for 4 problems", n)
	}
}
