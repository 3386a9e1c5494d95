package mdnsnodes

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/infradns/infradns/internal/kube"
)

// TestClientFollowsKubeconfig: the client of the kubeconfig option follows
// the file (a pod may read it mid-edit, and its credentials are rotated
// with no restart).
func TestClientFollowsKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
current-context: c
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: t}
contexts:
- name: c
  context: {cluster: c, user: u}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	m := New()
	m.kubeconfig = path
	c, err := m.client()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*kube.Reloading); !ok {
		t.Errorf("client %T, want a *kube.Reloading", c)
	}
}
