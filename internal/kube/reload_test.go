package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/cluster"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// reloadWait bounds every wait for a reload: many polls, so a slow machine
// does not fail the test, and far less than the minute after which
// client-go re-reads a token file on its own.
const reloadWait = 10 * time.Second

// fakeAPI answers over HTTPS as an API server named name would: a Node list of one
// Node called name, a watch that sends that Node and then stays open, and
// 404 for any Lease. It records each request's path and Authorization.
type fakeAPI struct {
	*httptest.Server
	name    string
	address string // the Node's InternalIP
	mu      sync.Mutex
	seen    []string // "PATH AUTHORIZATION CLIENT-CN"
}

func newFakeAPI(t *testing.T, name string) *fakeAPI {
	a := &fakeAPI{name: name, address: "198.51.100." + fmt.Sprint(len(name))}
	a.Server = httptest.NewUnstartedServer(http.HandlerFunc(a.serve))
	// Asked, not verified: the test reads which certificate came.
	a.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	a.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes a wrong CA fails
	a.StartTLS()
	t.Cleanup(a.Close)
	return a
}

func (a *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	cn := "-"
	if certs := r.TLS.PeerCertificates; len(certs) > 0 {
		cn = certs[0].Subject.CommonName
	}
	a.seen = append(a.seen, r.URL.Path+" "+r.Header.Get("Authorization")+" "+cn)
	a.mu.Unlock()
	node := corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: a.name, ResourceVersion: "2"},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: a.address}}}}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/api/v1/nodes" && r.URL.Query().Get("watch") == "true":
		enc := json.NewEncoder(w)
		_ = enc.Encode(map[string]any{"type": watch.Added, "object": node})
		if r.URL.Query().Get("sendInitialEvents") == "true" {
			// A watch-list (client-go's default): the initial state ends.
			_ = enc.Encode(map[string]any{"type": watch.Bookmark, "object": corev1.Node{TypeMeta: node.TypeMeta,
				ObjectMeta: metav1.ObjectMeta{ResourceVersion: "2", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}})
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case r.URL.Path == "/api/v1/nodes":
		_ = json.NewEncoder(w).Encode(corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"},
			ListMeta: metav1.ListMeta{ResourceVersion: "2"}, Items: []corev1.Node{node}})
	default:
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound})
	}
}

// requests are the requests served so far.
func (a *fakeAPI) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

// reloadKubeconfig is a kubeconfig for server with the given user fields.
// The server is HTTPS, unverified: client-go sends no credentials over
// plain HTTP.
func reloadKubeconfig(server, user string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: infradns
contexts:
- name: infradns
  context: {cluster: c, user: infradns}
clusters:
- name: c
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: infradns
  user: {%s}
`, server, user)
}

// replace writes data to path by rename (what the operator guide asks for,
// and what kubelet's volumes do) or in place (an editor, a sed -i on some
// systems, a cp).
func replace(t *testing.T, path, data string, byRename bool) {
	t.Helper()
	if !byRename {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// logs collects a Reloading's info and warn lines.
type logs struct {
	mu         sync.Mutex
	info, warn []string
}

func (l *logs) infof(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.info = append(l.info, fmt.Sprintf(format, args...))
}

func (l *logs) warnf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.warn = append(l.warn, fmt.Sprintf(format, args...))
}

func (l *logs) counts() (info, warn int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.info), len(l.warn)
}

// startReloading builds a Reloading of path polling fast and runs it until
// the test ends, checking then that Run returned.
func startReloading(t *testing.T, path string) (*Reloading, *logs) {
	t.Helper()
	old := reloadEvery
	reloadEvery = 20 * time.Millisecond
	t.Cleanup(func() { reloadEvery = old })
	l := &logs{}
	r, err := NewReloading(path, "test", l.infof, l.warnf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(reloadWait):
			t.Error("Run still running after its context ended")
		}
	})
	return r, l
}

// listed is the name of the Node lw lists, which is its server's name.
func listed(t *testing.T, lw cache.ListerWatcher) string {
	t.Helper()
	obj, err := cache.ToListerWatcherWithContext(lw).ListWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	l := obj.(*corev1.NodeList)
	if len(l.Items) != 1 {
		t.Fatalf("List = %d Nodes, want 1", len(l.Items))
	}
	return l.Items[0].Name
}

// openWatch opens a watch through lw and returns it with the name of the
// first Node it sends, its server's name.
func openWatch(t *testing.T, lw cache.ListerWatcher) (watch.Interface, string) {
	t.Helper()
	w, err := cache.ToListerWatcherWithContext(lw).WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	t.Cleanup(w.Stop)
	select {
	case ev, ok := <-w.ResultChan():
		if !ok || ev.Type != watch.Added {
			t.Fatalf("watch sent %v (open %v), want the Node ADDED", ev, ok)
		}
		return w, ev.Object.(*corev1.Node).Name
	case <-time.After(reloadWait):
		t.Fatal("no event from the watch")
	}
	return nil, ""
}

// closed waits for the watch's channel to close.
func closed(w watch.Interface) bool {
	deadline := time.After(reloadWait)
	for {
		select {
		case _, ok := <-w.ResultChan():
			if !ok {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// eventually waits for cond.
func eventually(cond func() bool) bool {
	deadline := time.Now().Add(reloadWait)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// TestReloadingServerChanged: a kubeconfig rewritten to name another server
// (the operator's sed after the pod read the file) is followed: the open
// watch on the old server ends, and lists, watches and Lease calls go to
// the new one. The old client kept the first server forever.
func TestReloadingServerChanged(t *testing.T) {
	for _, tc := range []struct {
		name     string
		byRename bool
	}{
		{"replaced by rename", true},
		{"rewritten in place", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newFakeAPI(t, "a"), newFakeAPI(t, "b")
			path := filepath.Join(t.TempDir(), "kubeconfig")
			replace(t, path, reloadKubeconfig(a.URL, ""), false)
			r, l := startReloading(t, path)
			nodes := r.Nodes(AllNodes)
			if got := listed(t, nodes); got != "a" {
				t.Fatalf("listed from %s, want a", got)
			}
			w, from := openWatch(t, nodes)
			if from != "a" {
				t.Fatalf("watching %s, want a", from)
			}

			replace(t, path, reloadKubeconfig(b.URL, ""), tc.byRename)
			if !closed(w) {
				t.Fatalf("the watch on the old server still open %v after the kubeconfig named another", reloadWait)
			}
			if got := listed(t, nodes); got != "b" {
				t.Errorf("listed from %s after the change, want b", got)
			}
			if _, from := openWatch(t, nodes); from != "b" {
				t.Errorf("watching %s after the change, want b", from)
			}
			if _, err := r.Leases("ns").Get(context.Background(), "lease", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("Lease Get = %v, want b's 404", err)
			}
			if reqs := b.requests(); !strings.HasPrefix(reqs[len(reqs)-1], "/apis/coordination.k8s.io/v1/namespaces/ns/leases/lease ") {
				t.Errorf("b's last request %q, want the Lease", reqs[len(reqs)-1])
			}
			info, warn := l.counts()
			if info != 1 || warn != 0 || !strings.Contains(l.info[0], "kubeconfig "+path+" changed: client rebuilt") {
				t.Errorf("info %q, warn %q: want the rebuild said once", l.info, l.warn)
			}
		})
	}
}

// TestReloadingWatcher: the package's Watcher on a Reloading client, its
// reflector client-go's, moves to the new server after the kubeconfig
// changes, without waiting for its watch to time out (minutes).
func TestReloadingWatcher(t *testing.T) {
	a, b := newFakeAPI(t, "a"), newFakeAPI(t, "bb")
	path := filepath.Join(t.TempDir(), "kubeconfig")
	replace(t, path, reloadKubeconfig(a.URL, ""), false)
	r, _ := startReloading(t, path)
	o := NewOptions()
	o.NodesOnly = true
	ctx, cancel := context.WithCancel(context.Background())
	snaps := make(chan cluster.Snapshot, 100)
	done := make(chan error, 1)
	go func() {
		done <- New(r, o).Run(ctx, func(_ context.Context, s cluster.Snapshot) error {
			snaps <- s
			return nil
		})
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(reloadWait):
			t.Error("Run did not return after cancellation")
		}
	}()
	awaitNode := func(name string) bool {
		deadline := time.After(reloadWait)
		for {
			select {
			case s := <-snaps:
				if _, ok := s.Node(name); ok {
					return true
				}
			case <-deadline:
				return false
			}
		}
	}
	if !awaitNode("a") {
		t.Fatal("no snapshot with a's Node")
	}
	replace(t, path, reloadKubeconfig(b.URL, ""), true)
	if !awaitNode("bb") {
		t.Fatalf("no snapshot with the new server's Node within %v of the change", reloadWait)
	}
}

// TestReloadingBadKubeconfig: a kubeconfig replaced by one that does not
// build (half written, not YAML, empty) leaves the old client working and
// its watch open, is warned about once however many polls see it, and a
// good file after it is followed.
func TestReloadingBadKubeconfig(t *testing.T) {
	for _, tc := range []struct {
		name, data string
	}{
		{"empty", ""},
		{"not YAML", "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "},
		{"half written", halfWritten()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newFakeAPI(t, "a"), newFakeAPI(t, "b")
			path := filepath.Join(t.TempDir(), "kubeconfig")
			replace(t, path, reloadKubeconfig(a.URL, ""), false)
			r, l := startReloading(t, path)
			nodes := r.Nodes(AllNodes)
			w, _ := openWatch(t, nodes)

			// By rename: written in place, a poll may also see the file
			// empty between the truncation and the write, a second bad
			// file and a second warning (CI saw it).
			replace(t, path, tc.data, true)
			if !eventually(func() bool { _, warn := l.counts(); return warn > 0 }) {
				t.Fatal("no warning about the file that does not build")
			}
			// Many polls, each seeing the same bad file.
			time.Sleep(20 * reloadEvery)
			if info, warn := l.counts(); warn != 1 || info != 0 {
				t.Errorf("after many polls of the bad file: info %q, warn %q, want one warning", l.info, l.warn)
			}
			if !strings.Contains(l.warn[0], "keeping the previous client") {
				t.Errorf("warning %q does not say the old client stays", l.warn[0])
			}
			if got := listed(t, nodes); got != "a" {
				t.Errorf("listed from %s with the bad file, want a", got)
			}
			select {
			case _, ok := <-w.ResultChan():
				t.Fatalf("the watch on a ended (open %v) for a file that does not build", ok)
			default:
			}

			replace(t, path, reloadKubeconfig(b.URL, ""), true)
			if !closed(w) {
				t.Fatal("the watch on a still open after a good file named b")
			}
			if got := listed(t, nodes); got != "b" {
				t.Errorf("listed from %s after the good file, want b", got)
			}
		})
	}
}

// clientCert writes a self-signed client certificate for cn and its key
// to dir/client.crt and dir/client.key, each in place or by rename.
func clientCert(t *testing.T, dir, cn string, byRename bool) {
	t.Helper()
	life := time.Hour // the rotated one ("two") lives longer, as a renewed one does
	if cn == "two" {
		life = 2 * time.Hour
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(life),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	replace(t, filepath.Join(dir, "client.key"), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})), byRename)
	replace(t, filepath.Join(dir, "client.crt"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), byRename)
}

// TestReloadingRefChanged: a rotated credential in a file the kubeconfig
// names, the kubeconfig unchanged, is followed too. client-go re-reads a
// token file each minute and a certificate file each 5 minutes on its own:
// the waits here are far shorter.
func TestReloadingRefChanged(t *testing.T) {
	const (
		tokenUser = "tokenFile: token"
		certUser  = "client-certificate: client.crt, client-key: client.key"
	)
	for _, tc := range []struct {
		name   string
		user   string // the kubeconfig's user fields
		before string // what the server sees: "AUTHORIZATION CLIENT-CN"
		after  string
		rotate func(t *testing.T, dir string)
	}{
		{"token file rewritten in place", tokenUser, "Bearer one -", "Bearer two -", func(t *testing.T, dir string) {
			replace(t, filepath.Join(dir, "token"), "two\n", false)
		}},
		{"token file replaced by rename", tokenUser, "Bearer one -", "Bearer two -", func(t *testing.T, dir string) {
			replace(t, filepath.Join(dir, "token"), "two\n", true)
		}},
		{"token file swapped through a symlink (a Secret volume)", tokenUser, "Bearer one -", "Bearer two -", func(t *testing.T, dir string) {
			replace(t, filepath.Join(dir, "data2"), "two\n", false)
			if err := os.Symlink("data2", filepath.Join(dir, "token.new")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(dir, "token.new"), filepath.Join(dir, "token")); err != nil {
				t.Fatal(err)
			}
		}},
		{"another token file named", tokenUser, "Bearer one -", "Bearer two -", func(t *testing.T, dir string) {
			replace(t, filepath.Join(dir, "token2"), "two\n", false)
			data, err := os.ReadFile(filepath.Join(dir, "kubeconfig"))
			if err != nil {
				t.Fatal(err)
			}
			replace(t, filepath.Join(dir, "kubeconfig"), strings.Replace(string(data), "tokenFile: token", "tokenFile: token2", 1), true)
		}},
		{"client certificate and key rewritten in place", certUser, " one", " two", func(t *testing.T, dir string) {
			clientCert(t, dir, "two", false)
		}},
		{"client certificate and key replaced by rename", certUser, " one", " two", func(t *testing.T, dir string) {
			clientCert(t, dir, "two", true)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newFakeAPI(t, "a")
			dir := t.TempDir()
			replace(t, filepath.Join(dir, "token"), "one\n", false)
			clientCert(t, dir, "one", false)
			path := filepath.Join(dir, "kubeconfig")
			replace(t, path, reloadKubeconfig(a.URL, tc.user), false)
			r, _ := startReloading(t, path)
			nodes := r.Nodes(AllNodes)
			w, _ := openWatch(t, nodes)
			if reqs := a.requests(); reqs[len(reqs)-1] != "/api/v1/nodes "+tc.before {
				t.Fatalf("request %q, want the first credential (%q)", reqs[len(reqs)-1], tc.before)
			}

			certBefore := r.CertNotAfter()
			if isCert := tc.user == certUser; isCert == certBefore.IsZero() {
				t.Errorf("CertNotAfter %v with the user %q", certBefore, tc.user)
			}
			tc.rotate(t, dir)
			if !closed(w) {
				t.Fatal("the watch with the old credential still open")
			}
			if tc.user == certUser && !r.CertNotAfter().After(certBefore) {
				t.Errorf("CertNotAfter %v after the rotation, want the new certificate's (after %v)", r.CertNotAfter(), certBefore)
			}
			listed(t, nodes)
			if reqs := a.requests(); reqs[len(reqs)-1] != "/api/v1/nodes "+tc.after {
				t.Errorf("request %q after the rotation, want the new credential (%q)", reqs[len(reqs)-1], tc.after)
			}
		})
	}
}

// TestReloadingEmptyRef: a certificate or key the kubeconfig names, caught
// between its truncation and its write (an edit in place), keeps the
// previous client: built from it, the client had no credential at all
// (CertNotAfter still the old certificate's, every request anonymous until
// the next look), which TestReloadingRefChanged's in-place rotation hit.
func TestReloadingEmptyRef(t *testing.T) {
	for _, file := range []string{"client.key", "client.crt"} {
		t.Run(file, func(t *testing.T) {
			a := newFakeAPI(t, "a")
			dir := t.TempDir()
			clientCert(t, dir, "one", false)
			path := filepath.Join(dir, "kubeconfig")
			replace(t, path, reloadKubeconfig(a.URL, "client-certificate: client.crt, client-key: client.key"), false)
			r, l := startReloading(t, path)
			nodes := r.Nodes(AllNodes)
			listed(t, nodes)
			before := r.CertNotAfter()
			_, warnBefore := l.counts()

			replace(t, filepath.Join(dir, file), "", false)
			if !eventually(func() bool { _, w := l.counts(); return w > warnBefore }) {
				t.Fatalf("no warning about the empty %s", file)
			}
			l.mu.Lock()
			last := l.warn[len(l.warn)-1]
			l.mu.Unlock()
			if !strings.Contains(last, file+" is empty") || !strings.Contains(last, "keeping the previous client") {
				t.Errorf("warning %q, want it to name the empty %s and keep the previous client", last, file)
			}
			if got := r.CertNotAfter(); !got.Equal(before) {
				t.Errorf("CertNotAfter %v with an empty %s, want the previous client's %v", got, file, before)
			}
			listed(t, nodes)
			if reqs := a.requests(); reqs[len(reqs)-1] != "/api/v1/nodes  one" {
				t.Errorf("request %q with an empty %s, want the previous credential", reqs[len(reqs)-1], file)
			}

			clientCert(t, dir, "two", false)
			if !eventually(func() bool { return r.CertNotAfter().After(before) }) {
				t.Fatalf("CertNotAfter %v once both files are written, want the new certificate's", r.CertNotAfter())
			}
		})
	}
}

// halfWritten is a kubeconfig cut before its cluster: what a reader sees
// while a writer in place has written only its start.
func halfWritten() string {
	start, _, _ := strings.Cut(reloadKubeconfig("http://127.0.0.1:1", ""), "clusters:")
	return start
}

// TestReloadingCAChanged: a kubeconfig whose certificate-authority file
// holds the wrong CA (the cluster's was rotated, or written after the pod
// read the file) fails every request; the right CA written into the file
// later is used.
func TestReloadingCAChanged(t *testing.T) {
	a := newFakeAPI(t, "a")
	dir := t.TempDir()
	clientCert(t, dir, "not the server's CA", false)
	replace(t, filepath.Join(dir, "ca.crt"), mustRead(t, filepath.Join(dir, "client.crt")), false)
	path := filepath.Join(dir, "kubeconfig")
	replace(t, path, strings.Replace(reloadKubeconfig(a.URL, ""), "insecure-skip-tls-verify: true", "certificate-authority: ca.crt", 1), false)
	r, _ := startReloading(t, path)
	lister := cache.ToListerWatcherWithContext(r.Nodes(AllNodes))
	if _, err := lister.ListWithContext(context.Background(), metav1.ListOptions{}); err == nil {
		t.Fatal("List succeeded with the wrong CA")
	}

	replace(t, filepath.Join(dir, "ca.crt"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.Certificate().Raw})), true)
	if !eventually(func() bool {
		_, err := lister.ListWithContext(context.Background(), metav1.ListOptions{})
		return err == nil
	}) {
		t.Errorf("List still failing %v after the server's CA was written", reloadWait)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReloadingRunStops: Run returns when its context ends, leaving no
// poller behind.
func TestReloadingRunStops(t *testing.T) {
	a := newFakeAPI(t, "a")
	path := filepath.Join(t.TempDir(), "kubeconfig")
	replace(t, path, reloadKubeconfig(a.URL, ""), false)
	r, err := NewReloading(path, "test", t.Logf, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(reloadWait):
		t.Fatal("Run still running after its context ended")
	}
}

// TestReloadingFirstBuild: the first build's error is FromKubeconfig's, for
// WaitClient to retry.
func TestReloadingFirstBuild(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if _, err := NewReloading(path, "test", t.Logf, t.Logf); err == nil {
		t.Error("NewReloading of a missing file succeeded")
	}
	replace(t, path, "clusters: [", false)
	if _, err := NewReloading(path, "test", t.Logf, t.Logf); err == nil {
		t.Error("NewReloading of a bad file succeeded")
	}
}

// TestCertNotAfter: the expiry of a PEM bundle's first certificate, after
// any other block; none without a certificate.
func TestCertNotAfter(t *testing.T) {
	dir := t.TempDir()
	clientCert(t, dir, "one", false)
	crt, key := mustRead(t, filepath.Join(dir, "client.crt")), mustRead(t, filepath.Join(dir, "client.key"))
	b, _ := pem.Decode([]byte(crt))
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, data string
		want       time.Time
	}{
		{"certificate", crt, c.NotAfter},
		{"key block first", key + crt, c.NotAfter},
		{"key only", key, time.Time{}},
		{"not PEM", "token\n", time.Time{}},
		{"none", "", time.Time{}},
		{"a broken certificate", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", time.Time{}},
	} {
		if got := certNotAfter([]byte(tc.data)); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
