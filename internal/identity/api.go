package identity

// What talks to the API: a certificate signed by the cluster's CA through a
// CertificateSigningRequest, the Secrets that share an identity with the
// nodes, and the server-side apply of RBAC's objects.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// FieldManager is the server-side apply field manager.
const FieldManager = "infradns"

// Label is on every object infradns makes: app.kubernetes.io/name=infradns.
var Label = map[string]string{"app.kubernetes.io/name": "infradns"}

// ApprovalReason is the reason of the Approved condition Issue sets.
const ApprovalReason = "infradnsIssued"

// IssueWait bounds how long Issue waits for the signer (kube-controller-
// manager signs kube-apiserver-client requests within a second or so).
var IssueWait = 2 * time.Minute

// pollEvery is how often Issue looks for the certificate.
var pollEvery = 200 * time.Millisecond

// Issue gets user a client certificate from the cluster's CA: a new key,
// a CertificateSigningRequest for kubernetes.io/kube-apiserver-client
// (client auth only, expiration as expirationSeconds), approved by cs's
// identity (which needs approve on that signer: an administrator's), then
// the certificate the signer puts in its status; the request is deleted
// afterwards, whatever happened. The certificate must name user and match
// the key.
func Issue(ctx context.Context, cs kubernetes.Interface, user string, expiration time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := NewKey()
	if err != nil {
		return nil, nil, err
	}
	req, err := CSR(key, user)
	if err != nil {
		return nil, nil, err
	}
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		return nil, nil, err
	}
	secs := int32(expiration / time.Second)
	csrs := cs.CertificatesV1().CertificateSigningRequests()
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + hex.EncodeToString(suffix), Labels: Label},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           req,
			SignerName:        certificatesv1.KubeAPIServerClientSignerName,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth},
			ExpirationSeconds: &secs,
		},
	}
	csr, err = csrs.Create(ctx, csr, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("certificate request for %s: %w", user, err)
	}
	name := csr.Name
	defer func() {
		// A fresh context: the caller's may be what ended the wait.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if derr := csrs.Delete(dctx, name, metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) && err == nil {
			err = fmt.Errorf("delete certificate request %s: %w", name, derr)
		}
	}()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type:    certificatesv1.CertificateApproved,
		Status:  corev1.ConditionTrue,
		Reason:  ApprovalReason,
		Message: "infradns identities: " + user,
	})
	if _, err = csrs.UpdateApproval(ctx, name, csr, metav1.UpdateOptions{}); err != nil {
		return nil, nil, fmt.Errorf("approve certificate request %s: %w", name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, pollEvery, IssueWait, true, func(ctx context.Context) (bool, error) {
		got, err := csrs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if (c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed) && c.Status == corev1.ConditionTrue {
				return false, fmt.Errorf("%s: %s %s", c.Type, c.Reason, c.Message)
			}
		}
		certPEM = got.Status.Certificate
		return len(certPEM) > 0, nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("certificate request %s for %s: %w", name, user, err)
	}
	if err = matches(certPEM, key, user); err != nil {
		return nil, nil, fmt.Errorf("certificate request %s: %w", name, err)
	}
	if keyPEM, err = KeyPEM(key); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// matches checks that the signed certificate is the one asked for.
func matches(certPEM []byte, key *ecdsa.PrivateKey, user string) error {
	c, err := ParseCert(certPEM)
	if err != nil {
		return err
	}
	if c.Subject.CommonName != user || len(c.Subject.Organization) != 0 {
		return fmt.Errorf("the certificate names %q (groups %q), not %q alone", c.Subject.CommonName, c.Subject.Organization, user)
	}
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return errors.New("the certificate is not for the request's key")
	}
	return nil
}

// Publish creates or updates the Secret namespace/name (type Opaque,
// labelled app.kubernetes.io/name=infradns) holding kubeconfig under
// SecretKey. It reports whether it changed anything.
func Publish(ctx context.Context, cs kubernetes.Interface, namespace, name string, kubeconfig []byte) (bool, error) {
	secrets := cs.CoreV1().Secrets(namespace)
	old, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: Label},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{SecretKey: kubeconfig},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("create secret %s/%s: %w", namespace, name, err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get secret %s/%s: %w", namespace, name, err)
	}
	if old.Type != corev1.SecretTypeOpaque && old.Type != "" {
		return false, fmt.Errorf("secret %s/%s is of type %s, not Opaque: not infradns's", namespace, name, old.Type)
	}
	if bytes.Equal(old.Data[SecretKey], kubeconfig) && old.Labels["app.kubernetes.io/name"] == Label["app.kubernetes.io/name"] {
		return false, nil
	}
	s := old.DeepCopy()
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	for k, v := range Label {
		s.Labels[k] = v
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[SecretKey] = kubeconfig
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		return false, fmt.Errorf("update secret %s/%s: %w", namespace, name, err)
	}
	return true, nil
}

// Fetch is the kubeconfig in the Secret namespace/name (an error wrapping
// the API's NotFound when there is none).
func Fetch(ctx context.Context, cs kubernetes.Interface, namespace, name string) ([]byte, error) {
	s, err := cs.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
	}
	kc := s.Data[SecretKey]
	if len(kc) == 0 {
		return nil, fmt.Errorf("secret %s/%s: no %q", namespace, name, SecretKey)
	}
	return kc, nil
}

// Objects splits a multi-document YAML into its objects (empty documents
// and comment-only ones skipped); each must have an apiVersion, a kind and
// a name.
func Objects(multiDoc []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(multiDoc), 4096)
	var objs []*unstructured.Unstructured
	for i := 1; ; i++ {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("document %d: apiVersion, kind and metadata.name are needed", i)
		}
		objs = append(objs, u)
	}
}

// kinds are the kinds RBAC's YAML holds, with their resources and scope.
var kinds = []struct {
	gvk        schema.GroupVersionKind
	resource   string
	namespaced bool
}{
	{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "namespaces", false},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, "clusterroles", false},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, "clusterrolebindings", false},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}, "roles", true},
	{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}, "rolebindings", true},
	{schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"}, "validatingadmissionpolicies", false},
	{schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"}, "validatingadmissionpolicybindings", false},
}

// Mapper is a static RESTMapper for the kinds RBAC's YAML holds: no
// discovery round trip, and a kind nobody expected is an error rather
// than applied.
func Mapper() meta.RESTMapper {
	var gvs []schema.GroupVersion
	for _, k := range kinds {
		gvs = append(gvs, k.gvk.GroupVersion())
	}
	m := meta.NewDefaultRESTMapper(gvs)
	for _, k := range kinds {
		scope := meta.RESTScopeRoot
		if k.namespaced {
			scope = meta.RESTScopeNamespace
		}
		m.AddSpecific(k.gvk, k.gvk.GroupVersion().WithResource(k.resource), k.gvk.GroupVersion().WithResource(k.resource[:len(k.resource)-1]), scope)
	}
	return m
}

// Apply server-side applies every object of the multi-document YAML, in
// order (the file puts each namespace before what lives in it), with the
// field manager "infradns" and force (infradns owns these objects' fields;
// an earlier `kubectl apply` of the file is taken over). It returns the
// objects applied, as "Kind namespace/name".
func Apply(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, multiDoc []byte) ([]string, error) {
	objs, err := Objects(multiDoc)
	if err != nil {
		return nil, err
	}
	var done []string
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return done, fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		id := gvk.Kind + " " + o.GetName()
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if o.GetNamespace() == "" {
				return done, fmt.Errorf("%s: no namespace", id)
			}
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
			id = gvk.Kind + " " + o.GetNamespace() + "/" + o.GetName()
		}
		if _, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return done, fmt.Errorf("apply %s: %w", id, err)
		}
		done = append(done, id)
	}
	return done, nil
}
