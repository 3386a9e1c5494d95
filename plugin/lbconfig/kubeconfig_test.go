package lbconfig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/infradns/infradns/internal/kube"
)

const testKubeconfig = `apiVersion: v1
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
`

type injectedClient struct{ kube.Client }

// TestClientFollowsKubeconfig: a client from a kubeconfig, the option's or
// $KUBECONFIG's, follows the file (a pod may read it mid-edit, and its
// credentials are rotated with no restart); an injected one is used as is.
func TestClientFollowsKubeconfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	injected := kube.Client(&injectedClient{})
	for _, tc := range []struct {
		name       string
		setup      func(t *testing.T, l *LBConfig)
		wantFollow bool
	}{
		{"kubeconfig option", func(_ *testing.T, l *LBConfig) { l.kubeconfig = path }, true},
		{"$KUBECONFIG", func(t *testing.T, _ *LBConfig) { t.Setenv("KUBECONFIG", path) }, true},
		{"injected", func(_ *testing.T, l *LBConfig) {
			l.newClient = func() (kube.Client, error) { return injected, nil }
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			t.Setenv("KUBECONFIG", "")
			l := New()
			tc.setup(t, l)
			c, err := l.client()
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantFollow {
				if _, ok := c.(*kube.Reloading); !ok {
					t.Errorf("client %T, want a *kube.Reloading", c)
				}
			} else if c != injected {
				t.Errorf("client %v, want the injected one", c)
			}
		})
	}
}
