package identity

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/deploy"
	"github.com/infradns/infradns/internal/nodecfg"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestRBAC(t *testing.T) {
	tests := []struct {
		name, ingress, status string
		wantErr               string
		// ingressObjs: the objects that must be in the ingress namespace.
		wantNamespaces []string
	}{
		{name: "default", ingress: "openshift-ingress", status: "infradns"},
		{name: "ingress-nginx", ingress: "ingress-nginx", status: "infradns"},
		{name: "own status namespace", ingress: "openshift-ingress", status: "infradns-status", wantNamespaces: []string{"infradns-status"}},
		{name: "bad ingress", ingress: "Ingress_NGINX", status: "infradns", wantErr: "not a namespace name"},
		{name: "injection", ingress: "x\n  evil: y", status: "infradns", wantErr: "not a namespace name"},
		{name: "empty ingress", ingress: "", status: "infradns", wantErr: "not a namespace name"},
		{name: "bad status", ingress: "openshift-ingress", status: "a/b", wantErr: "not a namespace name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RBAC(tt.ingress, tt.status)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			objs, err := Objects(got)
			if err != nil {
				t.Fatal(err)
			}
			file, err := Objects(deploy.RBAC)
			if err != nil {
				t.Fatal(err)
			}
			if tt.ingress == fileIngressNamespace && !bytes.HasPrefix(got, deploy.RBAC) {
				t.Error("for openshift-ingress, deploy/rbac.yaml is not kept byte for byte")
			}
			// The file's objects come first, in order; exactly two of
			// them move to the ingress namespace.
			moved := 0
			for i, f := range file {
				o := objs[i]
				if o.GetKind() != f.GetKind() || o.GetName() != f.GetName() {
					t.Fatalf("object %d: %s %s, want %s %s", i, o.GetKind(), o.GetName(), f.GetKind(), f.GetName())
				}
				if f.GetNamespace() == fileIngressNamespace {
					moved++
					if o.GetNamespace() != tt.ingress {
						t.Errorf("%s %s in %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), tt.ingress)
					}
				} else if o.GetNamespace() != f.GetNamespace() {
					t.Errorf("%s %s moved from %q to %q", o.GetKind(), o.GetName(), f.GetNamespace(), o.GetNamespace())
				}
			}
			if moved != 2 {
				t.Errorf("%d objects in the ingress namespace, want 2", moved)
			}
			extra := objs[len(file):]
			var nss []string
			var role *rbacv1.Role
			var binding *rbacv1.RoleBinding
			for _, o := range extra {
				switch o.GetKind() {
				case "Namespace":
					nss = append(nss, o.GetName())
				case "Role":
					role = &rbacv1.Role{}
					if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, role, true); err != nil {
						t.Fatal(err)
					}
				case "RoleBinding":
					binding = &rbacv1.RoleBinding{}
					if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, binding, true); err != nil {
						t.Fatal(err)
					}
				default:
					t.Errorf("unexpected %s %s", o.GetKind(), o.GetName())
				}
			}
			if strings.Join(nss, ",") != strings.Join(tt.wantNamespaces, ",") {
				t.Errorf("namespaces added %q, want %q", nss, tt.wantNamespaces)
			}
			if role == nil || binding == nil {
				t.Fatal("no Role or RoleBinding for the nodes")
			}
			if role.Namespace != tt.status || binding.Namespace != tt.status {
				t.Errorf("nodes' grant in %q/%q, want %q", role.Namespace, binding.Namespace, tt.status)
			}
			if len(role.Rules) != 1 {
				t.Fatalf("rules %+v", role.Rules)
			}
			r := role.Rules[0]
			if strings.Join(r.Verbs, ",") != "get" || strings.Join(r.Resources, ",") != "secrets" || len(r.APIGroups) != 1 || r.APIGroups[0] != "" {
				t.Errorf("rule %+v: want get on core secrets only", r)
			}
			if strings.Join(r.ResourceNames, ",") != WorkerSecret+","+DNSSecret {
				t.Errorf("resourceNames %q: want the worker's and the DNS pod's Secrets only", r.ResourceNames)
			}
			if len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "Group" || binding.Subjects[0].Name != "system:nodes" {
				t.Errorf("subjects %+v, want the group system:nodes", binding.Subjects)
			}
			if binding.RoleRef.Kind != "Role" || binding.RoleRef.Name != role.Name {
				t.Errorf("roleRef %+v", binding.RoleRef)
			}
			if bytes.Contains(got[len(deploy.RBAC):], []byte(`"`+ControlPlaneSecret+`"`)) {
				t.Error("the control plane's Secret is granted to nodes")
			}
		})
	}
}

func TestCSR(t *testing.T) {
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{ControlPlaneUser, WorkerUser, DNSUser} {
		b, err := CSR(key, user)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		if blk == nil || blk.Type != "CERTIFICATE REQUEST" {
			t.Fatalf("%s: not a PEM certificate request: %q", user, b)
		}
		req, err := x509.ParseCertificateRequest(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if err := req.CheckSignature(); err != nil {
			t.Error(err)
		}
		if req.Subject.CommonName != user {
			t.Errorf("CN %q, want %q", req.Subject.CommonName, user)
		}
		if len(req.Subject.Organization) != 0 || len(req.Subject.OrganizationalUnit) != 0 {
			t.Errorf("%s: groups %q requested", user, req.Subject.Organization)
		}
		if len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) != 0 {
			t.Errorf("%s: names beyond the CN", user)
		}
	}
	if _, err := CSR(key, ""); err == nil {
		t.Error("a request for no user was made")
	}
}

func TestKubeconfigRoundTrip(t *testing.T) {
	ca := newTestCA(t)
	key, _ := NewKey()
	keyPEM, err := KeyPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := ca.sign(t, &key.PublicKey, WorkerUser, time.Hour)
	kc, err := Kubeconfig("https://api-int.ocp4.example.com:9445", ca.pem, certPEM, keyPEM, WorkerUser)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"certificate-authority-data:", "client-certificate-data:", "client-key-data:", "current-context: " + WorkerUser, "server: https://api-int.ocp4.example.com:9445"} {
		if !bytes.Contains(kc, []byte(want)) {
			t.Errorf("kubeconfig lacks %q:\n%s", want, kc)
		}
	}
	p, err := Parse(kc)
	if err != nil {
		t.Fatal(err)
	}
	if p.User != WorkerUser || !bytes.Equal(p.CA, ca.pem) || !bytes.Equal(p.Cert, certPEM) || !bytes.Equal(p.Key, keyPEM) {
		t.Errorf("parsed %+v", p)
	}
	moved, err := WithServer(kc, "https://127.0.0.1:6443")
	if err != nil {
		t.Fatal(err)
	}
	if p2, _ := Parse(moved); p2.Server != "https://127.0.0.1:6443" || !bytes.Equal(p2.Cert, certPEM) {
		t.Errorf("WithServer: %+v", p2)
	}
	same, _ := WithServer(moved, "https://127.0.0.1:6443")
	if !bytes.Equal(same, moved) {
		t.Error("WithServer is not stable: a re-run would rewrite the node's file")
	}
	for _, bad := range [][]string{{"", "x"}, {"https://s", ""}} {
		if _, err := Kubeconfig(bad[0], ca.pem, certPEM, keyPEM, bad[1]); err == nil {
			t.Errorf("Kubeconfig(%q, user %q) accepted", bad[0], bad[1])
		}
	}
	if _, err := Kubeconfig("https://s", nil, certPEM, keyPEM, WorkerUser); err == nil {
		t.Error("a kubeconfig without a CA was made")
	}
	if _, err := Parse([]byte("apiVersion: v1\nkind: Config\ncurrent-context: x\n")); err == nil {
		t.Error("Parse accepted a kubeconfig without its context")
	}
}

func TestServer(t *testing.T) {
	tests := []struct {
		role    string
		v       nodecfg.Values
		want    string
		wantErr bool
	}{
		{role: nodecfg.ControlPlane, v: nodecfg.Values{Domain: "ocp4.example.com", LBPort: 9445}, want: "https://127.0.0.1:6443"},
		{role: nodecfg.ControlPlane, v: nodecfg.Values{Domain: "ocp4.example.com", APIPort: 7443}, want: "https://127.0.0.1:7443"},
		{role: nodecfg.Worker, v: nodecfg.Values{Domain: "ocp4.example.com", LBPort: 9445}, want: "https://api-int.ocp4.example.com:9445"},
		{role: nodecfg.Worker, v: nodecfg.Values{Domain: "ocp4.example.com", LBPort: 8443}, want: "https://api-int.ocp4.example.com:8443"},
		{role: nodecfg.Worker, v: nodecfg.Values{Domain: "ocp4.example.com"}, want: "https://api-int.ocp4.example.com:9445"},
		{role: nodecfg.Worker, v: nodecfg.Values{}, wantErr: true},
		{role: nodecfg.Bootstrap, v: nodecfg.Values{Domain: "ocp4.example.com"}, wantErr: true},
	}
	for _, tt := range tests {
		got, err := Server(tt.role, tt.v)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("Server(%s, %+v) = %q, %v; want %q", tt.role, tt.v, got, err, tt.want)
		}
	}
}

func TestExpiring(t *testing.T) {
	ca := newTestCA(t)
	key, _ := NewKey()
	now := time.Now()
	cert := ca.sign(t, &key.PublicKey, DNSUser, 40*24*time.Hour)
	tests := []struct {
		now    time.Time
		within time.Duration
		want   bool
	}{
		{now, 30 * 24 * time.Hour, false},
		{now.Add(11 * 24 * time.Hour), 30 * 24 * time.Hour, true},
		{now.Add(50 * 24 * time.Hour), 0, true},
	}
	for _, tt := range tests {
		got, notAfter, err := Expiring(cert, tt.now, tt.within)
		if err != nil || got != tt.want {
			t.Errorf("Expiring(at %v, within %v) = %v, %v; want %v", tt.now, tt.within, got, err, tt.want)
		}
		if notAfter.Before(now.Add(39*24*time.Hour)) || notAfter.After(now.Add(41*24*time.Hour)) {
			t.Errorf("notAfter %v", notAfter)
		}
	}
	if _, _, err := Expiring([]byte("garbage"), now, 0); err == nil {
		t.Error("garbage parsed")
	}
}
