package deploy

import (
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestRBAC decodes deploy/rbac.yaml strictly and checks it grants what the
// plugins' watches and the status Lease need, to the user it binds.
func TestRBAC(t *testing.T) {
	b, err := os.ReadFile("rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 4 {
		t.Fatalf("%d documents, want ClusterRole, ClusterRoleBinding, Role, RoleBinding", len(docs))
	}
	var cr rbacv1.ClusterRole
	var crb rbacv1.ClusterRoleBinding
	var r rbacv1.Role
	var rb rbacv1.RoleBinding
	for i, into := range []any{&cr, &crb, &r, &rb} {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), into); err != nil {
			t.Fatalf("document %d: %v", i+1, err)
		}
	}
	allows := func(rules []rbacv1.PolicyRule, group, resource string, verbs ...string) bool {
		for _, rule := range rules {
			if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) {
				for _, v := range verbs {
					if !slices.Contains(rule.Verbs, v) {
						return false
					}
				}
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		rules           []rbacv1.PolicyRule
		group, resource string
		verbs           []string
	}{
		{cr.Rules, "", "nodes", []string{"list", "watch"}},
		{cr.Rules, "discovery.k8s.io", "endpointslices", []string{"list", "watch"}},
		{r.Rules, "coordination.k8s.io", "leases", []string{"get", "create", "update"}},
	} {
		if !allows(c.rules, c.group, c.resource, c.verbs...) {
			t.Errorf("%s/%s %v not granted", c.group, c.resource, c.verbs)
		}
	}
	if crb.RoleRef.Name != cr.Name || rb.RoleRef.Name != r.Name || rb.Namespace != r.Namespace {
		t.Errorf("bindings point at %q and %q/%q", crb.RoleRef.Name, rb.Namespace, rb.RoleRef.Name)
	}
	if len(crb.Subjects) != 1 || len(rb.Subjects) != 1 || crb.Subjects[0] != rb.Subjects[0] || crb.Subjects[0].Kind != "User" {
		t.Errorf("subjects %v and %v: want the same one user", crb.Subjects, rb.Subjects)
	}
}
