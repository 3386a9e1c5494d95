package kube

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ReloadInterval is how often a Reloading client looks at its files.
const ReloadInterval = 2 * time.Second

// reloadEvery is ReloadInterval; tests shorten it.
var reloadEvery = ReloadInterval

// Reloading is the Client of a kubeconfig file that follows the file. A
// client built once keeps what the file said at that moment for the life of
// the process: a pod that read it while an operator was still editing it
// (the server address before the sed) calls the wrong server forever, and a
// rotated certificate, key, token or CA is never seen. client-go re-reads a
// token file (each minute) and certificate files (each 5 minutes) on its
// own, never the server or the kubeconfig. So Reloading builds a new client
// when the file or a file it names changes, and ends the watches of the old
// one.
//
// Run does the looking; without it, Reloading is the client of the file as
// it was when NewReloading read it.
type Reloading struct {
	path, userAgent string
	info, warn      func(format string, args ...any)
	cur             atomic.Pointer[generation]

	// Only Run touches these.
	seen    [sha256.Size]byte // the files' state at the last build, good or bad
	lastErr string            // the last build error warned about
}

// NewReloading builds the client of the kubeconfig at path (see
// FromKubeconfig), or says why it cannot. info hears that the
// client was rebuilt, warn that a changed file does not build (once per
// distinct error).
func NewReloading(path, userAgent string, info, warn func(format string, args ...any)) (*Reloading, error) {
	r := &Reloading{path: path, userAgent: userAgent, info: info, warn: warn}
	sum := r.fingerprint()
	c, err := r.build()
	if err != nil {
		return nil, err
	}
	r.seen = sum
	r.cur.Store(newGeneration(c))
	return r, nil
}

// CertNotAfter is when the current client certificate expires; zero when
// the identity is no certificate (a token) or it cannot be read.
func (r *Reloading) CertNotAfter() time.Time { return r.cur.Load().notAfter }

// CertExpirySeconds is r's CertNotAfter as a metric's value: Unix seconds,
// 0 for no certificate (r nil included): an alert on expiry ignores 0.
func CertExpirySeconds(r *Reloading) float64 {
	if r == nil {
		return 0
	}
	t := r.CertNotAfter()
	if t.IsZero() {
		return 0
	}
	return float64(t.Unix())
}

// Run looks at the files every ReloadInterval until ctx ends, and returns
// then.
func (r *Reloading) Run(ctx context.Context) {
	t := time.NewTicker(reloadEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.check()
		}
	}
}

// Follow runs the poller of c when it is a Reloading (a kubeconfig's
// client; in-cluster and test clients have none) until ctx ends; the
// returned func waits for it.
func Follow(ctx context.Context, c Client) (wait func()) {
	r, ok := c.(*Reloading)
	if !ok {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	return func() { <-done }
}

// check rebuilds the client when the files changed since the last build.
// A build that fails is not retried until they change again: what it read
// is all it depends on.
func (r *Reloading) check() {
	sum := r.fingerprint()
	if sum == r.seen {
		return
	}
	// Fingerprinted before the build: a change between the two leaves a
	// fingerprint that differs at the next look, so it is built again
	// rather than missed.
	r.seen = sum
	c, err := r.build()
	if err != nil {
		if msg := err.Error(); msg != r.lastErr {
			r.warn("kubeconfig %s changed and does not build, keeping the previous client: %v", r.path, err)
			r.lastErr = msg
		}
		return
	}
	r.lastErr = ""
	old := r.cur.Swap(newGeneration(c))
	old.retire()
	r.info("kubeconfig %s changed: client rebuilt", r.path)
}

// build is FromKubeconfig with the files the kubeconfig names read into
// the client's configuration. client-go shares one transport, and its
// pooled connections, between the clients whose certificate files have the
// same names, and reads a changed certificate only every 5 minutes: a
// rebuilt client would go on presenting the old one over the old
// connections. With the contents in the configuration, a changed
// certificate, key or CA makes a transport of its own.
func (r *Reloading) build() (builtClient, error) {
	rc, err := kubeconfigConfig(r.path, r.userAgent)
	if err != nil {
		return builtClient{}, err
	}
	tc := &rc.TLSClientConfig
	for _, f := range []struct {
		file *string
		data *[]byte
	}{{&tc.CAFile, &tc.CAData}, {&tc.CertFile, &tc.CertData}, {&tc.KeyFile, &tc.KeyData}} {
		if *f.file == "" || len(*f.data) > 0 {
			continue
		}
		b, err := os.ReadFile(*f.file)
		if err != nil {
			return builtClient{}, fmt.Errorf("kubeconfig %s: %w", r.path, err)
		}
		if len(bytes.TrimSpace(b)) == 0 {
			// A file rewritten in place is empty between its truncation
			// and its write. An empty key with the file's name cleared
			// built a client with no credential at all (a unit test's
			// rotation caught it between the key and the certificate);
			// the next look, once it is written, builds the right one.
			return builtClient{}, fmt.Errorf("kubeconfig %s: %s is empty", r.path, *f.file)
		}
		*f.file, *f.data = "", b
	}
	c, err := NewForConfig(rc)
	return builtClient{c, certNotAfter(tc.CertData)}, err
}

// builtClient is a client and when its certificate expires.
type builtClient struct {
	Client
	notAfter time.Time
}

// certNotAfter is the expiry of the first certificate of a PEM bundle (the
// client's own; intermediates follow it), zero without one.
func certNotAfter(pemData []byte) time.Time {
	for len(pemData) > 0 {
		var b *pem.Block
		b, pemData = pem.Decode(pemData)
		if b == nil {
			return time.Time{}
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return time.Time{}
		}
		return c.NotAfter
	}
	return time.Time{}
}

// fingerprint hashes the contents of the kubeconfig and of the files its
// current context names, or why each cannot be read. Contents, not stat:
// these are a few small files read every two seconds, and a Secret or
// ConfigMap volume swaps its files through a symlink, while an edit in
// place can keep the size and (within the clock's granularity) the mtime.
func (r *Reloading) fingerprint() [sha256.Size]byte {
	h := sha256.New()
	add := func(p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			b = []byte("error: " + err.Error())
		}
		_ = binary.Write(h, binary.BigEndian, uint64(len(p)))
		h.Write([]byte(p))
		_ = binary.Write(h, binary.BigEndian, uint64(len(b)))
		h.Write(b)
	}
	add(r.path)
	if data, err := os.ReadFile(r.path); err == nil {
		refs, _ := KubeconfigRefs(data) // a file that does not parse is in the hash already
		dir := filepath.Dir(r.path)
		for _, ref := range refs {
			p := ref.Path
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			add(p)
		}
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

func (r *Reloading) Nodes(sel NodeSelector) cache.ListerWatcher {
	return r.listWatch(func(c Client) cache.ListerWatcher { return c.Nodes(sel) })
}

func (r *Reloading) EndpointSlices(namespace, labelSelector string) cache.ListerWatcher {
	return r.listWatch(func(c Client) cache.ListerWatcher { return c.EndpointSlices(namespace, labelSelector) })
}

func (r *Reloading) Services() cache.ListerWatcher {
	return r.listWatch(func(c Client) cache.ListerWatcher { return c.Services() })
}

func (r *Reloading) ConfigMap(namespace, name string) cache.ListerWatcher {
	return r.listWatch(func(c Client) cache.ListerWatcher { return c.ConfigMap(namespace, name) })
}

func (r *Reloading) PatchServiceStatus(ctx context.Context, namespace, name string, patch []byte) error {
	return r.cur.Load().client.PatchServiceStatus(ctx, namespace, name, patch)
}

func (r *Reloading) CreateEvent(ctx context.Context, ev *corev1.Event) error {
	return r.cur.Load().client.CreateEvent(ctx, ev)
}

// listWatch asks the current client at each call: a reflector keeps its
// ListerWatcher for its life.
func (r *Reloading) listWatch(of func(Client) cache.ListerWatcher) cache.ListerWatcher {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return cache.ToListerWatcherWithContext(of(r.cur.Load().client)).ListWithContext(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			g := r.cur.Load()
			w, err := cache.ToListerWatcherWithContext(of(g.client)).WatchWithContext(ctx, o)
			if err != nil {
				return nil, err
			}
			return g.track(w), nil
		},
	}
}

func (r *Reloading) Leases(namespace string) LeaseClient {
	return reloadingLeases{r: r, ns: namespace}
}

// reloadingLeases asks the current client at each call: HolderLease and
// the status code keep a LeaseClient across renewals.
type reloadingLeases struct {
	r  *Reloading
	ns string
}

func (l reloadingLeases) leases() LeaseClient { return l.r.cur.Load().client.Leases(l.ns) }

func (l reloadingLeases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	return l.leases().Get(ctx, name, opts)
}

func (l reloadingLeases) Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	return l.leases().Create(ctx, lease, opts)
}

func (l reloadingLeases) Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	return l.leases().Update(ctx, lease, opts)
}

func (l reloadingLeases) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	return l.leases().List(ctx, opts)
}

// generation is one client of a Reloading and the watches opened through
// it, which end when a newer client replaces it: a watch lasts minutes, and
// until it ends its reflector keeps the old server and identity. The
// reflector watches (or lists) again at once, through the new client.
type generation struct {
	client   Client
	notAfter time.Time // the client certificate's expiry (zero: none)
	mu       sync.Mutex
	watches  map[*trackedWatch]struct{}
	retired  bool
}

func newGeneration(c builtClient) *generation {
	return &generation{client: c.Client, notAfter: c.notAfter, watches: map[*trackedWatch]struct{}{}}
}

func (g *generation) track(w watch.Interface) watch.Interface {
	t := &trackedWatch{Interface: w, g: g}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.retired {
		// Opened through the old client while it was being replaced.
		w.Stop()
		return t
	}
	g.watches[t] = struct{}{}
	return t
}

func (g *generation) retire() {
	g.mu.Lock()
	g.retired = true
	ws := g.watches
	g.watches = nil
	g.mu.Unlock()
	for w := range ws {
		w.Interface.Stop()
	}
}

// trackedWatch forgets itself when its reflector stops it.
type trackedWatch struct {
	watch.Interface
	g *generation
}

func (w *trackedWatch) Stop() {
	w.g.mu.Lock()
	delete(w.g.watches, w)
	w.g.mu.Unlock()
	w.Interface.Stop()
}
