package deploy

import (
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The identities rbac.yaml binds (lbconfig on control-plane nodes and on
// workers, the DNS pod) and the namespace of the status Leases.
const (
	rbacUser        = "infradns"
	rbacWorkerUser  = "infradns-worker"
	rbacDNSUser     = "infradns-dns"
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
	policies     []admissionv1.ValidatingAdmissionPolicy
	policyBinds  []admissionv1.ValidatingAdmissionPolicyBinding
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
		case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy":
			o.policies, err = appendStrict(o.policies, doc)
		case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding":
			o.policyBinds, err = appendStrict(o.policyBinds, doc)
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
// updates. lbconfig (control plane and workers alike: a worker's
// narrower reach is the admission policy's) gets it all, the DNS pod the
// Nodes alone.
func wantGrants(ingressNS string) []string {
	var out []string
	for _, u := range []string{rbacUser, rbacWorkerUser, rbacDNSUser} {
		u := "User:" + u
		out = append(out, u+" * /nodes/* list []", u+" * /nodes/* watch []", u+" * /services/* list []", u+" * /services/* watch []")
	}
	for _, u := range []string{rbacUser, rbacWorkerUser} {
		u := "User:" + u
		out = append(out,
			u+" default discovery.k8s.io/endpointslices/* list []",
			u+" default discovery.k8s.io/endpointslices/* watch []",
			u+" "+ingressNS+" discovery.k8s.io/endpointslices/* list []",
			u+" "+ingressNS+" discovery.k8s.io/endpointslices/* watch []",
			u+" "+statusLeaseNS+" coordination.k8s.io/leases/* create []",
			u+" "+statusLeaseNS+" coordination.k8s.io/leases/* get []",
			u+" "+statusLeaseNS+" coordination.k8s.io/leases/* update []",
		)
	}
	u := "User:" + rbacUser
	out = append(out,
		u+" * /services/status/* patch []",
		u+" * /events/* create []",
		u+" "+statusLeaseNS+" /configmaps/* list []",
		u+" "+statusLeaseNS+" /configmaps/* watch []",
	)
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
	objs = appendObjects(objs, o.policies)
	objs = appendObjects(objs, o.policyBinds)
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

// TestRBACWorkerPolicy checks the admission policy that keeps a worker's
// lbconfig off the API VIP's status Leases: bound with Deny, failing
// closed, matching creates and updates of Leases in the status Leases'
// namespace by the worker's user alone, and naming the API VIP's Leases by
// the suffix lbconfig gives them (cluster.StatusLeaseName), and no
// ingress VIP's. The real apiserver evaluates it in test/e2e
// (TestRBACAgainstKubeAPIServer).
func TestRBACWorkerPolicy(t *testing.T) {
	b, err := os.ReadFile("rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o, err := decodeRBAC(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if len(o.policies) != 1 || len(o.policyBinds) != 1 {
		t.Fatalf("%d policies and %d bindings: want one each", len(o.policies), len(o.policyBinds))
	}
	p, pb := o.policies[0], o.policyBinds[0]
	if pb.Spec.PolicyName != p.Name || !slices.Equal(pb.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) || pb.Spec.ParamRef != nil {
		t.Errorf("binding %s: policy %q, actions %v, params %v: want %q, [Deny], none", pb.Name, pb.Spec.PolicyName, pb.Spec.ValidationActions, pb.Spec.ParamRef, p.Name)
	}
	if fp := p.Spec.FailurePolicy; fp == nil || *fp != admissionv1.Fail {
		t.Errorf("failurePolicy %v: want Fail", fp)
	}
	mc := p.Spec.MatchConstraints
	if mc == nil || mc.NamespaceSelector == nil || !reflect.DeepEqual(mc.NamespaceSelector.MatchLabels, map[string]string{"kubernetes.io/metadata.name": statusLeaseNS}) || len(mc.NamespaceSelector.MatchExpressions) > 0 {
		t.Fatalf("matchConstraints %+v: want the namespace %s alone", mc, statusLeaseNS)
	}
	if len(mc.ResourceRules) != 1 {
		t.Fatalf("resourceRules %+v: want one", mc.ResourceRules)
	}
	r := mc.ResourceRules[0]
	ops := slices.Clone(r.Operations)
	slices.Sort(ops)
	if !slices.Equal(r.APIGroups, []string{"coordination.k8s.io"}) || !slices.Equal(r.Resources, []string{"leases"}) ||
		!slices.Equal(ops, []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}) {
		t.Errorf("resource rule %+v: want CREATE and UPDATE of coordination.k8s.io leases", r)
	}
	if len(p.Spec.MatchConditions) != 1 || p.Spec.MatchConditions[0].Expression != "request.userInfo.username == '"+rbacWorkerUser+"'" {
		t.Errorf("matchConditions %+v: want the user %s alone", p.Spec.MatchConditions, rbacWorkerUser)
	}
	if len(p.Spec.Validations) != 2 {
		t.Fatalf("validations %+v: want two (the API VIP's status Leases, lbpools' Lease)", p.Spec.Validations)
	}
	for _, v := range p.Spec.Validations {
		if v.Reason == nil || *v.Reason != metav1.StatusReasonForbidden {
			t.Errorf("%s: reason %v: want Forbidden (403)", v.Expression, v.Reason)
		}
	}
	if got, want := p.Spec.Validations[1].Expression, "object.metadata.name != '"+kube.AllocatorLease+"'"; got != want {
		t.Errorf("second validation %q, want %q (lbpools' default Lease)", got, want)
	}
	v := p.Spec.Validations[0]
	// The expression's suffixes, read back, against lbconfig's names.
	var suffixes []string
	for _, m := range regexp.MustCompile(`endsWith\('([^']*)'\)`).FindAllStringSubmatch(v.Expression, -1) {
		suffixes = append(suffixes, m[1])
	}
	denied := func(name string) bool {
		return slices.ContainsFunc(suffixes, func(s string) bool { return strings.HasSuffix(name, s) })
	}
	for _, tc := range []struct {
		group, vip string
		denied     bool
	}{
		{"api", "192.0.2.5", true}, {"api", "2001:db8::5", true},
		{"ingress", "192.0.2.10", false}, {"ingress", "2001:db8::10", false},
		{"ingress-2", "192.0.2.11", false}, {"ingress-3", "2001:db8::12", false},
	} {
		for _, name := range []string{"ocp4", "api", "my-api"} {
			lease := cluster.StatusLeaseName(name, tc.group, netip.MustParseAddr(tc.vip))
			if denied(lease) != tc.denied {
				t.Errorf("lease %s: denied to workers %v, want %v (suffixes %q)", lease, denied(lease), tc.denied, suffixes)
			}
		}
	}
}
