package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/identity"
	"github.com/infradns/infradns/internal/nodecfg"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// fakeCluster is a fake API whose CSRs are signed as soon as they are
// approved (by a test CA, for the expiration asked), and whose dynamic
// client answers server-side applies.
type fakeCluster struct {
	cs      *fake.Clientset
	dyn     *dynamicfake.FakeDynamicClient
	caPEM   []byte
	applied []string
	clock   time.Time // the signer's now (zero: the real one)
}

func newFakeCluster(t *testing.T) *fakeCluster {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(der)
	fc := &fakeCluster{cs: fake.NewClientset(), caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	fc.cs.PrependReactor("update", "certificatesigningrequests", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "approval" {
			return false, nil, nil
		}
		csr := a.(clienttesting.UpdateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		blk, _ := pem.Decode(csr.Spec.Request)
		req, err := x509.ParseCertificateRequest(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
		// The signer's clock is the run's (env's now): a renewal 340 days
		// on ends 340 days later.
		now := time.Now()
		if !fc.clock.IsZero() {
			now = fc.clock
		}
		c := &x509.Certificate{SerialNumber: serial, Subject: req.Subject, NotBefore: now,
			NotAfter:    now.Add(time.Duration(*csr.Spec.ExpirationSeconds) * time.Second),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		der, err := x509.CreateCertificate(rand.Reader, c, caCert, req.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		csr.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		return false, nil, nil // the tracker stores it, certificate included
	})
	fc.dyn = dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	fc.dyn.PrependReactor("patch", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchActionImpl)
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(p.GetPatch()); err != nil {
			t.Fatal(err)
		}
		fc.applied = append(fc.applied, u.GetKind()+" "+strings.TrimPrefix(u.GetNamespace()+"/"+u.GetName(), "/"))
		return true, u, nil
	})
	return fc
}

func (fc *fakeCluster) env(now time.Time) identityEnv {
	fc.clock = now
	return identityEnv{cs: fc.cs, dyn: fc.dyn, mapper: identity.Mapper(), ca: fc.caPEM, now: now}
}

// count is the number of actions of verb on resource since the last reset.
func (fc *fakeCluster) count(verb, resource string) int {
	n := 0
	for _, a := range fc.cs.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == "" {
			n++
		}
	}
	return n
}

func identityValues(role string) nodecfg.Values {
	return nodecfg.Values{
		Role: role, Domain: "ocp4.example.com", LBPort: 9445,
		Kubeconfig: "/etc/kubernetes/infradns/kubeconfig", DNSKubeconfig: "/etc/kubernetes/infradns-dns/kubeconfig",
		StatusLease: "infradns", IngressService: "ingress-nginx/ingress-nginx-controller",
	}
}

// noChown records the chowns instead of making them (the tests are not
// root).
func noChown(t *testing.T) *[]string {
	var got []string
	old := chown
	chown = func(p string, uid, gid int) error {
		got = append(got, fmt.Sprintf("%s:%d:%d", filepath.Base(filepath.Dir(p)), uid, gid))
		return nil
	}
	t.Cleanup(func() { chown = old })
	return &got
}

func readKubeconfig(t *testing.T, p string) identity.Parsed {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("%s: mode %04o, want 0640", p, fi.Mode().Perm())
	}
	parsed, err := identity.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return parsed
}

func TestMakeIdentities(t *testing.T) {
	chowns := noChown(t)
	fc := newFakeCluster(t)
	root := t.TempDir()
	v := identityValues(nodecfg.ControlPlane)
	now := time.Now()
	var out bytes.Buffer

	// A dry run on an empty cluster: reads only, no file.
	if err := makeIdentities(t.Context(), fc.env(now), v, root, true, &out); err != nil {
		t.Fatal(err)
	}
	for _, a := range fc.cs.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("dry run: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	if len(fc.applied) != 0 {
		t.Errorf("dry run applied %q", fc.applied)
	}
	if _, err := os.Stat(filepath.Join(root, v.Kubeconfig)); err == nil {
		t.Error("dry run wrote a kubeconfig")
	}
	if !strings.Contains(out.String(), "would issue infradns-worker") {
		t.Errorf("dry run said:\n%s", out.String())
	}

	// The first run: the namespace, the RBAC, three identities, two files.
	fc.cs.ClearActions()
	out.Reset()
	if err := makeIdentities(t.Context(), fc.env(now), v, root, false, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if _, err := fc.cs.CoreV1().Namespaces().Get(t.Context(), "ingress-nginx", metav1.GetOptions{}); err != nil {
		t.Errorf("ingress namespace: %v", err)
	}
	for _, want := range []string{"Role ingress-nginx/infradns-endpointslices", "RoleBinding infradns/" + identity.NodeReaderRole, "ValidatingAdmissionPolicyBinding infradns-worker-vip-status"} {
		if !strings.Contains(strings.Join(fc.applied, "\n"), want) {
			t.Errorf("not applied: %s (%q)", want, fc.applied)
		}
	}
	if n := fc.count("create", "certificatesigningrequests"); n != 3 {
		t.Errorf("%d certificate requests, want 3", n)
	}
	if l, _ := fc.cs.CertificatesV1().CertificateSigningRequests().List(t.Context(), metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("%d requests left", len(l.Items))
	}
	for _, s := range []string{identity.ControlPlaneSecret, identity.WorkerSecret, identity.DNSSecret} {
		if _, err := identity.Fetch(t.Context(), fc.cs, "infradns", s); err != nil {
			t.Error(err)
		}
	}
	lb := readKubeconfig(t, filepath.Join(root, v.Kubeconfig))
	dns := readKubeconfig(t, filepath.Join(root, v.DNSKubeconfig))
	if lb.User != identity.ControlPlaneUser || dns.User != identity.DNSUser {
		t.Errorf("users %s, %s", lb.User, dns.User)
	}
	if lb.Server != "https://127.0.0.1:6443" || dns.Server != "https://127.0.0.1:6443" {
		t.Errorf("servers %s, %s: want the local apiserver", lb.Server, dns.Server)
	}
	if strings.Join(*chowns, ",") != "infradns:0:65532,infradns-dns:0:65532" {
		t.Errorf("chowns %q", *chowns)
	}
	before, _ := os.ReadFile(filepath.Join(root, v.Kubeconfig))

	// Again: nothing to renew, nothing issued, the files as they were.
	fc.cs.ClearActions()
	fc.applied = nil
	out.Reset()
	if err := makeIdentities(t.Context(), fc.env(now.Add(24*time.Hour)), v, root, false, &out); err != nil {
		t.Fatal(err)
	}
	if n := fc.count("create", "certificatesigningrequests") + fc.count("update", "secrets"); n != 0 {
		t.Errorf("a second run issued or published %d times:\n%s", n, out.String())
	}
	if strings.Count(out.String(), "kept") != 3 {
		t.Errorf("second run said:\n%s", out.String())
	}
	if after, _ := os.ReadFile(filepath.Join(root, v.Kubeconfig)); !bytes.Equal(before, after) {
		t.Error("an unchanged identity rewrote the kubeconfig")
	}

	// 340 days later every identity is within 30 days of its end.
	fc.cs.ClearActions()
	out.Reset()
	if err := makeIdentities(t.Context(), fc.env(now.Add(340*24*time.Hour)), v, root, false, &out); err != nil {
		t.Fatal(err)
	}
	if n := fc.count("create", "certificatesigningrequests"); n != 3 {
		t.Errorf("%d renewals, want 3:\n%s", n, out.String())
	}
	if n := fc.count("update", "secrets"); n != 3 {
		t.Errorf("%d Secrets updated, want 3", n)
	}
	if after, _ := os.ReadFile(filepath.Join(root, v.Kubeconfig)); bytes.Equal(before, after) {
		t.Error("the renewed identity did not reach the node's kubeconfig")
	}

	// Only a control-plane node runs it: refused before any API call.
	if err := identities(t.Context(), []string{"-f", "/nonexistent.yaml", "-role", "worker"}, &out); err == nil {
		t.Error("identities ran without a readable cluster file")
	}
}

func TestFetchIdentities(t *testing.T) {
	noChown(t)
	fc := newFakeCluster(t)
	if err := makeIdentities(t.Context(), fc.env(time.Now()), identityValues(nodecfg.ControlPlane), t.TempDir(), false, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		role      string
		existing  string // a file already there, left alone
		wantUsers map[string]string
		server    string
	}{
		{name: "worker", role: nodecfg.Worker, wantUsers: map[string]string{"infradns": identity.WorkerUser, "infradns-dns": identity.DNSUser}, server: "https://api-int.ocp4.example.com:9445"},
		{name: "control plane", role: nodecfg.ControlPlane, wantUsers: map[string]string{"infradns": identity.ControlPlaneUser, "infradns-dns": identity.DNSUser}, server: "https://127.0.0.1:6443"},
		{name: "DNS file kept", role: nodecfg.Worker, existing: "/etc/kubernetes/infradns-dns/kubeconfig", wantUsers: map[string]string{"infradns": identity.WorkerUser}, server: "https://api-int.ocp4.example.com:9445"},
		{name: "bootstrap", role: nodecfg.Bootstrap, wantUsers: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			v := identityValues(tt.role)
			if tt.existing != "" {
				p := filepath.Join(root, tt.existing)
				os.MkdirAll(filepath.Dir(p), 0o755)
				os.WriteFile(p, []byte("mine"), 0o600)
			}
			var out bytes.Buffer
			if err := fetchIdentities(t.Context(), fc.cs, v, root, &out); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{v.Kubeconfig, v.DNSKubeconfig} {
				dir := filepath.Base(filepath.Dir(p))
				want, ok := tt.wantUsers[dir]
				b, err := os.ReadFile(filepath.Join(root, p))
				if !ok {
					if p == tt.existing && string(b) != "mine" {
						t.Errorf("%s overwritten", p)
					} else if p != tt.existing && err == nil {
						t.Errorf("%s written", p)
					}
					continue
				}
				got := readKubeconfig(t, filepath.Join(root, p))
				if got.User != want || got.Server != tt.server {
					t.Errorf("%s: %s at %s, want %s at %s", p, got.User, got.Server, want, tt.server)
				}
			}
		})
	}

	// A renewal: the worker's file from the first issue is replaced by
	// the identity renewed 340 days later; a second fetch keeps it.
	root0 := t.TempDir()
	v := identityValues(nodecfg.Worker)
	if err := fetchIdentities(t.Context(), fc.cs, v, root0, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	first := readKubeconfig(t, filepath.Join(root0, v.Kubeconfig))
	if err := makeIdentities(t.Context(), fc.env(time.Now().Add(340*24*time.Hour)), identityValues(nodecfg.ControlPlane), t.TempDir(), false, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var renewed bytes.Buffer
	if err := fetchIdentities(t.Context(), fc.cs, v, root0, &renewed); err != nil {
		t.Fatal(err)
	}
	second := readKubeconfig(t, filepath.Join(root0, v.Kubeconfig))
	if bytes.Equal(first.Cert, second.Cert) || second.User != identity.WorkerUser || !strings.Contains(renewed.String(), "wrote") {
		t.Fatalf("the renewed identity was not fetched:\n%s", renewed.String())
	}
	var again bytes.Buffer
	if err := fetchIdentities(t.Context(), fc.cs, v, root0, &again); err != nil || strings.Contains(again.String(), "wrote") {
		t.Fatalf("a second fetch of the same identity wrote: %v\n%s", err, again.String())
	}

	// A cluster without the Secrets: said, no file, no error.
	root := t.TempDir()
	var out bytes.Buffer
	if err := fetchIdentities(t.Context(), fake.NewClientset(), identityValues(nodecfg.Worker), root, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no identity") {
		t.Errorf("said %q", out.String())
	}
	if _, err := os.Stat(filepath.Join(root, "/etc/kubernetes/infradns/kubeconfig")); err == nil {
		t.Error("a kubeconfig without an identity")
	}
}

func TestIdentityCredential(t *testing.T) {
	tests := []struct {
		files []string
		want  string
	}{
		{nil, ""},
		{[]string{kubeletConf}, kubeletConf},
		{[]string{adminConf, kubeletConf}, adminConf},
		{[]string{adminConf}, adminConf},
	}
	for _, tt := range tests {
		root := t.TempDir()
		for _, f := range tt.files {
			p := filepath.Join(root, f)
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, nil, 0o600)
		}
		if got := identityCredential(newNode(root, false, &bytes.Buffer{})); got != tt.want {
			t.Errorf("with %q: %q, want %q", tt.files, got, tt.want)
		}
	}
}
