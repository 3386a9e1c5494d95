//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kubetest"
	"github.com/infradns/infradns/test/e2e/lab"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// rbacStatusLeaseNS is where deploy/rbac.yaml lets nodes write status Leases.
const rbacStatusLeaseNS = "infradns"

// TestRBACAgainstKubeAPIServer applies deploy/rbac.yaml as written (each
// document decoded strictly and created) to a real kube-apiserver running
// --authorization-mode=RBAC, then acts as each user it binds with a client
// certificate (no group), as `kubeadm kubeconfig user --client-name NAME`
// gives them. infradns, a control-plane node's lbconfig, can do what
// lbconfig and mdnsnodes do, through their own code (internal/kube's
// watches and HolderLease over a kubeconfig), and nothing around it: no
// other namespace's EndpointSlices, no Lease in kube-system (the control
// plane's leader election), no write to Nodes. infradns-worker, a worker's
// lbconfig, can do the same except write the API VIP's status Leases (the
// file's admission policy); infradns-dns, the DNS pod, can only list and
// watch Nodes.
func TestRBACAgainstKubeAPIServer(t *testing.T) {
	dir := t.TempDir()
	caFile, certs := clientCertificates(t, dir, "infradns", "infradns-worker", "infradns-dns")
	certPEM, keyPEM := certs["infradns"][0], certs["infradns"][1]
	c := kubetest.StartWith(t, kubetest.Options{ExtraAPIServerArgs: []string{"--client-ca-file=" + caFile}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := c.Client
	ingressNS, ingressSvc := kube.DefaultIngressNamespace, kube.DefaultIngressService

	// The cluster lbconfig follows, other namespaces' slices, and the
	// control plane's leader election Leases a node must not touch.
	for _, ns := range []string{ingressNS, "apps"} {
		setupStep(t, "namespace "+ns, func() error {
			_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		})
	}
	worker := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.20"}}}}
	for _, n := range []*corev1.Node{controlPlaneNode("master-0", "198.51.100.10"), worker} {
		setupStep(t, "node "+n.Name, func() error {
			_, err := admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
			return err
		})
	}
	slicesIn := map[string]*discoveryv1.EndpointSlice{
		"default":     apiServerSlice("kubernetes", 6443, "198.51.100.10"),
		ingressNS:     serviceSlice(ingressNS, ingressSvc, 80, "198.51.100.20", "worker-0"),
		"kube-system": serviceSlice("kube-system", "kube-dns", 53, "10.0.0.10", "master-0"),
		"apps":        serviceSlice("apps", "shop", 8080, "10.0.0.20", "worker-0"),
	}
	for ns, s := range slicesIn {
		setupStep(t, "endpointslice in "+ns, func() error {
			_, err := admin.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, metav1.CreateOptions{})
			return err
		})
	}
	// A Service of type LoadBalancer with its address, as MetalLB (or
	// infradns) writes it: what lbservices names.
	setupStep(t, "service apps/shop", func() error {
		svc, err := admin.CoreV1().Services("apps").Create(ctx, lbsService("shop", nil), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.80"}}
		_, err = admin.CoreV1().Services("apps").UpdateStatus(ctx, svc, metav1.UpdateOptions{})
		return err
	})
	foreign := []string{"kube-controller-manager", "kube-scheduler"}
	for _, name := range foreign {
		setupStep(t, "lease kube-system/"+name, func() error {
			_, err := admin.CoordinationV1().Leases("kube-system").Create(ctx, holderLease(name, "master-0_"+name), metav1.CreateOptions{})
			return err
		})
	}

	applyRBAC(t, ctx, admin, lab.Path(t, "deploy/rbac.yaml"))
	rbacSynced(t, ctx, admin)

	// The node's view: a kubeconfig with the client certificate, read by
	// the plugins' own loader, and a clientset for what they never do.
	kubeconfig := filepath.Join(dir, "infradns.kubeconfig")
	writeCertKubeconfig(t, kubeconfig, c.URL, certPEM, keyPEM)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	as, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kube.FromKubeconfig(kubeconfig, "infradns-lbconfig")
	if err != nil {
		t.Fatal(err)
	}

	// The certificate is the user rbac.yaml binds, not anonymous.
	setupStep(t, "SelfSubjectReview", func() error {
		r, err := as.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if u := r.Status.UserInfo.Username; u != "infradns" {
			return fmt.Errorf("authenticated as %q %v", u, r.Status.UserInfo.Groups)
		}
		t.Logf("authenticated as %q, groups %v", r.Status.UserInfo.Username, r.Status.UserInfo.Groups)
		return nil
	})

	// Allowed: each check must succeed (rbacSynced made sure the
	// authorizer has every object of the file; a short retry covers a
	// request racing it all the same).
	allowed := func(what string, f func() error) {
		t.Helper()
		if err := lab.Poll(ctx, 5*time.Second, 50*time.Millisecond, f); err != nil {
			t.Errorf("allowed: %s: %v", what, err)
			return
		}
		t.Logf("allowed: %s", what)
	}
	allowed("list Nodes", func() error {
		l, err := as.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		return listedNames(l.Items, "master-0", "worker-0")
	})
	allowed("watch Nodes, see a new one", func() error {
		l, err := as.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		w, err := as.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
		if err != nil {
			return err
		}
		defer w.Stop()
		name := fmt.Sprintf("worker-%d", len(l.Items))
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("admin: %w", err)
		}
		return waitEvent(w, watch.Added, name)
	})
	for ns, svc := range map[string]string{"default": "kubernetes", ingressNS: ingressSvc} {
		sel := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc}
		allowed("list EndpointSlices in "+ns, func() error {
			l, err := as.DiscoveryV1().EndpointSlices(ns).List(ctx, sel)
			if err != nil {
				return err
			}
			return listedNames(l.Items, slicesIn[ns].Name)
		})
		allowed("watch EndpointSlices in "+ns, func() error {
			w, err := as.DiscoveryV1().EndpointSlices(ns).Watch(ctx, sel)
			if err != nil {
				return err
			}
			w.Stop()
			return nil
		})
	}

	// lbconfig's and mdnsnodes' watches, through internal/kube as the
	// plugins run them: they never sync without list and watch on all of it.
	allowed("lbconfig's watches sync and see the cluster", func() error {
		return lbconfigSees(ctx, client)
	})
	allowed("mdnsnodes' watch (Nodes only) syncs", func() error {
		return mdnsnodesSees(ctx, client, "master-0")
	})

	// The status Leases, written as plugin/lbconfig/status.go writes them:
	// created by the first holder, updated by the next (a transition).
	hl := kube.HolderLease{Client: client, Namespace: rbacStatusLeaseNS, Duration: 30 * time.Second, Timeout: 10 * time.Second}
	since := time.Now()
	for _, step := range []struct{ lease, holder string }{
		{"ocp4-api-vip-v4", "master-0"},
		{"ocp4-api-vip-v4", "master-1"},
		{"ocp4-ingress-2-vip-v6", "worker-0"},
	} {
		allowed(fmt.Sprintf("status Lease %s/%s held by %s", rbacStatusLeaseNS, step.lease, step.holder), func() error {
			return hl.Renew(ctx, step.lease, step.holder, since)
		})
	}
	if err := func() error {
		for name, want := range map[string]string{"ocp4-api-vip-v4": "master-1 1", "ocp4-ingress-2-vip-v6": "worker-0 0"} {
			l, err := admin.CoordinationV1().Leases(rbacStatusLeaseNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := fmt.Sprintf("%s %d", derefOr(l.Spec.HolderIdentity), derefOr(l.Spec.LeaseTransitions)); got != want {
				return fmt.Errorf("%s: holder and transitions %q, want %q", name, got, want)
			}
		}
		return nil
	}(); err != nil {
		t.Errorf("the status Leases as written: %v", err)
	}

	// lbpools (control-plane nodes): a Service's status, an event, the
	// pools' ConfigMaps, its Lease.
	allowed("lbpools: write the addresses of Service apps/shop", func() error {
		svc, err := admin.CoreV1().Services("apps").Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return client.PatchServiceStatus(ctx, "apps", "shop", kube.StatusPatch(svc.ResourceVersion, []netip.Addr{netip.MustParseAddr("192.0.2.80")}))
	})
	allowed("lbpools: an event on Service apps/shop", func() error {
		return client.CreateEvent(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "shop.rbac", Namespace: "apps"},
			InvolvedObject: corev1.ObjectReference{Kind: "Service", Namespace: "apps", Name: "shop"},
			Reason:         "IPAllocated", Message: "Assigned IP 192.0.2.80", Type: corev1.EventTypeNormal,
		})
	})
	allowed("lbpools: list the ConfigMaps of "+rbacStatusLeaseNS, func() error {
		_, err := as.CoreV1().ConfigMaps(rbacStatusLeaseNS).List(ctx, metav1.ListOptions{})
		return err
	})
	allowed("lbpools: hold its Lease", func() error {
		return hl.Renew(ctx, kube.AllocatorLease, "master-0", since)
	})

	// Denied, each with 403 Forbidden (not merely failing).
	forbidden := func(what string, f func() error) {
		t.Helper()
		err := f()
		if !apierrors.IsForbidden(err) {
			t.Errorf("forbidden: %s: got %v, want 403 Forbidden", what, err)
			return
		}
		t.Logf("403 as it should: %s", what)
	}
	for _, ns := range []string{"kube-system", "apps", ""} {
		forbidden(fmt.Sprintf("list EndpointSlices in namespace %q", ns), func() error {
			_, err := as.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
			return err
		})
		forbidden(fmt.Sprintf("watch EndpointSlices in namespace %q", ns), func() error {
			w, err := as.DiscoveryV1().EndpointSlices(ns).Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		})
	}
	forbidden("create an EndpointSlice in default", func() error {
		s := apiServerSlice("kubernetes-rogue", 6443, "203.0.113.66")
		_, err := as.DiscoveryV1().EndpointSlices("default").Create(ctx, s, metav1.CreateOptions{})
		return err
	})
	for _, name := range foreign {
		forbidden("get Lease kube-system/"+name, func() error {
			_, err := as.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
			return err
		})
		forbidden("update Lease kube-system/"+name, func() error {
			l, err := admin.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("admin: %w", err)
			}
			l.Spec.HolderIdentity = strPtr("worker-0")
			_, err = as.CoordinationV1().Leases("kube-system").Update(ctx, l, metav1.UpdateOptions{})
			return err
		})
		forbidden("update Lease kube-system/"+name+" through HolderLease", func() error {
			return errors.Unwrap(kube.HolderLease{Client: client, Namespace: "kube-system", Duration: time.Minute, Timeout: 10 * time.Second}.Renew(ctx, name, "worker-0", since))
		})
		forbidden("delete Lease kube-system/"+name, func() error {
			return as.CoordinationV1().Leases("kube-system").Delete(ctx, name, metav1.DeleteOptions{})
		})
	}
	forbidden("create a Lease in kube-system", func() error {
		_, err := as.CoordinationV1().Leases("kube-system").Create(ctx, holderLease("kube-controller-manager-2", "worker-0"), metav1.CreateOptions{})
		return err
	})
	forbidden("create a Lease in default", func() error {
		_, err := as.CoordinationV1().Leases("default").Create(ctx, holderLease("ocp4-api-vip-v4", "worker-0"), metav1.CreateOptions{})
		return err
	})
	forbidden("list Leases in "+rbacStatusLeaseNS, func() error {
		_, err := as.CoordinationV1().Leases(rbacStatusLeaseNS).List(ctx, metav1.ListOptions{})
		return err
	})
	forbidden("patch a Lease in "+rbacStatusLeaseNS, func() error {
		_, err := as.CoordinationV1().Leases(rbacStatusLeaseNS).Patch(ctx, "ocp4-api-vip-v4", types.MergePatchType,
			[]byte(`{"spec":{"holderIdentity":"worker-0"}}`), metav1.PatchOptions{})
		return err
	})
	forbidden("delete a Lease in "+rbacStatusLeaseNS, func() error {
		return as.CoordinationV1().Leases(rbacStatusLeaseNS).Delete(ctx, "ocp4-api-vip-v4", metav1.DeleteOptions{})
	})
	forbidden("get one Node (the plugins list and watch)", func() error {
		_, err := as.CoreV1().Nodes().Get(ctx, "master-0", metav1.GetOptions{})
		return err
	})
	forbidden("patch a Node", func() error {
		_, err := as.CoreV1().Nodes().Patch(ctx, "master-0", types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":null}}}`), metav1.PatchOptions{})
		return err
	})
	forbidden("list Secrets in "+rbacStatusLeaseNS, func() error {
		_, err := as.CoreV1().Secrets(rbacStatusLeaseNS).List(ctx, metav1.ListOptions{})
		return err
	})
	forbidden("list ConfigMaps in kube-system", func() error {
		_, err := as.CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{})
		return err
	})
	forbidden("patch a Service's spec (lbpools writes status only)", func() error {
		_, err := as.CoreV1().Services("apps").Patch(ctx, "shop", types.MergePatchType, []byte(`{"spec":{"externalIPs":["203.0.113.9"]}}`), metav1.PatchOptions{})
		return err
	})

	// The control plane's Leases are as the admin left them.
	for _, name := range foreign {
		l, err := admin.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("admin: lease kube-system/%s: %v", name, err)
		} else if h := derefOr(l.Spec.HolderIdentity); h != "master-0_"+name {
			t.Errorf("lease kube-system/%s: holder %q, want master-0_%s", name, h, name)
		}
	}

	workerIdentity(t, ctx, c, dir, certs["infradns-worker"], client)
	dnsIdentity(t, ctx, c, dir, certs["infradns-dns"])

	// deploy/lb-services.yaml (lbPools in BGP mode): lbconfig's services
	// option reads the EndpointSlices of every namespace. Without it the
	// watch never lists; with it both lbconfig identities see the
	// Services to announce, and the DNS pod's still sees no slice.
	workerClient, _ := identity(t, ctx, c, dir, "infradns-worker", certs["infradns-worker"])
	if err := lbAnnounceSees(ctx, client, "apps/shop"); err == nil {
		t.Error("infradns: the Services to announce listed before deploy/lb-services.yaml")
	}
	applyRBAC(t, ctx, admin, lab.Path(t, "deploy/lb-services.yaml"))
	for user, cl := range map[string]kube.Client{"infradns": client, "infradns-worker": workerClient} {
		// The grant is what is checked: wait for the authorizer to have it.
		lab.Eventually(t, 10*time.Second, 20*time.Millisecond, "the RBAC authorizer sees deploy/lb-services.yaml for "+user, func() error {
			r, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: "watch", Group: "discovery.k8s.io", Resource: "endpointslices"}}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			if !r.Status.Allowed {
				return errors.New("not allowed yet")
			}
			return nil
		})
		if err := lbAnnounceSees(ctx, cl, "apps/shop"); err != nil {
			t.Errorf("%s with deploy/lb-services.yaml: %v", user, err)
		}
	}
	_, dnsAs := identity(t, ctx, c, dir, "infradns-dns", certs["infradns-dns"])
	forbidden("infradns-dns with deploy/lb-services.yaml: list EndpointSlices in apps", func() error {
		_, err := dnsAs.DiscoveryV1().EndpointSlices("apps").List(ctx, metav1.ListOptions{})
		return err
	})
}

// lbAnnounceSees runs lbconfig's Services watch (kube.AnnounceWatcher,
// Services with no class included) until its first list, at most 5 s, and
// looks for key in it.
func lbAnnounceSees(ctx context.Context, client kube.Client, key string) error {
	w := kube.NewAnnounceWatcher(client, kube.AnnounceOptions{Class: cluster.LoadBalancerClass, Default: true})
	svcs, ok := firstCall(ctx, func(ctx context.Context, h func([]cluster.LBService)) { w.Run(ctx, h) })
	if !ok {
		return errors.New("no list of the Services to announce within 5 s (forbidden?)")
	}
	if !slices.ContainsFunc(svcs, func(s cluster.LBService) bool { return s.Key() == key }) {
		return fmt.Errorf("Services %v: no %s", svcs, key)
	}
	return nil
}

// firstCall runs a watcher (its Run) until it first calls its handler, at
// most 5 s, and returns what it was given.
func firstCall[T any](ctx context.Context, run func(context.Context, func(T))) (T, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	got := make(chan T, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		run(ctx, func(v T) {
			select {
			case got <- v:
			default:
			}
		})
	})
	defer wg.Wait()
	defer cancel()
	select {
	case v := <-got:
		return v, true
	case <-ctx.Done():
		var zero T
		return zero, false
	}
}

// identity is a node's view as user: the plugins' client and a clientset
// for what they never do, over a kubeconfig with the user's certificate,
// after checking the apiserver takes the certificate for that user.
func identity(t *testing.T, ctx context.Context, c *kubetest.Cluster, dir, user string, cert [2][]byte) (kube.Client, kubernetes.Interface) {
	t.Helper()
	kubeconfig := filepath.Join(dir, user+".kubeconfig")
	writeCertKubeconfig(t, kubeconfig, c.URL, cert[0], cert[1])
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	as, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kube.FromKubeconfig(kubeconfig, user)
	if err != nil {
		t.Fatal(err)
	}
	setupStep(t, "SelfSubjectReview as "+user, func() error {
		r, err := as.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if u := r.Status.UserInfo.Username; u != user {
			return fmt.Errorf("authenticated as %q %v, want %q", u, r.Status.UserInfo.Groups, user)
		}
		return nil
	})
	return client, as
}

// workerIdentity: a worker's lbconfig (infradns-worker) runs lbconfig's
// watches and holds ingress VIPs' status Leases, created and taken over,
// but the admission policy refuses it the API VIP's, created or updated,
// with 403 and the policy's message, and leaves the control plane's
// holder in place. cp is the control-plane identity's client (infradns),
// which still writes the API VIP's Lease once the policy is in force.
func workerIdentity(t *testing.T, ctx context.Context, c *kubetest.Cluster, dir string, cert [2][]byte, cp kube.Client) {
	t.Helper()
	admin := c.Client
	client, as := identity(t, ctx, c, dir, "infradns-worker", cert)
	hl := kube.HolderLease{Client: client, Namespace: rbacStatusLeaseNS, Duration: 30 * time.Second, Timeout: 10 * time.Second}
	since := time.Now()

	const newAPILease = "ocp4-api-vip-v6"
	denial := workerPolicyInForce(t, ctx, admin, as, newAPILease)
	if !apierrors.IsForbidden(denial) || !strings.Contains(denial.Error(), "never holds the API VIP") {
		t.Errorf("worker: create Lease %s: %v, want 403 Forbidden with the policy's message", newAPILease, denial)
	} else {
		t.Logf("403 as it should: worker creates %s: %v", newAPILease, denial)
	}

	allowed := func(what string, f func() error) {
		t.Helper()
		if err := lab.Poll(ctx, 5*time.Second, 50*time.Millisecond, f); err != nil {
			t.Errorf("worker allowed: %s: %v", what, err)
			return
		}
		t.Logf("worker allowed: %s", what)
	}
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("worker forbidden: %s: got %v, want 403 Forbidden", what, err)
			return
		}
		t.Logf("worker 403 as it should: %s", what)
	}
	allowed("lbconfig's watches sync and see the cluster", func() error {
		return lbconfigSees(ctx, client)
	})
	// Ingress VIPs: a new Lease, renewed, and one the control plane held.
	for _, step := range []struct{ lease, holder string }{
		{"ocp4-ingress-vip-v4", "worker-0"},
		{"ocp4-ingress-vip-v4", "worker-0"},
		{"ocp4-ingress-2-vip-v6", "worker-1"},
	} {
		allowed(fmt.Sprintf("status Lease %s held by %s", step.lease, step.holder), func() error {
			return hl.Renew(ctx, step.lease, step.holder, since)
		})
	}
	// The API VIP's: the Lease the control plane holds, through lbconfig's
	// own renewal and as a plain update, and a new one.
	forbidden("take over ocp4-api-vip-v4 through HolderLease", errors.Unwrap(hl.Renew(ctx, "ocp4-api-vip-v4", "worker-0", since)))
	forbidden("update ocp4-api-vip-v4", func() error {
		l, err := admin.CoordinationV1().Leases(rbacStatusLeaseNS).Get(ctx, "ocp4-api-vip-v4", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("admin: %w", err)
		}
		l.Spec.HolderIdentity = strPtr("worker-0")
		_, err = as.CoordinationV1().Leases(rbacStatusLeaseNS).Update(ctx, l, metav1.UpdateOptions{})
		return err
	}())
	forbidden("create "+newAPILease+" through HolderLease", errors.Unwrap(hl.Renew(ctx, newAPILease, "worker-0", since)))
	forbidden("delete ocp4-ingress-vip-v4", as.CoordinationV1().Leases(rbacStatusLeaseNS).Delete(ctx, "ocp4-ingress-vip-v4", metav1.DeleteOptions{}))
	forbidden("list EndpointSlices in kube-system", func() error {
		_, err := as.DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{})
		return err
	}())
	// Workers never allocate: no Service status, and not lbpools' Lease
	// (the admission policy, as for the API VIP's).
	forbidden("write a Service's load-balancer addresses", client.PatchServiceStatus(ctx, "apps", "shop", []byte(`{"status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.9"}]}}}`)))
	if err := errors.Unwrap(hl.Renew(ctx, kube.AllocatorLease, "worker-0", since)); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "never allocates") {
		t.Errorf("worker: take over lease %s: %v, want 403 Forbidden with the policy's message", kube.AllocatorLease, err)
	} else {
		t.Logf("worker 403 as it should: take over %s: %v", kube.AllocatorLease, err)
	}

	// The control plane's identity is not the worker's: the policy leaves
	// it the API VIP's Leases.
	cpl := kube.HolderLease{Client: cp, Namespace: rbacStatusLeaseNS, Duration: 30 * time.Second, Timeout: 10 * time.Second}
	if err := cpl.Renew(ctx, newAPILease, "master-0", since); err != nil {
		t.Errorf("control plane: create %s with the policy in force: %v", newAPILease, err)
	}
	for name, want := range map[string]string{"ocp4-api-vip-v4": "master-1", newAPILease: "master-0", "ocp4-ingress-2-vip-v6": "worker-1", "ocp4-ingress-vip-v4": "worker-0"} {
		l, err := admin.CoordinationV1().Leases(rbacStatusLeaseNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("admin: lease %s: %v", name, err)
		} else if h := derefOr(l.Spec.HolderIdentity); h != want {
			t.Errorf("lease %s: holder %q, want %q", name, h, want)
		}
	}
}

// workerPolicyInForce waits until deploy/rbac.yaml's admission policy
// refuses worker (a clientset as infradns-worker) the creation of the
// API VIP's status Lease named lease, and returns the refusal. The policy
// reaches the apiserver's admission through an informer: until it is in
// force a create goes through, so the admin undoes it and it is asked
// again. Bounded: a policy never enforced fails the test.
func workerPolicyInForce(t *testing.T, ctx context.Context, admin, worker kubernetes.Interface, lease string) error {
	t.Helper()
	var denial error
	lab.Eventually(t, 20*time.Second, 100*time.Millisecond, "the worker policy refuses a worker the API VIP's Lease", func() error {
		_, err := worker.CoordinationV1().Leases(rbacStatusLeaseNS).Create(ctx, holderLease(lease, "worker-0"), metav1.CreateOptions{})
		if err == nil {
			if err := admin.CoordinationV1().Leases(rbacStatusLeaseNS).Delete(ctx, lease, metav1.DeleteOptions{}); err != nil {
				return fmt.Errorf("admin: undo the early create: %w", err)
			}
			return errors.New("created: the policy is not in force yet")
		}
		denial = err
		return nil
	})
	return denial
}

// dnsIdentity: the DNS pod's identity (infradns-dns) runs mdnsnodes' watch
// of the Nodes and can do nothing else: no EndpointSlices, no Lease read
// or written, no Node written.
func dnsIdentity(t *testing.T, ctx context.Context, c *kubetest.Cluster, dir string, cert [2][]byte) {
	t.Helper()
	client, as := identity(t, ctx, c, dir, "infradns-dns", cert)
	if err := lab.Poll(ctx, 5*time.Second, 50*time.Millisecond, func() error {
		return mdnsnodesSees(ctx, client, "worker-0")
	}); err != nil {
		t.Errorf("dns allowed: mdnsnodes' watch (Nodes only) syncs: %v", err)
	} else {
		t.Log("dns allowed: mdnsnodes' watch (Nodes only) syncs")
	}
	if err := lab.Poll(ctx, 5*time.Second, 50*time.Millisecond, func() error {
		return lbservicesSees(ctx, client, "apps/shop")
	}); err != nil {
		t.Errorf("dns allowed: lbservices' watch (Services) syncs: %v", err)
	} else {
		t.Log("dns allowed: lbservices' watch (Services) syncs")
	}
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("dns forbidden: %s: got %v, want 403 Forbidden", what, err)
			return
		}
		t.Logf("dns 403 as it should: %s", what)
	}
	for _, ns := range []string{"default", kube.DefaultIngressNamespace} {
		forbidden("list EndpointSlices in "+ns, func() error {
			_, err := as.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
			return err
		}())
	}
	hl := kube.HolderLease{Client: client, Namespace: rbacStatusLeaseNS, Duration: 30 * time.Second, Timeout: 10 * time.Second}
	forbidden("renew the ingress VIP's Lease through HolderLease", errors.Unwrap(hl.Renew(ctx, "ocp4-ingress-vip-v4", "master-0", time.Now())))
	forbidden("create a Lease in "+rbacStatusLeaseNS, func() error {
		_, err := as.CoordinationV1().Leases(rbacStatusLeaseNS).Create(ctx, holderLease("ocp4-ingress-3-vip-v4", "master-0"), metav1.CreateOptions{})
		return err
	}())
	forbidden("get a Lease in "+rbacStatusLeaseNS, func() error {
		_, err := as.CoordinationV1().Leases(rbacStatusLeaseNS).Get(ctx, "ocp4-api-vip-v4", metav1.GetOptions{})
		return err
	}())
	forbidden("patch a Node", func() error {
		_, err := as.CoreV1().Nodes().Patch(ctx, "worker-0", types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"node.kubernetes.io/exclude-from-external-load-balancers":""}}}`), metav1.PatchOptions{})
		return err
	}())
}

// applyRBAC creates every object of the rbac.yaml at path, in file order,
// each document decoded strictly as its kind.
func applyRBAC(t *testing.T, ctx context.Context, cs kubernetes.Interface, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, doc := range strings.Split(string(b), "\n---\n") {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("%s document %d: %v", path, i+1, err)
		}
		var name string
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 Namespace":
			name, err = createDoc(ctx, doc, func(o *corev1.Namespace) (metav1.Object, error) {
				return cs.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
			})
		case "rbac.authorization.k8s.io/v1 ClusterRole":
			name, err = createDoc(ctx, doc, func(o *rbacv1.ClusterRole) (metav1.Object, error) {
				return cs.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			})
		case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
			name, err = createDoc(ctx, doc, func(o *rbacv1.ClusterRoleBinding) (metav1.Object, error) {
				return cs.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			})
		case "rbac.authorization.k8s.io/v1 Role":
			name, err = createDoc(ctx, doc, func(o *rbacv1.Role) (metav1.Object, error) {
				return cs.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			})
		case "rbac.authorization.k8s.io/v1 RoleBinding":
			name, err = createDoc(ctx, doc, func(o *rbacv1.RoleBinding) (metav1.Object, error) {
				return cs.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			})
		case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy":
			name, err = createDoc(ctx, doc, func(o *admissionv1.ValidatingAdmissionPolicy) (metav1.Object, error) {
				return cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{})
			})
		case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding":
			name, err = createDoc(ctx, doc, func(o *admissionv1.ValidatingAdmissionPolicyBinding) (metav1.Object, error) {
				return cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{})
			})
		default:
			err = fmt.Errorf("unexpected %q %q", tm.APIVersion, tm.Kind)
		}
		if err != nil {
			t.Fatalf("%s document %d: %v", path, i+1, err)
		}
		t.Logf("applied %s %s", tm.Kind, name)
	}
}

// rbacSynced waits until the apiserver's RBAC authorizer, which follows
// Roles, RoleBindings, ClusterRoles and ClusterRoleBindings through one
// informer each, has seen everything applyRBAC created: it creates one more
// object of each kind, for a user of its own, and waits for a
// SubjectAccessReview to allow that user. Each informer delivers events in
// order, so a denial checked afterwards is never a grant still in flight.
func rbacSynced(t *testing.T, ctx context.Context, cs kubernetes.Interface) {
	t.Helper()
	const user, name = "rbac-sync-probe", "rbac-sync-probe"
	meta := metav1.ObjectMeta{Name: name}
	rule := func(resource string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{resource}, Verbs: []string{"get"}}}
	}
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	setupStep(t, "probe ClusterRole and ClusterRoleBinding", func() error {
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta, Rules: rule("configmaps")}, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}, metav1.CreateOptions{})
		return err
	})
	nsMeta := metav1.ObjectMeta{Name: name, Namespace: "default"}
	setupStep(t, "probe Role and RoleBinding", func() error {
		if _, err := cs.RbacV1().Roles("default").Create(ctx, &rbacv1.Role{ObjectMeta: nsMeta, Rules: rule("secrets")}, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := cs.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: nsMeta, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}, metav1.CreateOptions{})
		return err
	})
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Namespace: "apps", Verb: "get", Resource: "configmaps", Name: "x"}, // the ClusterRole, bound
		{Namespace: "default", Verb: "get", Resource: "secrets", Name: "x"}, // the Role, bound
	} {
		lab.Eventually(t, 10*time.Second, 20*time.Millisecond, "the RBAC authorizer sees the probe's grants", func() error {
			r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			if !r.Status.Allowed {
				return fmt.Errorf("%s %s in %s not allowed yet", attrs.Verb, attrs.Resource, attrs.Namespace)
			}
			return nil
		})
	}
}

func createDoc[T any](ctx context.Context, doc string, f func(*T) (metav1.Object, error)) (string, error) {
	var o T
	if err := yaml.UnmarshalStrict([]byte(doc), &o); err != nil {
		return "", err
	}
	m, err := f(&o)
	if err != nil {
		return "", err
	}
	if m.GetNamespace() != "" {
		return m.GetNamespace() + "/" + m.GetName(), nil
	}
	return m.GetName(), nil
}

// clientCertificate makes a CA (written to dir, for --client-ca-file) and a
// client certificate signed by it for user cn, returned as PEM.
func clientCertificate(t *testing.T, dir, cn string) (caFile string, certPEM, keyPEM []byte) {
	t.Helper()
	caFile, certs := clientCertificates(t, dir, cn)
	return caFile, certs[cn][0], certs[cn][1]
}

// clientCertificates makes a CA (written to dir, for --client-ca-file) and
// a client certificate signed by it for each user cn: certificate and key,
// as PEM.
func clientCertificates(t *testing.T, dir string, cns ...string) (caFile string, certs map[string][2][]byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "infradns-test-client-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(dir, "client-ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	certs = map[string][2][]byte{}
	for i, cn := range cns {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
			SerialNumber: big.NewInt(int64(2 + i)), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		certs[cn] = [2][]byte{pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})}
	}
	return caFile, certs
}

// writeCertKubeconfig writes a kubeconfig for server with a client
// certificate, as `kubeadm kubeconfig user` does.
func writeCertKubeconfig(t *testing.T, path, server string, certPEM, keyPEM []byte) {
	t.Helper()
	b64 := base64.StdEncoding.EncodeToString
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubetest
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: infradns
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: infradns
  context:
    cluster: kubetest
    user: infradns
current-context: infradns
`, server, b64(certPEM), b64(keyPEM))
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
}

// lbconfigSees runs lbconfig's watches as client until their first
// snapshot and checks it shows the test's cluster: both nodes, the one
// apiserver, worker-0 as the ingress node.
func lbconfigSees(ctx context.Context, client kube.Client) error {
	s, err := firstSnapshot(ctx, client, false)
	if err != nil {
		return err
	}
	if len(s.Nodes) < 2 || fmt.Sprint(s.APIServers) != "[198.51.100.10:6443]" || !slices.Equal(s.IngressNodes, []string{"worker-0"}) {
		return fmt.Errorf("snapshot %d nodes, apiservers %v, ingress nodes %v", len(s.Nodes), s.APIServers, s.IngressNodes)
	}
	return nil
}

// mdnsnodesSees runs mdnsnodes' watch (Nodes only) as client until its
// first snapshot and checks it holds node.
func mdnsnodesSees(ctx context.Context, client kube.Client, node string) error {
	s, err := firstSnapshot(ctx, client, true)
	if err != nil {
		return err
	}
	if _, ok := s.Node(node); !ok {
		return fmt.Errorf("snapshot without %s: %v", node, s.Nodes)
	}
	return nil
}

// lbservicesSees runs lbservices' watch of the Services until its first
// list, at most 5 s, and checks that it holds the Service key
// (namespace/name).
func lbservicesSees(ctx context.Context, client kube.Client, key string) error {
	w := kube.NewServiceWatcher(client, kube.ServiceOptions{})
	svcs, ok := firstCall(ctx, func(ctx context.Context, h func([]cluster.Service)) { w.Run(ctx, h) })
	if !ok {
		return errors.New("no Service list within 5 s (forbidden?)")
	}
	if !slices.ContainsFunc(svcs, func(s cluster.Service) bool { return s.Key() == key }) {
		return fmt.Errorf("Services %v: no %s", svcs, key)
	}
	return nil
}

// firstSnapshot runs internal/kube's watcher (lbconfig's, or mdnsnodes'
// with nodesOnly) until its first snapshot, at most 5 s.
func firstSnapshot(ctx context.Context, client kube.Client, nodesOnly bool) (cluster.Snapshot, error) {
	o := kube.NewOptions()
	o.NodesOnly = nodesOnly
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	got := make(chan cluster.Snapshot, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = kube.New(client, o).Run(ctx, func(_ context.Context, s cluster.Snapshot) error {
			select {
			case got <- s:
			default:
			}
			return nil
		})
	})
	defer wg.Wait()
	defer cancel()
	select {
	case s := <-got:
		return s, nil
	case <-ctx.Done():
		return cluster.Snapshot{}, errors.New("the watches never synced in 5 s (a list or watch denied?)")
	}
}

// serviceSlice is a ready EndpointSlice of service ns/svc: one endpoint on
// node.
func serviceSlice(ns, svc string, port int32, addr, node string) *discoveryv1.EndpointSlice {
	ready := true
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc + "-abcde", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: &port}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr}, NodeName: &node,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
}

func holderLease(name, holder string) *coordinationv1.Lease {
	secs := int32(15)
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs}}
}

func waitEvent(w watch.Interface, typ watch.EventType, name string) error {
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errors.New("watch closed")
			}
			if m, isObj := ev.Object.(metav1.Object); isObj && ev.Type == typ && m.GetName() == name {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("no %s event for %s in 5 s", typ, name)
		}
	}
}

func listedNames[T any, PT interface {
	*T
	metav1.Object
}](items []T, want ...string) error {
	var got []string
	for i := range items {
		got = append(got, PT(&items[i]).GetName())
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			return fmt.Errorf("listed %v, want %v among them", got, want)
		}
	}
	return nil
}

func setupStep(t *testing.T, what string, f func() error) {
	t.Helper()
	if err := f(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func derefOr[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func strPtr(s string) *string { return &s }
