package deploy

import (
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestNodesService decodes deploy/nodes-service.yaml strictly and checks it
// is what mdnsnodes' nodes-service needs and no more: a headless Service
// that selects the DNS static pod (its labels as the template writes them)
// with not-ready pods listed, and list+watch of EndpointSlices in that one
// namespace for the DNS pod's identities (infradns-dns, or infradns without
// dnsKubeconfig).
func TestNodesService(t *testing.T) {
	b, err := os.ReadFile("nodes-service.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 3 {
		t.Fatalf("%d documents, want Service, Role, RoleBinding", len(docs))
	}
	var svc corev1.Service
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &svc); err != nil {
		t.Fatal(err)
	}
	if svc.Kind != "Service" || svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: kind %q clusterIP %q publishNotReadyAddresses %v, want a headless Service listing not-ready pods",
			svc.Name, svc.Kind, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	pod, err := Templates.ReadFile("static-pods/coredns.yaml.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	labels := string(pod[strings.Index(string(pod), "  labels:\n"):strings.Index(string(pod), "\nspec:")])
	if len(svc.Spec.Selector) == 0 {
		t.Fatal("Service selects nothing")
	}
	for k, v := range svc.Spec.Selector {
		if !strings.Contains(labels, "\n    "+k+": "+v+"\n") {
			t.Errorf("selector %s=%s is not a label of the DNS pod:\n%s", k, v, labels)
		}
	}
	if !strings.Contains(labels, "component: coredns") {
		t.Error("the DNS pod template lost its component label")
	}

	o, err := decodeRBAC(strings.Join(docs[1:], "\n---\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := o.grants()
	if err != nil {
		t.Fatal(err)
	}
	ns := svc.Namespace
	want := []string{
		"User:" + rbacUser + " " + ns + " discovery.k8s.io/endpointslices/* list []",
		"User:" + rbacUser + " " + ns + " discovery.k8s.io/endpointslices/* watch []",
		"User:" + rbacDNSUser + " " + ns + " discovery.k8s.io/endpointslices/* list []",
		"User:" + rbacDNSUser + " " + ns + " discovery.k8s.io/endpointslices/* watch []",
	}
	if !slices.Equal(got, want) {
		t.Errorf("grants %v, want %v", got, want)
	}
	var objs []metav1.Object
	objs = append(objs, &svc)
	objs = appendObjects(objs, o.roles)
	objs = appendObjects(objs, o.roleBindings)
	for _, m := range objs {
		if m.GetNamespace() != ns {
			t.Errorf("%s in namespace %q, want the Service's %q (the sed recipe moves them together)", m.GetName(), m.GetNamespace(), ns)
		}
		if m.GetLabels()["app.kubernetes.io/name"] != "infradns" {
			t.Errorf("%s: no app.kubernetes.io/name=infradns label", m.GetName())
		}
	}
}
