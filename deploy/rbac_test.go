package deploy

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/infradns/infradns/internal/kube"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The identity rbac.yaml binds and the namespace of the status Leases.
const (
	rbacUser        = "infradns"
	statusLeaseNS   = "infradns"
	ingressNSInFile = kube.DefaultIngressNamespace
)

// rbacObjects are the documents of rbac.yaml, each decoded strictly as its
// kind; an unknown kind is an error.
type rbacObjects struct {
	namespaces   []corev1.Namespace
	clusterRoles []rbacv1.ClusterRole
	crBindings   []rbacv1.ClusterRoleBinding
	roles        []rbacv1.Role
	roleBindings []rbacv1.RoleBinding
}

func decodeRBAC(text string) (rbacObjects, error) {
	var o rbacObjects
	for i, doc := range strings.Split(text, "\n---\n") {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return o, fmt.Errorf("document %d: %w", i+1, err)
		}
		var err error
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 Namespace":
			o.namespaces, err = appendStrict(o.namespaces, doc)
		case "rbac.authorization.k8s.io/v1 ClusterRole":
			o.clusterRoles, err = appendStrict(o.clusterRoles, doc)
		case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
			o.crBindings, err = appendStrict(o.crBindings, doc)
		case "rbac.authorization.k8s.io/v1 Role":
			o.roles, err = appendStrict(o.roles, doc)
		case "rbac.authorization.k8s.io/v1 RoleBinding":
			o.roleBindings, err = appendStrict(o.roleBindings, doc)
		default:
			err = fmt.Errorf("unexpected %s %s", tm.APIVersion, tm.Kind)
		}
		if err != nil {
			return o, fmt.Errorf("document %d: %w", i+1, err)
		}
	}
	return o, nil
}

func appendStrict[T any](list []T, doc string) ([]T, error) {
	var v T
	if err := yaml.UnmarshalStrict([]byte(doc), &v); err != nil {
		return list, err
	}
	return append(list, v), nil
}

// grants are what the objects give each subject: one line per namespace
// ("*" for a ClusterRoleBinding), API group, resource, verb and resource
// name, sorted. A binding to a role the file does not define is an error.
func (o rbacObjects) grants() ([]string, error) {
	var out []string
	add := func(ns string, subjects []rbacv1.Subject, rules []rbacv1.PolicyRule) {
		for _, s := range subjects {
			for _, r := range rules {
				names := r.ResourceNames
				if len(names) == 0 {
					names = []string{"*"}
				}
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							for _, n := range names {
								out = append(out, fmt.Sprintf("%s:%s %s %s/%s/%s %s %s", s.Kind, s.Name, ns, g, res, n, v, r.NonResourceURLs))
							}
						}
					}
				}
			}
		}
	}
	for _, b := range o.crBindings {
		i := slices.IndexFunc(o.clusterRoles, func(r rbacv1.ClusterRole) bool { return r.Name == b.RoleRef.Name })
		if b.RoleRef.Kind != "ClusterRole" || i < 0 {
			return nil, fmt.Errorf("ClusterRoleBinding %s: %s %s is not in the file", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		}
		add("*", b.Subjects, o.clusterRoles[i].Rules)
	}
	for _, b := range o.roleBindings {
		i := slices.IndexFunc(o.roles, func(r rbacv1.Role) bool { return r.Name == b.RoleRef.Name && r.Namespace == b.Namespace })
		if b.RoleRef.Kind != "Role" || i < 0 {
			return nil, fmt.Errorf("RoleBinding %s/%s: %s %s is not in the file", b.Namespace, b.Name, b.RoleRef.Kind, b.RoleRef.Name)
		}
		add(b.Namespace, b.Subjects, o.roles[i].Rules)
	}
	slices.Sort(out)
	return out, nil
}

// wantGrants is everything the plugins use, and only that: internal/kube's
// watches list and watch (no get), kube.HolderLease gets, creates and
// updates.
func wantGrants(ingressNS string) []string {
	u := "User:" + rbacUser
	out := []string{
		u + " * /nodes/* list []",
		u + " * /nodes/* watch []",
		u + " default discovery.k8s.io/endpointslices/* list []",
		u + " default discovery.k8s.io/endpointslices/* watch []",
		u + " " + ingressNS + " discovery.k8s.io/endpointslices/* list []",
		u + " " + ingressNS + " discovery.k8s.io/endpointslices/* watch []",
		u + " " + statusLeaseNS + " coordination.k8s.io/leases/* create []",
		u + " " + statusLeaseNS + " coordination.k8s.io/leases/* get []",
		u + " " + statusLeaseNS + " coordination.k8s.io/leases/* update []",
	}
	slices.Sort(out)
	return out
}

// TestRBAC decodes deploy/rbac.yaml strictly and checks that the user it
// binds gets exactly what the plugins' watches and the status Lease need:
// nothing in kube-system, EndpointSlices in two namespaces only, Leases only
// in a namespace of their own, which the file creates. The real apiserver
// checks the same file in test/e2e (TestRBACAgainstKubeAPIServer).
func TestRBAC(t *testing.T) {
	b, err := os.ReadFile("rbac.yaml")
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
	if want := wantGrants(ingressNSInFile); !slices.Equal(got, want) {
		t.Errorf("grants:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(o.namespaces) != 1 || o.namespaces[0].Name != statusLeaseNS {
		t.Errorf("namespaces %v: want the status Leases' own, %q", o.namespaces, statusLeaseNS)
	}
	for _, r := range o.clusterRoles {
		if r.AggregationRule != nil {
			t.Errorf("ClusterRole %s aggregates: its rules are not in the file", r.Name)
		}
	}
	for _, r := range o.roles {
		if r.Namespace == metav1.NamespaceSystem {
			t.Errorf("Role %s in kube-system", r.Name)
		}
	}
	var objs []metav1.Object
	objs = appendObjects(objs, o.namespaces)
	objs = appendObjects(objs, o.clusterRoles)
	objs = appendObjects(objs, o.crBindings)
	objs = appendObjects(objs, o.roles)
	objs = appendObjects(objs, o.roleBindings)
	for _, m := range objs {
		if m.GetLabels()["app.kubernetes.io/name"] != "infradns" {
			t.Errorf("%s/%s: no app.kubernetes.io/name=infradns label", m.GetNamespace(), m.GetName())
		}
	}
}

// appendObjects adds the objects of list (a slice of API structs) as
// metav1.Object.
func appendObjects[T any, PT interface {
	*T
	metav1.Object
}](out []metav1.Object, list []T) []metav1.Object {
	for i := range list {
		out = append(out, PT(&list[i]))
	}
	return out
}

// TestRBACIngressNamespace checks the recipe rbac.yaml gives for another
// ingress service: replacing "namespace: openshift-ingress" at the end of a
// line moves the ingress EndpointSlices grant, and only it.
func TestRBACIngressNamespace(t *testing.T) {
	b, err := os.ReadFile("rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)namespace: ` + regexp.QuoteMeta(ingressNSInFile) + `$`)
	if n := len(re.FindAll(b, -1)); n != 2 {
		t.Fatalf("%d lines end with %q: want 2, the ingress Role and RoleBinding", n, "namespace: "+ingressNSInFile)
	}
	o, err := decodeRBAC(re.ReplaceAllString(string(b), "namespace: ingress-nginx"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := o.grants()
	if err != nil {
		t.Fatal(err)
	}
	if want := wantGrants("ingress-nginx"); !slices.Equal(got, want) {
		t.Errorf("grants after the edit:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
