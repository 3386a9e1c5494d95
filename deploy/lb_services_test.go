package deploy

import (
	"os"
	"slices"
	"testing"
)

// TestLBServicesRBAC decodes deploy/lb-services.yaml strictly and checks it
// grants what lbconfig's services option reads beyond rbac.yaml and no
// more: list and watch of the EndpointSlices of every namespace, for the
// two lbconfig identities (not the DNS pod's).
func TestLBServicesRBAC(t *testing.T) {
	b, err := os.ReadFile("lb-services.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o, err := decodeRBAC(string(b))
	if err != nil {
		t.Fatal(err)
	}
	got, err := o.grants()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, u := range []string{rbacUser, rbacWorkerUser} {
		want = append(want, "User:"+u+" * discovery.k8s.io/endpointslices/* list []", "User:"+u+" * discovery.k8s.io/endpointslices/* watch []")
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("grants %v, want %v", got, want)
	}
	for _, r := range o.clusterRoles {
		if r.Labels["app.kubernetes.io/name"] != "infradns" {
			t.Errorf("ClusterRole %s: no app.kubernetes.io/name=infradns label", r.Name)
		}
	}
	for _, r := range o.crBindings {
		if r.Labels["app.kubernetes.io/name"] != "infradns" {
			t.Errorf("ClusterRoleBinding %s: no app.kubernetes.io/name=infradns label", r.Name)
		}
	}
}
