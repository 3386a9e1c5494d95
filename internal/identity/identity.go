// Package identity makes the Kubernetes identities lbconfig and mdnsnodes
// read the API with (deploy/rbac.yaml's users infradns, infradns-worker and
// infradns-dns), so the operator no longer makes them by hand: the RBAC
// with the ingress namespace put in, a key and a certificate request per
// identity, the kubeconfig that embeds the result, the server a node's
// kubeconfig names. This file is pure; api.go talks to the API (CSRs, the
// Secrets that share the identities with the nodes, server-side apply).
package identity

import (
	"bytes"
	"cmp"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/infradns/infradns/deploy"
	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/nodecfg"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The users deploy/rbac.yaml binds.
const (
	ControlPlaneUser = "infradns"        // lbconfig on control-plane nodes
	WorkerUser       = "infradns-worker" // lbconfig on workers
	DNSUser          = "infradns-dns"    // the DNS pod (mdnsnodes), every node
)

// The Secrets (in the status namespace) that hold each identity's
// kubeconfig. Nodes (group system:nodes) may get the worker's and the DNS
// pod's, never the control plane's.
const (
	ControlPlaneSecret = "infradns-identity-control-plane"
	WorkerSecret       = "infradns-identity-worker"
	DNSSecret          = "infradns-identity-dns"
	// SecretKey is the Secret's data key holding the kubeconfig.
	SecretKey = "kubeconfig"
	// NodeReaderRole names the Role and RoleBinding that let nodes get
	// WorkerSecret and DNSSecret.
	NodeReaderRole = "infradns-node-identities"
)

// fileIngressNamespace is the ingress namespace deploy/rbac.yaml names, in
// exactly two objects (the ingress service's Role and RoleBinding).
const fileIngressNamespace = "openshift-ingress"

var ingressLine = []byte("  namespace: " + fileIngressNamespace + "\n")

// RBAC is deploy/rbac.yaml with ingressNamespace in the two objects that
// name the ingress namespace (the file as it is for openshift-ingress),
// followed by the Role and RoleBinding that let every node (group
// system:nodes) get the worker's and the DNS pod's identity Secrets in
// statusNamespace, and that namespace itself when it is not the file's
// "infradns".
func RBAC(ingressNamespace, statusNamespace string) ([]byte, error) {
	for _, ns := range []string{ingressNamespace, statusNamespace} {
		if err := cluster.CheckNamespace(ns); err != nil {
			return nil, err
		}
	}
	if n := bytes.Count(deploy.RBAC, ingressLine); n != 2 {
		return nil, fmt.Errorf("deploy/rbac.yaml names the ingress namespace %s in %d objects, not 2", fileIngressNamespace, n)
	}
	var b bytes.Buffer
	b.Write(bytes.ReplaceAll(deploy.RBAC, ingressLine, []byte("  namespace: "+ingressNamespace+"\n")))
	if !bytes.HasSuffix(b.Bytes(), []byte("\n")) {
		b.WriteByte('\n')
	}
	if statusNamespace != nodecfg.DefaultStatusLeaseNamespace {
		fmt.Fprintf(&b, `---
# The status namespace of the cluster file (statusLeaseNamespace), where the
# identity Secrets live.
apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    app.kubernetes.io/name: infradns
`, statusNamespace)
	}
	fmt.Fprintf(&b, `---
# Added by infradns identities: every node (kubelet's identity,
# system:node:NAME, group system:nodes) may get the identities workers and
# the DNS pods use, so that install fetches them after kubeadm join. Never
# the control plane's (%[2]s): only an administrator reads that one.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: %[3]s
  namespace: %[1]s
  labels:
    app.kubernetes.io/name: infradns
rules:
- apiGroups: [""]
  resources: ["secrets"]
  resourceNames: ["%[4]s", "%[5]s"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: %[3]s
  namespace: %[1]s
  labels:
    app.kubernetes.io/name: infradns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: %[3]s
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: system:nodes
`, statusNamespace, ControlPlaneSecret, NodeReaderRole, WorkerSecret, DNSSecret)
	return b.Bytes(), nil
}

// NewKey is a new identity's private key: ECDSA P-256.
func NewKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

// KeyPEM is key as a PEM "EC PRIVATE KEY" block (what kubeconfigs embed).
func KeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// CSR is a PEM certificate request for user: CN=user and nothing else. No
// organisation, so no group: a request must never be able to name one
// (system:masters would be cluster-admin).
func CSR(key crypto.Signer, user string) ([]byte, error) {
	if user == "" {
		return nil, errors.New("certificate request: no user")
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: user},
	}, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// clusterName is the kubeconfig's cluster entry.
const clusterName = "kubernetes"

// Kubeconfig is a kubeconfig for user at server with the CA, the client
// certificate and its key embedded (the pods mount only the kubeconfig's
// directory, so it may name no other file); its one context is named
// after the user.
func Kubeconfig(server string, caPEM, certPEM, keyPEM []byte, user string) ([]byte, error) {
	switch {
	case server == "":
		return nil, errors.New("kubeconfig: no server")
	case user == "":
		return nil, errors.New("kubeconfig: no user")
	case len(caPEM) == 0, len(certPEM) == 0, len(keyPEM) == 0:
		return nil, fmt.Errorf("kubeconfig for %s: the CA, the certificate and the key are all needed", user)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts[user] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: user}
	cfg.CurrentContext = user
	return clientcmd.Write(*cfg)
}

// Parsed is what a kubeconfig of Kubeconfig's shape holds, for a renewal
// check or a change of server.
type Parsed struct {
	Server, User  string
	CA, Cert, Key []byte
}

// Parse reads a kubeconfig's current context: its server, user, and the
// embedded CA, certificate and key (an error if any is a file reference).
func Parse(kubeconfig []byte) (Parsed, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return Parsed{}, err
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return Parsed{}, fmt.Errorf("kubeconfig: no current context %q", cfg.CurrentContext)
	}
	cl, ai := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
	if cl == nil || ai == nil {
		return Parsed{}, fmt.Errorf("kubeconfig: context %q names a missing cluster or user", cfg.CurrentContext)
	}
	p := Parsed{Server: cl.Server, User: ctx.AuthInfo, CA: cl.CertificateAuthorityData, Cert: ai.ClientCertificateData, Key: ai.ClientKeyData}
	if len(p.CA) == 0 || len(p.Cert) == 0 || len(p.Key) == 0 {
		return Parsed{}, fmt.Errorf("kubeconfig for %s: the CA, the certificate or the key is not embedded", p.User)
	}
	return p, nil
}

// WithServer is kubeconfig (of Kubeconfig's shape) aimed at server: a
// shared identity is published once and each node names its own server.
func WithServer(kubeconfig []byte, server string) ([]byte, error) {
	p, err := Parse(kubeconfig)
	if err != nil {
		return nil, err
	}
	return Kubeconfig(server, p.CA, p.Cert, p.Key, p.User)
}

// Server is the API server a node's kubeconfigs name: the local apiserver
// on a control-plane node (haproxy behind the API VIP depends on what
// lbconfig reads there, so never the VIP), haproxy through api-int on a
// worker, which runs no apiserver. Both names are in the apiserver's
// certificate (the guide's kubeadm init, --apiserver-cert-extra-sans).
func Server(role string, v nodecfg.Values) (string, error) {
	switch role {
	case nodecfg.ControlPlane:
		return "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(int(cmp.Or(v.APIPort, cluster.DefaultAPIPort)))), nil
	case nodecfg.Worker:
		if v.Domain == "" {
			return "", errors.New("server: no domain")
		}
		return "https://" + net.JoinHostPort("api-int."+v.Domain, strconv.Itoa(int(cmp.Or(v.LBPort, cluster.DefaultLBPort)))), nil
	}
	return "", fmt.Errorf("server: a %s node follows no API", cmp.Or(role, "role-less"))
}

// Expiring says whether the first certificate of certPEM expires before
// now+within, and when it expires.
func Expiring(certPEM []byte, now time.Time, within time.Duration) (bool, time.Time, error) {
	c, err := ParseCert(certPEM)
	if err != nil {
		return false, time.Time{}, err
	}
	return !c.NotAfter.After(now.Add(within)), c.NotAfter, nil
}

// ParseCert is the first CERTIFICATE block of certPEM.
func ParseCert(certPEM []byte) (*x509.Certificate, error) {
	for rest := certPEM; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			return nil, errors.New("no PEM certificate")
		}
		if blk.Type == "CERTIFICATE" {
			return x509.ParseCertificate(blk.Bytes)
		}
	}
}
