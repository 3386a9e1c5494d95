package kube

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const kubeconfigTmpl = `apiVersion: v1
kind: Config
current-context: infradns
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", %s}
- name: other
  cluster: {server: "https://127.0.0.1:6443", certificate-authority: /etc/kubernetes/pki/ca.crt}
users:
- name: infradns
  user: {%s}
contexts:
- name: infradns
  context: {cluster: c, user: infradns}
- name: other
  context: {cluster: other, user: infradns}
`

func kubeconfig(cluster, user string) string {
	return strings.Replace(strings.Replace(kubeconfigTmpl, "%s", cluster, 1), "%s", user, 1)
}

// TestKubeconfigRefs: the files of the current context, as written; not
// another context's, not embedded data.
func TestKubeconfigRefs(t *testing.T) {
	got, err := KubeconfigRefs([]byte(kubeconfig("certificate-authority: ca.crt",
		"client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem, client-key: /var/lib/kubelet/pki/kubelet-client-current.pem, token: x")))
	if err != nil {
		t.Fatal(err)
	}
	want := []KubeconfigRef{{"certificate-authority", "ca.crt"},
		{"client-certificate", "/var/lib/kubelet/pki/kubelet-client-current.pem"},
		{"client-key", "/var/lib/kubelet/pki/kubelet-client-current.pem"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("refs %v, want %v", got, want)
	}
	got, err = KubeconfigRefs([]byte(kubeconfig("certificate-authority-data: eA==", "client-certificate-data: eA==, client-key-data: eA==, tokenFile: token")))
	if err != nil || !reflect.DeepEqual(got, []KubeconfigRef{{"tokenFile", "token"}}) {
		t.Errorf("embedded: refs %v, %v", got, err)
	}
}

func TestRefsOutside(t *testing.T) {
	refs := []KubeconfigRef{
		{"a", "/etc/kubernetes/infradns/ca.crt"},
		{"b", "ca.crt"},
		{"c", "pki/client.pem"},
		{"d", "/etc/kubernetes/pki/ca.crt"},
		{"e", "../pki/ca.crt"},
		{"f", "/etc/kubernetes/infradns/../pki/ca.key"},
		{"g", "/etc/kubernetes/infradnsx/ca.crt"},
	}
	got := RefsOutside(refs, "/etc/kubernetes/infradns")
	want := []KubeconfigRef{refs[3], refs[4], refs[5], refs[6]}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("outside: %v, want %v", got, want)
	}
}

// TestFromKubeconfigRefsOutside: a kubeconfig naming a file outside its
// directory (kubelet's, copied) fails in the pod, which mounts only that
// directory: the error says so and how to fix it, instead of client-go's
// bare "no such file". Files beside it are fine.
func TestFromKubeconfigRefsOutside(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "infradns")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	outside := filepath.Join(t.TempDir(), "pki", "kubelet-client-current.pem")
	if err := os.WriteFile(kc, []byte(kubeconfig("insecure-skip-tls-verify: true",
		"client-certificate: "+outside+", client-key: "+outside)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := FromKubeconfig(kc, "test")
	if err == nil || !strings.Contains(err.Error(), "names client-certificate "+outside+", client-key "+outside+": outside "+dir+", the only directory the pods mount") ||
		!strings.Contains(err.Error(), "--embed-certs") {
		t.Errorf("FromKubeconfig = %v, want the files outside named, with the fix", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kc, []byte(kubeconfig("insecure-skip-tls-verify: true", "tokenFile: token")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := FromKubeconfig(kc, "test"); err != nil {
		t.Errorf("a token file beside the kubeconfig: %v", err)
	}
}
