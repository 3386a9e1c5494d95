package main

// `infradns identities`: the three Kubernetes identities of deploy/rbac.yaml
// made from a control-plane node (the RBAC applied, a certificate per user
// from the cluster's CA, the shared ones published as Secrets, this node's
// kubeconfigs written), and install's fetch of them (or of their renewal)
// on a node that has joined, which the identity units install puts on the
// node run after `kubeadm join` and daily.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/infradns/infradns/internal/atomicfile"
	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/identity"
	"github.com/infradns/infradns/internal/nodecfg"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The credentials a node may have: an administrator's on control-plane
// nodes (kubeadm's), kubelet's (system:node:NAME) on every joined node.
const (
	adminConf   = "/etc/kubernetes/admin.conf"
	kubeletConf = "/etc/kubernetes/kubelet.conf"
)

// Identity certificates: a year, renewed by a run within 30 days of the end.
const (
	identityLifetime = 365 * 24 * time.Hour
	identityRenew    = 30 * 24 * time.Hour
)

// sharedIdentity is one user and the Secret that holds its kubeconfig.
type sharedIdentity struct {
	user, secret string
	// role is the role whose server the published kubeconfig names
	// (each node rewrites it for its own anyway).
	role string
}

var sharedIdentities = []sharedIdentity{
	{identity.ControlPlaneUser, identity.ControlPlaneSecret, nodecfg.ControlPlane},
	{identity.WorkerUser, identity.WorkerSecret, nodecfg.Worker},
	{identity.DNSUser, identity.DNSSecret, nodecfg.Worker},
}

// identitiesOf are the identities a node of role uses: lbconfig's, then
// the DNS pod's.
func identitiesOf(role string) (lb, dns sharedIdentity, ok bool) {
	switch role {
	case nodecfg.ControlPlane:
		return sharedIdentities[0], sharedIdentities[2], true
	case nodecfg.Worker:
		return sharedIdentities[1], sharedIdentities[2], true
	}
	return sharedIdentity{}, sharedIdentity{}, false
}

// namespaces are the ingress service's namespace and the status namespace
// (where the identity Secrets live) of a node's values.
func namespaces(v nodecfg.Values) (ingress, status string) {
	ingress, _, _ = strings.Cut(cmp.Or(v.IngressService, cluster.DefaultIngressService), "/")
	return ingress, cmp.Or(v.StatusLease, nodecfg.DefaultStatusLeaseNamespace)
}

func identities(ctx context.Context, args []string, out io.Writer) error {
	fl := flags("identities", "-f CLUSTER.yaml [-node NAME] [-kubeconfig "+adminConf+"] [-root /] [-dry-run]")
	load := nodeFlags(fl, "control-plane: it runs on one")
	kubeconfig := fl.String("kubeconfig", adminConf, "an administrator's kubeconfig (may approve kube-apiserver-client requests)")
	root := fl.String("root", "/", "where this node's kubeconfigs are written (a staging tree for tests)")
	dry := fl.Bool("dry-run", false, "say what would be applied, issued and written; change nothing")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() != 0 {
		fl.Usage()
		return fmt.Errorf("identities: unexpected argument %q", fl.Arg(0))
	}
	f, err := load()
	if err != nil {
		return err
	}
	if f.Role == "" {
		f.Role = nodecfg.ControlPlane
	}
	if f.Role != nodecfg.ControlPlane {
		return fmt.Errorf("identities: runs on a control-plane node (it writes that node's kubeconfigs), not a %s", f.Role)
	}
	v, err := f.Values()
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("identities: %w", err)
	}
	cfg.Timeout = 10 * time.Second
	ca, err := caOf(cfg)
	if err != nil {
		return fmt.Errorf("identities: %s: %w", *kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// Right after kubeadm init the control-plane endpoint (the API VIP)
	// comes up a few seconds after the apiserver: wait for it, bounded.
	if err := waitAPI(ctx, cs, cfg.Host, 2*time.Minute, out); err != nil {
		return fmt.Errorf("identities: %w", err)
	}
	return makeIdentities(ctx, identityEnv{cs: cs, dyn: dyn, mapper: identity.Mapper(), ca: ca, now: time.Now()}, v, *root, *dry, out)
}

// waitAPI waits until the API answers (its version), saying so once.
func waitAPI(ctx context.Context, cs kubernetes.Interface, host string, bound time.Duration, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	said := false
	for {
		_, err := cs.Discovery().ServerVersion()
		if err == nil {
			return nil
		}
		if !said {
			fmt.Fprintf(out, "%-9s the API at %s: %v\n", "waiting", host, err)
			said = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the API at %s did not answer within %s: %w", host, bound, err)
		case <-time.After(time.Second):
		}
	}
}

// caOf is the cluster CA a kubeconfig trusts (embedded or a file).
func caOf(cfg *rest.Config) ([]byte, error) {
	if len(cfg.CAData) > 0 {
		return cfg.CAData, nil
	}
	if cfg.CAFile != "" {
		return os.ReadFile(cfg.CAFile)
	}
	return nil, errors.New("no certificate authority: the identities' kubeconfigs need the cluster's CA")
}

// identityEnv is what makeIdentities talks to, a fake in the tests.
type identityEnv struct {
	cs     kubernetes.Interface
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	ca     []byte // the cluster CA, PEM
	now    time.Time
}

// makeIdentities applies the RBAC (the ingress namespace created if
// missing), makes or renews each shared identity, and writes this
// control-plane node's kubeconfigs under root.
func makeIdentities(ctx context.Context, e identityEnv, v nodecfg.Values, root string, dry bool, out io.Writer) error {
	ingressNS, statusNS := namespaces(v)
	rbac, err := identity.RBAC(ingressNS, statusNS)
	if err != nil {
		return err
	}
	if dry {
		objs, err := identity.Objects(rbac)
		if err != nil {
			return err
		}
		for _, o := range objs {
			fmt.Fprintf(out, "%-9s %s %s\n", "would apply", o.GetKind(), strings.TrimPrefix(o.GetNamespace()+"/"+o.GetName(), "/"))
		}
	} else {
		if err := ensureNamespace(ctx, e.cs, ingressNS, out); err != nil {
			return err
		}
		done, err := identity.Apply(ctx, e.dyn, e.mapper, rbac)
		for _, d := range done {
			fmt.Fprintf(out, "%-9s %s\n", "applied", d)
		}
		if err != nil {
			return err
		}
	}
	kcs := map[string][]byte{}
	for _, id := range sharedIdentities {
		kc, err := ensureIdentity(ctx, e, v, statusNS, id, dry, out)
		if err != nil {
			return err
		}
		kcs[id.user] = kc
	}
	files, err := nodeKubeconfigs(v, kcs)
	if err != nil {
		return err
	}
	return writeKubeconfigs(root, files, dry, out)
}

// ensureNamespace creates namespace unless it exists (its RoleBinding
// needs it). Only the name: the namespace is the ingress controller's.
func ensureNamespace(ctx context.Context, cs kubernetes.Interface, name string, out io.Writer) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err != nil:
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	fmt.Fprintf(out, "%-9s Namespace %s\n", "created", name)
	return nil
}

// ensureIdentity returns id's published kubeconfig, issuing and
// publishing a new one when there is none, when it does not parse, when
// its CA is not the cluster's (a rebuilt control plane) or when its
// certificate expires within identityRenew. In a dry run it only says so
// (and returns the current kubeconfig, or nil).
func ensureIdentity(ctx context.Context, e identityEnv, v nodecfg.Values, ns string, id sharedIdentity, dry bool, out io.Writer) ([]byte, error) {
	why := ""
	kc, err := identity.Fetch(ctx, e.cs, ns, id.secret)
	switch {
	case apierrors.IsNotFound(err):
		why = "none yet"
	case err != nil:
		return nil, err
	default:
		p, err := identity.Parse(kc)
		switch {
		case err != nil:
			why = err.Error()
		case p.User != id.user:
			why = fmt.Sprintf("it is %s's", p.User)
		case !bytes.Equal(bytes.TrimSpace(p.CA), bytes.TrimSpace(e.ca)):
			why = "another cluster CA"
		default:
			soon, notAfter, err := identity.Expiring(p.Cert, e.now, identityRenew)
			switch {
			case err != nil:
				why = err.Error()
			case soon:
				why = "expires " + notAfter.UTC().Format(time.RFC3339)
			default:
				fmt.Fprintf(out, "%-9s %s (Secret %s/%s, until %s)\n", "kept", id.user, ns, id.secret, notAfter.UTC().Format(time.DateOnly))
				return kc, nil
			}
		}
	}
	if dry {
		fmt.Fprintf(out, "%-9s %s (Secret %s/%s): %s\n", "would issue", id.user, ns, id.secret, why)
		if why == "none yet" {
			return nil, nil
		}
		return kc, nil
	}
	server, err := identity.Server(id.role, v)
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := identity.Issue(ctx, e.cs, id.user, identityLifetime)
	if err != nil {
		return nil, err
	}
	if kc, err = identity.Kubeconfig(server, e.ca, certPEM, keyPEM, id.user); err != nil {
		return nil, err
	}
	if _, err := identity.Publish(ctx, e.cs, ns, id.secret, kc); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "%-9s %s (Secret %s/%s): %s\n", "issued", id.user, ns, id.secret, why)
	return kc, nil
}

// kubeconfigFile is one of a node's kubeconfigs.
type kubeconfigFile struct {
	path string
	data []byte // nil: not known (a dry run before the identity exists)
	user string
}

// nodeKubeconfigs are the kubeconfigs of a node of v.Role from the shared
// identities (by user), aimed at the node's server: lbconfig's, and the
// DNS pod's when the cluster file gives it its own.
func nodeKubeconfigs(v nodecfg.Values, kcs map[string][]byte) ([]kubeconfigFile, error) {
	lb, dns, ok := identitiesOf(v.Role)
	if !ok || v.Kubeconfig == "" {
		return nil, nil
	}
	server, err := identity.Server(v.Role, v)
	if err != nil {
		return nil, err
	}
	want := []kubeconfigFile{{path: v.Kubeconfig, user: lb.user}}
	if v.DNSKubeconfig != "" && v.DNSKubeconfig != v.Kubeconfig {
		want = append(want, kubeconfigFile{path: v.DNSKubeconfig, user: dns.user})
	}
	for i, w := range want {
		if kcs[w.user] == nil {
			continue
		}
		if want[i].data, err = identity.WithServer(kcs[w.user], server); err != nil {
			return nil, fmt.Errorf("%s's kubeconfig: %w", w.user, err)
		}
	}
	return want, nil
}

// writeKubeconfigs writes each file under root atomically (the pods read
// a kubeconfig as soon as it appears), root:65532 0640: the DNS pod reads
// it as 65532, lbconfig as root, nobody else (it holds a key).
func writeKubeconfigs(root string, files []kubeconfigFile, dry bool, out io.Writer) error {
	for _, f := range files {
		p := filepath.Join(root, f.path)
		if dry {
			old, _ := os.ReadFile(p)
			switch {
			case f.data == nil:
				fmt.Fprintf(out, "%-9s %s (%s, once issued)\n", "would write", p, f.user)
			case !bytes.Equal(old, f.data):
				fmt.Fprintf(out, "%-9s %s (%s)\n", "would write", p, f.user)
			}
			continue
		}
		if err := writeKubeconfig(p, f.data); err != nil {
			return err
		}
		fmt.Fprintf(out, "%-9s %s (%s)\n", "wrote", p, f.user)
	}
	return nil
}

// chown is os.Lchown, replaced by tests that run unprivileged.
var chown = os.Lchown

// writeKubeconfig writes one kubeconfig and gives it root:65532 0640.
// The mode and group are set after the rename, so a new file is
// root-only for that moment (the DNS pod retries every 2 s).
func writeKubeconfig(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if _, err := atomicfile.WriteIfChanged(p, data, 0o640); err != nil {
		return err
	}
	if err := chown(p, 0, podGID); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return os.Chmod(p, 0o640)
}

// fetchIdentities is install's step on a node whose kubeconfig is missing
// and that can reach the API: the Secrets of the identities its role uses,
// read with cs (an administrator's on a control-plane node, kubelet's
// elsewhere: the nodes' Role grants the worker's and the DNS pod's), and
// written under root for this node's server. A file that exists is
// replaced only by a renewal: the same user's identity whose certificate
// ends later (the identity unit's timer runs this daily); anything else
// there (a kubeconfig made by hand) is left alone. A Secret that cannot be
// read is reported, not an error: install does not depend on the
// identities.
func fetchIdentities(ctx context.Context, cs kubernetes.Interface, v nodecfg.Values, root string, out io.Writer) error {
	_, statusNS := namespaces(v)
	lb, dns, ok := identitiesOf(v.Role)
	if !ok {
		return nil
	}
	kcs := map[string][]byte{}
	for _, id := range []sharedIdentity{lb, dns} {
		kc, err := identity.Fetch(ctx, cs, statusNS, id.secret)
		if err != nil {
			fmt.Fprintf(out, "%-9s %s: %v (infradns identities, on a control-plane node, makes it)\n", "no identity", id.user, err)
			continue
		}
		kcs[id.user] = kc
	}
	files, err := nodeKubeconfigs(v, kcs)
	if err != nil {
		return err
	}
	var todo []kubeconfigFile
	for _, f := range files {
		if f.data == nil {
			continue
		}
		old, err := os.ReadFile(filepath.Join(root, f.path))
		if err == nil && !renews(old, f.data) {
			continue
		}
		todo = append(todo, f)
	}
	return writeKubeconfigs(root, todo, false, out)
}

// renews says whether kubeconfig next is a renewal of old: the same user,
// a certificate that ends later. Not for a file that does not parse as
// one of ours (made by hand: left alone).
func renews(old, next []byte) bool {
	o, err := identity.Parse(old)
	if err != nil {
		return false
	}
	n, err := identity.Parse(next)
	if err != nil || o.User != n.User {
		return false
	}
	oc, err1 := identity.ParseCert(o.Cert)
	nc, err2 := identity.ParseCert(n.Cert)
	return err1 == nil && err2 == nil && nc.NotAfter.After(oc.NotAfter)
}
