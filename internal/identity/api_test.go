package identity

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// signer plays kube-controller-manager: it signs each approved request
// (with ca, for the expiration asked) and returns what it saw. deny
// makes it deny them instead.
func signer(ctx context.Context, t *testing.T, cs kubernetes.Interface, ca *testCA, deny bool) <-chan []certificatesv1.CertificateSigningRequest {
	seen := make(chan []certificatesv1.CertificateSigningRequest, 1)
	go func() {
		var saw []certificatesv1.CertificateSigningRequest
		defer func() { seen <- saw }()
		for ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
			l, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, csr := range l.Items {
				if len(csr.Status.Certificate) > 0 || !approved(csr) || slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
					return c.Type == certificatesv1.CertificateDenied
				}) {
					continue
				}
				saw = append(saw, csr)
				if deny {
					csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "test"})
				} else {
					csr.Status.Certificate = ca.signRequest(t, csr.Spec.Request, time.Duration(*csr.Spec.ExpirationSeconds)*time.Second)
				}
				if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, &csr, metav1.UpdateOptions{}); err != nil {
					t.Errorf("signer: %v", err)
				}
			}
		}
	}()
	return seen
}

func approved(csr certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved && c.Status == corev1.ConditionTrue && c.Reason == ApprovalReason {
			return true
		}
	}
	return false
}

func TestIssue(t *testing.T) {
	ca := newTestCA(t)
	cs := fake.NewClientset()
	ctx, cancel := context.WithCancel(t.Context())
	seen := signer(ctx, t, cs, ca, false)
	certPEM, keyPEM, err := Issue(t.Context(), cs, WorkerUser, 365*24*time.Hour)
	cancel()
	saw := <-seen
	if err != nil {
		t.Fatal(err)
	}
	if len(saw) != 1 {
		t.Fatalf("the signer saw %d requests, want 1", len(saw))
	}
	csr := saw[0]
	if csr.Spec.SignerName != "kubernetes.io/kube-apiserver-client" || !slices.Equal(csr.Spec.Usages, []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}) || *csr.Spec.ExpirationSeconds != 31536000 {
		t.Errorf("request spec %+v", csr.Spec)
	}
	c, err := ParseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject.CommonName != WorkerUser {
		t.Errorf("CN %q", c.Subject.CommonName)
	}
	if exp, _, _ := Expiring(certPEM, time.Now(), 364*24*time.Hour); exp {
		t.Error("a one-year certificate expires within 364 days")
	}
	if !bytes.Contains(keyPEM, []byte("EC PRIVATE KEY")) {
		t.Errorf("key %q", keyPEM)
	}
	if _, err := Kubeconfig("https://s", ca.pem, certPEM, keyPEM, WorkerUser); err != nil {
		t.Error(err)
	}
	l, _ := cs.CertificatesV1().CertificateSigningRequests().List(t.Context(), metav1.ListOptions{})
	if len(l.Items) != 0 {
		t.Errorf("%d requests left behind", len(l.Items))
	}
}

func TestIssueDenied(t *testing.T) {
	cs := fake.NewClientset()
	ctx, cancel := context.WithCancel(t.Context())
	seen := signer(ctx, t, cs, newTestCA(t), true)
	_, _, err := Issue(t.Context(), cs, DNSUser, time.Hour)
	cancel()
	<-seen
	if err == nil || !strings.Contains(err.Error(), "Denied") {
		t.Fatalf("err = %v, want the denial", err)
	}
	if l, _ := cs.CertificatesV1().CertificateSigningRequests().List(t.Context(), metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("%d requests left behind", len(l.Items))
	}
}

func TestIssueNoSigner(t *testing.T) {
	old := IssueWait
	IssueWait = 300 * time.Millisecond
	defer func() { IssueWait = old }()
	cs := fake.NewClientset()
	if _, _, err := Issue(t.Context(), cs, DNSUser, time.Hour); err == nil {
		t.Fatal("a certificate nobody signed")
	}
	if l, _ := cs.CertificatesV1().CertificateSigningRequests().List(t.Context(), metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("%d requests left behind", len(l.Items))
	}
}

// TestIssueWrongCertificate: a certificate for another name (a confused
// or hostile signer) is refused.
func TestIssueWrongCertificate(t *testing.T) {
	ca := newTestCA(t)
	cs := fake.NewClientset()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
			l, _ := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
			for _, csr := range l.Items {
				if len(csr.Status.Certificate) == 0 && approved(csr) {
					other, _ := NewKey()
					csr.Status.Certificate = ca.sign(t, &other.PublicKey, DNSUser, time.Hour)
					cs.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, &csr, metav1.UpdateOptions{})
				}
			}
		}
	}()
	if _, _, err := Issue(t.Context(), cs, DNSUser, time.Hour); err == nil || !strings.Contains(err.Error(), "not for the request's key") {
		t.Fatalf("err = %v", err)
	}
}

func TestPublishFetch(t *testing.T) {
	ctx := t.Context()
	cs := fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: "infradns"},
		Type:       corev1.SecretTypeServiceAccountToken,
	})
	if _, err := Fetch(ctx, cs, "infradns", WorkerSecret); !apierrors.IsNotFound(err) {
		t.Fatalf("Fetch of a missing Secret: %v, want NotFound", err)
	}
	steps := []struct {
		data        string
		wantChanged bool
	}{{"one", true}, {"one", false}, {"two", true}}
	for _, s := range steps {
		changed, err := Publish(ctx, cs, "infradns", WorkerSecret, []byte(s.data))
		if err != nil || changed != s.wantChanged {
			t.Fatalf("Publish(%q) = %v, %v; want %v", s.data, changed, err, s.wantChanged)
		}
		got, err := Fetch(ctx, cs, "infradns", WorkerSecret)
		if err != nil || string(got) != s.data {
			t.Fatalf("Fetch = %q, %v; want %q", got, err, s.data)
		}
	}
	sec, _ := cs.CoreV1().Secrets("infradns").Get(ctx, WorkerSecret, metav1.GetOptions{})
	if sec.Type != corev1.SecretTypeOpaque || sec.Labels["app.kubernetes.io/name"] != "infradns" {
		t.Errorf("secret %+v", sec.ObjectMeta)
	}
	if _, err := Publish(ctx, cs, "infradns", "foreign", []byte("x")); err == nil {
		t.Error("a Secret of another type was overwritten")
	}
	if _, err := Fetch(ctx, cs, "infradns", "foreign"); err == nil {
		t.Error("a Secret without the kubeconfig key was fetched")
	}
}

func TestApply(t *testing.T) {
	rbac, err := RBAC("ingress-nginx", "infradns")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(rbac)
	if err != nil {
		t.Fatal(err)
	}
	mapper := Mapper()
	var fileKinds []string
	for _, o := range objs {
		if _, err := mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version); err != nil {
			t.Errorf("%s: %v", o.GetKind(), err)
		}
		fileKinds = append(fileKinds, o.GetKind())
	}
	if !slices.Contains(fileKinds, "ValidatingAdmissionPolicyBinding") {
		t.Errorf("kinds %q", fileKinds)
	}
	listKinds := map[schema.GroupVersionResource]string{}
	for _, k := range kinds {
		listKinds[k.gvk.GroupVersion().WithResource(k.resource)] = k.gvk.Kind + "List"
	}
	// The dynamic fake's tracker applies only to existing objects (as a
	// strategic merge): the reactor checks what an apiserver would get
	// (an apply patch, field manager infradns, forced, the object of the
	// file at the resource its kind maps to) and answers with it.
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)
	var applied []string
	dyn.PrependReactor("patch", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchActionImpl)
		if p.GetPatchType() != types.ApplyPatchType || p.PatchOptions.FieldManager != FieldManager || p.PatchOptions.Force == nil || !*p.PatchOptions.Force {
			t.Errorf("patch %s %s: type %s, options %+v", p.GetResource().Resource, p.Name, p.GetPatchType(), p.PatchOptions)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(p.GetPatch()); err != nil {
			t.Fatal(err)
		}
		m, _ := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		if m.Resource != p.GetResource() || u.GetName() != p.Name || u.GetNamespace() != p.GetNamespace() {
			t.Errorf("%s %s/%s sent to %s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName(), p.GetResource(), p.GetNamespace(), p.Name)
		}
		applied = append(applied, u.GetKind()+" "+u.GetName())
		return true, u, nil
	})
	done, err := Apply(t.Context(), dyn, mapper, rbac)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != len(objs) || len(applied) != len(objs) {
		t.Errorf("applied %d (%d patches) of %d: %q", len(done), len(applied), len(objs), done)
	}
	for _, want := range []string{"Role ingress-nginx/infradns-endpointslices", "RoleBinding infradns/" + NodeReaderRole, "ClusterRole infradns", "Namespace infradns"} {
		if !slices.Contains(done, want) {
			t.Errorf("%q not applied: %q", want, done)
		}
	}
	if _, err := Apply(t.Context(), dyn, mapper, []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n  namespace: y\n")); err == nil {
		t.Error("a kind rbac.yaml does not hold was applied")
	}
	if _, err := Apply(t.Context(), dyn, mapper, []byte("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: x\n")); err == nil {
		t.Error("a Role without a namespace was applied")
	}
}
