package kube

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
)

// KubeconfigRef is a file a kubeconfig makes its client read, as written
// in it (a relative path is relative to the kubeconfig's directory).
type KubeconfigRef struct {
	Field, Path string
}

// KubeconfigRefs are the files the current context of the kubeconfig data
// names: the cluster's certificate authority, the user's client
// certificate and key, its token file. Embedded data (the *-data fields)
// is no file.
func KubeconfigRefs(data []byte) ([]KubeconfigRef, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil {
		return nil, nil // client-go says what is wrong with that
	}
	var out []KubeconfigRef
	add := func(field, p string) {
		if p != "" {
			out = append(out, KubeconfigRef{field, p})
		}
	}
	if c := cfg.Clusters[ctx.Cluster]; c != nil {
		add("certificate-authority", c.CertificateAuthority)
	}
	if u := cfg.AuthInfos[ctx.AuthInfo]; u != nil {
		add("client-certificate", u.ClientCertificate)
		add("client-key", u.ClientKey)
		add("tokenFile", u.TokenFile)
	}
	return out, nil
}

// RefsOutside are the refs a pod that mounts only dir, the kubeconfig's
// directory, cannot read: absolute paths elsewhere, relative ones that
// climb out of it.
func RefsOutside(refs []KubeconfigRef, dir string) []KubeconfigRef {
	var out []KubeconfigRef
	for _, r := range refs {
		p := r.Path
		if filepath.IsAbs(p) {
			rel, err := filepath.Rel(dir, filepath.Clean(p))
			if err != nil || !filepath.IsLocal(rel) {
				out = append(out, r)
			}
			continue
		}
		if !filepath.IsLocal(p) {
			out = append(out, r)
		}
	}
	return out
}

// checkRefs explains a file the kubeconfig at path names that is missing
// and outside its directory: the pods mount only that directory, so a
// kubeconfig pointing elsewhere (kubelet's points at
// /var/lib/kubelet/pki/kubelet-client-current.pem) works on the host and
// fails in the pod with client-go's bare "no such file".
func checkRefs(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil // client-go reports it (and a missing file is retried)
	}
	refs, err := KubeconfigRefs(data)
	if err != nil {
		return nil
	}
	dir := filepath.Dir(path)
	var missing []string
	for _, r := range RefsOutside(refs, dir) {
		p := r.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, fmt.Sprintf("%s %s", r.Field, r.Path))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("kubeconfig %s names %s: outside %s, the only directory the pods mount, and not here: "+
		"put the files beside the kubeconfig or embed them (kubectl config set-credentials --embed-certs, set-cluster --embed-certs)",
		path, strings.Join(missing, ", "), dir)
}
