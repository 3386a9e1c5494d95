package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/ecmprelay"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/mdns"
	"github.com/infradns/infradns/internal/nodecfg"
	"github.com/infradns/infradns/internal/secret"

	"github.com/miekg/dns"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// A check's verdict.
const (
	pass = "PASS"
	warn = "WARN"
	fail = "FAIL"
	// next: not there yet, and not expected yet (install, before the
	// cluster): what comes next says when it will be.
	next = "NEXT"
)

// finding is one line of doctor's report, with what to do when it is not
// PASS.
type finding struct {
	Verdict, Check, Detail, Fix string
}

// podGID is the group the DNS and publisher pods run as: the kubeconfig and
// the mDNS key must be readable by it and by nobody else.
const podGID = 65532

// doctor checks, on a node, what an installation needs: the cluster file,
// the kubeconfig (reachable, the certificate covering the name used, RBAC
// allowing what the plugins do), the mDNS key, the resolver wiring (the
// node asks itself first, forward.conf does not loop back), the answers
// of the node's CoreDNS and, optionally, VRRP router ID clashes on the
// link. Each check says PASS, WARN or FAIL and what to do; it exits non-zero
// on any FAIL.
func doctor(ctx context.Context, args []string, out io.Writer) error {
	fs := flags("doctor", "-f CLUSTER.yaml [-role ROLE] [-node NAME] [-root /] [-server ADDR:PORT] [-scan 3s]")
	load := nodeFlags(fs, "control-plane, worker or bootstrap")
	root := fs.String("root", "/", "the node's root: where /etc/resolv.conf, /etc/infradns and the kubeconfig are read")
	server := fs.String("server", "", "the node's CoreDNS (default: the first nameserver of resolv.conf, port 53)")
	scanFor := fs.Duration("scan", 3*time.Second, "listen this long for VRRP router ID clashes on the cluster interface (root); 0 skips it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("doctor: unexpected argument %q", fs.Arg(0))
	}
	f, err := load()
	if err != nil {
		return report(out, []finding{{fail, "cluster file", err.Error(), "fix the file: render-node refuses it too"}})
	}
	return report(out, doctorChecks(ctx, f, doctorOpts{root: *root, server: *server, scan: *scanFor}))
}

// doctorOpts are doctor's settings.
type doctorOpts struct {
	root, server string
	scan         time.Duration
	// installing: run at the end of install, maybe before the cluster
	// exists. A kubeconfig that is not there yet and a CoreDNS that does
	// not answer yet (kubelet has not started the pods) are what comes
	// next, not failures.
	installing bool
}

// doctorChecks are doctor's findings for the node f describes.
func doctorChecks(ctx context.Context, f nodecfg.File, o doctorOpts) []finding {
	var found []finding
	add := func(f ...finding) { found = append(found, f...) }
	v, err := f.Values()
	if err != nil {
		add(finding{fail, "cluster file", err.Error(), "fix the file: render-node refuses it too"})
		return found
	}
	root, server, scanFor := &o.root, &o.server, &o.scan
	add(finding{pass, "cluster file", fmt.Sprintf("%s, cluster %s (%s), role %s", f.Name, v.Cluster, v.Domain, v.Role), ""})
	under := func(p string) string { return filepath.Join(*root, p) }
	if filepath.Clean(*root) == "/" {
		// This node's own interfaces: render-node -o / refuses the same.
		if err := checkLocalLink(f); err != nil {
			add(finding{fail, "interface", err.Error(), "interface (the same on every node) and the VIPs: each VIP in a subnet of that interface"})
		} else {
			add(finding{pass, "interface", v.Interface + " is on this node, and in VRRP mode its subnets hold the VIPs of this role", ""})
		}
	}

	if m, err := cluster.New(f.Spec()); err == nil {
		add(checkFailover(m.Spec(), readVirtualization(under)))
	}

	missing := func(p string) bool {
		_, err := os.Stat(under(p))
		return errors.Is(err, fs.ErrNotExist)
	}
	switch {
	case v.Kubeconfig != "" && o.installing && missing(v.Kubeconfig):
		add(finding{next, "kubeconfig", v.Kubeconfig + " is not there yet: until it is, the pods serve from mDNS and apiServers",
			"once the API answers: infradns identities -f CLUSTER.yaml on the first control-plane node; on the others, infradns install again once joined"})
	case v.Kubeconfig != "":
		add(checkSecretFile("kubeconfig", under(v.Kubeconfig), "chgrp 65532 "+v.Kubeconfig+" && chmod 0640 "+v.Kubeconfig)...)
		if kc, err := os.ReadFile(under(v.Kubeconfig)); err == nil {
			add(checkKubeconfigRefs(v.Kubeconfig, kc))
		}
		shared := v.DNSKubeconfig == v.Kubeconfig
		add(checkAPI(ctx, "", under(v.Kubeconfig), lbconfigAccess(v, shared))...)
		if v.StatusLease != "" && len(v.APIVIPs) > 0 {
			add(checkAPIVIPStatus(ctx, under(v.Kubeconfig), v))
		}
		if shared {
			add(finding{warn, "DNS identity", "the DNS pod reads lbconfig's kubeconfig, which may write status Leases: the pod that parses the link's packets holds a credential that writes",
				"set dnsKubeconfig to a kubeconfig of the user infradns-dns (deploy/rbac.yaml), in /etc/kubernetes/" + nodecfg.DNSKubeconfigDirName + "/"})
		} else if o.installing && missing(v.DNSKubeconfig) {
			add(finding{next, "DNS kubeconfig", v.DNSKubeconfig + " is not there yet", "once the API answers: infradns identities -f CLUSTER.yaml on the first control-plane node; on the others, infradns install again once joined"})
		} else {
			add(checkSecretFile("DNS kubeconfig", under(v.DNSKubeconfig), "chgrp 65532 "+v.DNSKubeconfig+" && chmod 0640 "+v.DNSKubeconfig)...)
			if kc, err := os.ReadFile(under(v.DNSKubeconfig)); err == nil {
				add(checkKubeconfigRefs(v.DNSKubeconfig, kc))
			}
			add(checkAPI(ctx, "DNS ", under(v.DNSKubeconfig), dnsAccess(v))...)
		}
	}
	if v.BGP {
		for _, p := range f.BGP.For(f.Node).Peers {
			if p.PasswordFile != "" {
				add(checkBGPPasswordFile(p.Address.String(), p.PasswordFile, under(p.PasswordFile)))
			}
		}
		if filepath.Clean(*root) == "/" && !o.installing {
			ifi, err := net.InterfaceByName(ecmprelay.Device)
			add(checkRelay(ifi, err))
		}
	}
	if v.MDNSKey != "" {
		add(checkSecretFile("mDNS key", under(v.MDNSKey), "chown root:65532 "+v.MDNSKey+" && chmod 0640 "+v.MDNSKey+" (infradns gen-key writes it so)")...)
		if _, err := mdns.LoadKeys(under(v.MDNSKey), nil); err != nil {
			add(finding{fail, "mDNS key", err.Error(), "infradns gen-key -o " + v.MDNSKey + ", the same file on every node"})
		}
	}

	local := localAddrs()
	// In systemd-resolved mode /etc/resolv.conf is resolved's stub: what
	// must name this node first is kubelet's file.
	resolvFile := "/etc/resolv.conf"
	if v.Resolved {
		resolvFile = nodecfg.KubeletResolv
	}
	resolv, _ := os.ReadFile(under(resolvFile))
	add(checkResolv(resolv, local))
	fwd, _ := os.ReadFile(under(nodecfg.ConfigDir + "/forward.conf"))
	add(checkForward(fwd, local))

	addr := *server
	if addr == "" {
		if ns := nodecfg.Nameservers(resolv); len(ns) > 0 {
			addr = net.JoinHostPort(ns[0].String(), "53")
		}
	}
	if addr != "" {
		host, _ := os.Hostname()
		if f.Node != "" {
			host = f.Node
		}
		add(coreDNSAnswers(addr, v, host, o.installing)...)
	}

	if *scanFor > 0 && v.Interface != "" && v.Interface != "auto" && f.Name != "" {
		var buf bytes.Buffer
		err := scan(ctx, []string{"-f", f.Name, "-interface", v.Interface, "-duration", scanFor.String()}, &buf)
		switch {
		case err == nil:
			add(finding{pass, "VRRP router IDs", fmt.Sprintf("no clash heard on %s in %s", v.Interface, *scanFor), ""})
		default:
			add(finding{fail, "VRRP router IDs", strings.TrimSpace(buf.String() + " " + err.Error()), "routerIDs in the cluster file (every node), or stop the other router; see `infradns vrrp-scan`"})
		}
	}
	return found
}

func report(out io.Writer, found []finding) error {
	failed := 0
	for _, f := range found {
		fmt.Fprintf(out, "%s  %-16s %s\n", f.Verdict, f.Check, f.Detail)
		switch {
		case f.Verdict == next && f.Fix != "":
			fmt.Fprintf(out, "      %-16s next: %s\n", "", f.Fix)
		case f.Verdict != pass && f.Fix != "":
			fmt.Fprintf(out, "      %-16s fix: %s\n", "", f.Fix)
		}
		if f.Verdict == fail {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("doctor: %d of %d checks failed", failed, len(found))
	}
	return nil
}

// checkSecretFile: a file holding a secret (a client key, the mDNS key)
// readable by the pods' group and nobody else.
func checkSecretFile(what, path, fix string) []finding {
	st, err := os.Stat(path)
	if err != nil {
		return []finding{{fail, what, err.Error(), "create it; " + fix}}
	}
	return []finding{secretMode(what, path, st.Mode().Perm(), st.Sys().(*syscall.Stat_t).Gid, fix)}
}

func secretMode(what, path string, perm os.FileMode, gid uint32, fix string) finding {
	switch {
	case perm&0o022 != 0:
		return finding{fail, what, fmt.Sprintf("%s is writable by group or others (%04o)", path, perm), fix}
	case perm&0o004 != 0:
		return finding{fail, what, fmt.Sprintf("%s is readable by everyone (%04o): it holds a secret", path, perm), fix}
	case gid != podGID && perm&0o040 != 0:
		return finding{warn, what, fmt.Sprintf("%s is group %d, not the pods' %d: the non-root pods cannot read it", path, gid, podGID), fix}
	case gid != podGID:
		return finding{warn, what, fmt.Sprintf("%s (%04o) is readable by root only: the non-root pods cannot read it", path, perm), fix}
	}
	return finding{pass, what, fmt.Sprintf("%s %04o, group %d", path, perm, gid), ""}
}

// checkRelay: the device of BGP mode's hand-over relay, which a running
// lbconfig with peers makes (ifi and err are net.InterfaceByName's).
// Without it this node's open connections are reset whenever it leaves.
func checkRelay(ifi *net.Interface, err error) finding {
	const what = "hand-over relay"
	fix := "UDP 4798 and 4799 open between the nodes, the kernel's vxlan driver; lbconfig's log says why it made no relay (see the lbconfig README, The hand-over relay over BGP)"
	switch {
	case err != nil:
		return finding{warn, what, "no " + ecmprelay.Device + " device (lbconfig not running, no peer yet, bgp-relay off, or the relay could not be made): connections open through this node are reset when it leaves", fix}
	case ifi.Flags&net.FlagUp == 0:
		return finding{warn, what, ecmprelay.Device + " is down: connections open through this node are reset when it leaves", fix}
	}
	return finding{pass, what, ecmprelay.Device + " is up: a graceful stop or drain of this node keeps its open connections for the drain", ""}
}

// checkBGPPasswordFile: the file lbconfig reads a peer's password from at
// its start is one it accepts (root's, 0600, one line a router can spell):
// otherwise lbconfig stops at setup with the same words.
func checkBGPPasswordFile(peer, path, full string) finding {
	what := "BGP " + peer
	b, err := secret.ReadFile(full, 4096)
	if err == nil {
		_, err = cluster.ParseBGPPasswordFile(b)
	}
	if err != nil {
		return finding{fail, what, fmt.Sprintf("passwordFile %s: %v", path, err),
			"one line of visible characters, the peer's TCP MD5 password, root's and 0600: (umask 077; cat > " + path + "), then restart the lbconfig pod"}
	}
	return finding{pass, what, fmt.Sprintf("passwordFile %s: root only, a password lbconfig accepts", path), ""}
}

// checkKubeconfigRefs: the files the kubeconfig at path (a node path)
// names are in its directory, the only one the pods mount: on the host it
// works, in the pods it does not.
func checkKubeconfigRefs(path string, data []byte) finding {
	refs, err := kube.KubeconfigRefs(data)
	if err != nil {
		return finding{fail, "kubeconfig files", err.Error(), "a kubeconfig for the user infradns (docs/operator-guide.md)"}
	}
	var out []string
	for _, r := range kube.RefsOutside(refs, filepath.Dir(path)) {
		out = append(out, r.Field+" "+r.Path)
	}
	if len(out) > 0 {
		return finding{fail, "kubeconfig files", fmt.Sprintf("%s names %s, outside %s: the pods mount only that directory", path, strings.Join(out, ", "), filepath.Dir(path)),
			"embed them (kubectl config set-credentials --embed-certs, set-cluster --embed-certs) or put them beside the kubeconfig"}
	}
	return finding{pass, "kubeconfig files", fmt.Sprintf("%d named, all in %s", len(refs), filepath.Dir(path)), ""}
}

// ask is one access review: a verb on a resource in a namespace.
type ask struct{ verb, group, resource, ns string }

func (a ask) String() string { return fmt.Sprintf("%s %s in %q", a.verb, a.resource, a.ns) }

// access is what an identity must be allowed (need) and must not be
// (deny: more than needed is a risk on every node that holds it).
type access struct{ need, deny []ask }

// lbconfigAccess is what lbconfig uses: its watches and the status
// Leases; with shared, the DNS pod's too (it reads the same kubeconfig).
func lbconfigAccess(v nodecfg.Values, shared bool) access {
	ingressNS := "openshift-ingress"
	if v.IngressService != "" {
		ingressNS, _, _ = strings.Cut(v.IngressService, "/")
	}
	a := access{need: []ask{
		{"list", "", "nodes", ""}, {"watch", "", "nodes", ""},
		{"list", "discovery.k8s.io", "endpointslices", "default"}, {"watch", "discovery.k8s.io", "endpointslices", "default"},
		{"list", "discovery.k8s.io", "endpointslices", ingressNS}, {"watch", "discovery.k8s.io", "endpointslices", ingressNS},
	}, deny: []ask{{"get", "", "secrets", "kube-system"}, {"update", "coordination.k8s.io", "leases", "kube-system"}}}
	if v.StatusLease != "" {
		for _, verb := range []string{"get", "create", "update"} {
			a.need = append(a.need, ask{verb, "coordination.k8s.io", "leases", v.StatusLease})
		}
	}
	if shared {
		a.need = append(a.need, nodesServiceAccess(v)...)
	}
	if v.LBServices {
		// deploy/lb-services.yaml: the Local Services' endpoints.
		a.need = append(a.need, ask{"list", "discovery.k8s.io", "endpointslices", ""}, ask{"watch", "discovery.k8s.io", "endpointslices", ""})
	}
	return a
}

// dnsAccess is what the DNS pod's own identity (dnsKubeconfig) uses: the
// Nodes, or the nodes Service's slices, and not one write.
func dnsAccess(v nodecfg.Values) access {
	a := access{need: append([]ask{{"list", "", "nodes", ""}, {"watch", "", "nodes", ""}}, nodesServiceAccess(v)...),
		deny: []ask{{"get", "", "secrets", "kube-system"}, {"update", "coordination.k8s.io", "leases", "kube-system"},
			{"list", "discovery.k8s.io", "endpointslices", "default"}, {"update", "", "nodes", ""}}}
	if v.StatusLease != "" {
		a.deny = append(a.deny, ask{"create", "coordination.k8s.io", "leases", v.StatusLease}, ask{"update", "coordination.k8s.io", "leases", v.StatusLease})
	}
	return a
}

func nodesServiceAccess(v nodecfg.Values) []ask {
	if v.NodesService == "" {
		return nil
	}
	ns, _, _ := strings.Cut(v.NodesService, "/")
	return []ask{{"list", "discovery.k8s.io", "endpointslices", ns}, {"watch", "discovery.k8s.io", "endpointslices", ns}}
}

// clientFor is a clientset over the kubeconfig at path, with a timeout
// for a doctor that must not hang.
func clientFor(path string) (kubernetes.Interface, string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, "", err
	}
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	return cs, cfg.Host, err
}

// checkAPI: the kubeconfig reaches the API (a certificate that does not
// cover the server's name is named as such) and RBAC allows what the
// plugins reading it do, and not what they must not. prefix names the
// identity in the findings ("" for lbconfig's, "DNS " for the DNS pod's).
func checkAPI(ctx context.Context, prefix, path string, a access) []finding {
	cs, host, err := clientFor(path)
	if err != nil {
		return []finding{{fail, prefix + "API", err.Error(), "a kubeconfig for the user infradns (docs/operator-guide.md)"}}
	}
	ver, err := cs.Discovery().ServerVersion()
	if err != nil {
		fix := "is the server up and reachable from this node?"
		if strings.Contains(err.Error(), "x509") {
			fix = "the apiserver's certificate must cover the name in the kubeconfig (" + host + "): kubeadm --apiserver-cert-extra-sans, or aim the kubeconfig at a name it covers"
		}
		return []finding{{fail, prefix + "API", err.Error(), fix}}
	}
	out := []finding{{pass, prefix + "API", fmt.Sprintf("%s answers (%s)", host, ver.GitVersion), ""}}
	allowed := func(a ask) (bool, error) {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.ns}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return r.Status.Allowed, nil
	}
	var missing, extra []string
	for _, x := range a.need {
		ok, err := allowed(x)
		if err != nil {
			return append(out, finding{fail, prefix + "RBAC", err.Error(), ""})
		}
		if !ok {
			missing = append(missing, x.String())
		}
	}
	for _, x := range a.deny {
		if ok, err := allowed(x); err == nil && ok {
			extra = append(extra, x.String())
		}
	}
	user := "infradns (or infradns-worker on a worker)"
	if prefix != "" {
		user = "infradns-dns"
	}
	switch {
	case len(missing) > 0:
		out = append(out, finding{fail, prefix + "RBAC", "not allowed: " + strings.Join(missing, ", "), "kubectl apply -f deploy/rbac.yaml (and deploy/nodes-service.yaml with nodesService, deploy/lb-services.yaml with lbPools in BGP mode), with this kubeconfig's user " + user})
	case len(extra) > 0:
		out = append(out, finding{warn, prefix + "RBAC", "allowed more than needed: " + strings.Join(extra, ", "), "use the user " + user + " of deploy/rbac.yaml, not an administrator's kubeconfig: every node holds it"})
	default:
		out = append(out, finding{pass, prefix + "RBAC", fmt.Sprintf("the %d permissions the plugins use, and not %d it must not have", len(a.need), len(a.deny)), ""})
	}
	return out
}

// checkAPIVIPStatus asks the API, as lbconfig's identity, to create the
// API VIP's status Lease in a dry run, so admission (deploy/rbac.yaml's
// policy for workers, which an access review does not see) answers too:
// a worker's identity must be refused it, a control-plane node's not.
// Nothing is written.
func checkAPIVIPStatus(ctx context.Context, path string, v nodecfg.Values) finding {
	const what = "API VIP status"
	cs, _, err := clientFor(path)
	if err != nil {
		return finding{fail, what, err.Error(), ""}
	}
	vip, err := netip.ParseAddr(v.APIVIPs[0])
	if err != nil {
		return finding{fail, what, err.Error(), ""}
	}
	name := cluster.StatusLeaseName(v.Cluster, "api", vip)
	_, err = cs.CoordinationV1().Leases(v.StatusLease).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	refused := apierrors.IsForbidden(err)
	if err != nil && !refused && !apierrors.IsAlreadyExists(err) {
		return finding{fail, what, fmt.Sprintf("dry-run create of %s/%s: %v", v.StatusLease, name, err), ""}
	}
	switch {
	case v.Role == nodecfg.Worker && !refused:
		return finding{warn, what, fmt.Sprintf("this worker's identity may write %s/%s, the API VIP's: a stolen worker kubeconfig could claim the API VIP", v.StatusLease, name),
			"give workers a kubeconfig of the user infradns-worker (deploy/rbac.yaml; Kubernetes 1.30 or later for its admission policy)"}
	case v.Role != nodecfg.Worker && refused:
		return finding{fail, what, fmt.Sprintf("this %s node's identity may not write %s/%s: %v", v.Role, v.StatusLease, name, err),
			"a control-plane node's kubeconfig is the user infradns, not a worker's infradns-worker"}
	case refused:
		return finding{pass, what, fmt.Sprintf("a worker's identity: %s/%s refused", v.StatusLease, name), ""}
	}
	return finding{pass, what, fmt.Sprintf("%s/%s writable by this %s node", v.StatusLease, name, v.Role), ""}
}

// checkResolv: the node asks its own CoreDNS first (the dispatcher script
// writes `nameserver NODE-IP` first), so pods and kubelet resolve
// api-int and node names.
func checkResolv(resolv []byte, local []netip.Addr) finding {
	ns := nodecfg.Nameservers(resolv)
	switch {
	case len(ns) == 0:
		return finding{fail, "resolv.conf", "no nameserver", "the dispatcher script writes it (NetworkManager); see the resolver wiring in docs/operator-guide.md"}
	case ns[0].IsLoopback() || slices.Contains(local, ns[0]):
		return finding{pass, "resolv.conf", fmt.Sprintf("first nameserver %s is this node", ns[0]), ""}
	}
	return finding{fail, "resolv.conf", fmt.Sprintf("first nameserver %s is not this node: api-int and node names go elsewhere", ns[0]), "is the dispatcher script installed and NetworkManager running? (systemd-resolved: see the resolver wiring section)"}
}

// checkForward: the upstreams CoreDNS forwards to are not this node, or a
// query for an unknown name would loop until CoreDNS's loop plugin stops it.
func checkForward(fwd []byte, local []netip.Addr) finding {
	if len(fwd) == 0 {
		return finding{fail, "forward.conf", "missing or empty: names outside the cluster do not resolve", "the dispatcher script writes it at the first network event; or set upstreams in the cluster file and render again"}
	}
	var ups []netip.Addr
	for _, f := range strings.Fields(string(fwd)) {
		host := f
		if h, _, err := net.SplitHostPort(f); err == nil {
			host = h
		}
		if a, err := netip.ParseAddr(host); err == nil {
			ups = append(ups, a.Unmap())
		}
	}
	if len(ups) == 0 {
		return finding{fail, "forward.conf", "no upstream address in it", "set upstreams in the cluster file"}
	}
	for _, a := range ups {
		if a.IsLoopback() || slices.Contains(local, a) {
			return finding{fail, "forward.conf", fmt.Sprintf("upstream %s is this node: a forwarding loop", a), "the site's DNS servers, never this node: fix the connection's DNS or upstreams"}
		}
	}
	return finding{pass, "forward.conf", fmt.Sprintf("upstreams %v", ups), ""}
}

// coreDNSAnswers are checkAnswers' findings, except during install, where
// a CoreDNS that does not answer at all is what comes next (kubelet has not
// started its pod yet); one that answers wrongly still fails.
func coreDNSAnswers(addr string, v nodecfg.Values, host string, installing bool) []finding {
	answers, noAnswer := checkAnswers(addr, v, host)
	if installing && noAnswer {
		return []finding{{next, "CoreDNS", addr + " does not answer yet: kubelet starts the infradns-coredns pod",
			"kubeadm init or join (kubelet runs the static pods), then: infradns doctor -f CLUSTER.yaml"}}
	}
	return answers
}

// answerTimeout is how long checkAnswers waits for each reply; a variable
// so that tests of a silent server wait less.
var answerTimeout = 2 * time.Second

// checkAnswers asks the node's CoreDNS what a pod would. noAnswer says the
// server gave no reply at all to the first question (refused, unreachable,
// timed out): nothing serves there, which install expects before kubelet
// runs the pod, unlike a server that replies wrongly.
func checkAnswers(server string, v nodecfg.Values, host string) (out []finding, noAnswer bool) {
	ask := func(name string, qtype uint16) ([]string, int, error) {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), qtype)
		r, _, err := (&dns.Client{Timeout: answerTimeout}).Exchange(m, server)
		if err != nil {
			return nil, 0, err
		}
		var out []string
		for _, rr := range r.Answer {
			switch x := rr.(type) {
			case *dns.A:
				out = append(out, x.A.String())
			case *dns.AAAA:
				out = append(out, x.AAAA.String())
			}
		}
		slices.Sort(out)
		return out, r.Rcode, nil
	}
	family := func(all []string, v6 bool) []string {
		var out []string
		for _, s := range all {
			if strings.Contains(s, ":") == v6 {
				out = append(out, s)
			}
		}
		slices.Sort(out)
		return out
	}
	asked := 0
	for _, c := range []struct{ name, label string }{
		{"api-int." + v.Domain, "api-int"},
		{"doctor-check.apps." + v.Domain, "*.apps"},
	} {
		want := v.APIVIPs
		if c.label == "*.apps" {
			want = v.IngressVIPs
		}
		var bad []string
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
			w := family(want, qt == dns.TypeAAAA)
			got, _, err := ask(c.name, qt)
			asked++
			if err != nil {
				out = append(out, finding{fail, c.label, fmt.Sprintf("%s: %v", server, err), "is the infradns-coredns pod running? crictl ps --name coredns"})
				return out, asked == 1 && silent(err)
			}
			if !slices.Equal(got, w) {
				bad = append(bad, fmt.Sprintf("%s %s = %v, want %v", c.name, dns.TypeToString[qt], got, w))
			}
		}
		if len(bad) > 0 {
			out = append(out, finding{fail, c.label, strings.Join(bad, "; "), "render the node again from the cluster file (the Corefile's VIPs)"})
		} else {
			out = append(out, finding{pass, c.label, fmt.Sprintf("%s answers %v", c.name, want), ""})
		}
	}
	label, _, _ := strings.Cut(strings.ToLower(host), ".")
	name := label + "." + v.Domain
	a, _, err4 := ask(name, dns.TypeA)
	aaaa, _, err6 := ask(name, dns.TypeAAAA)
	switch {
	case err4 != nil || err6 != nil:
		out = append(out, finding{fail, "node name", fmt.Sprintf("%s: %v %v", name, err4, err6), ""})
	case len(a)+len(aaaa) == 0:
		out = append(out, finding{fail, "node name", name + " has no address", "is this node's mdns-publisher running, and multicast passing (or the Node in the API with an InternalIP)?"})
	default:
		out = append(out, finding{pass, "node name", fmt.Sprintf("%s answers %v", name, append(a, aaaa...)), ""})
	}
	return out, false
}

// silent says err is the network's (a net.Error: refused, unreachable, a
// timeout), so no reply came; a reply that does not parse, or one for
// another query, is the dns package's error: the server did answer.
func silent(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

// localAddrs are this host's addresses.
func localAddrs() []netip.Addr {
	var out []netip.Addr
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}
