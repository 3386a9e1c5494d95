// Package kubetest runs a real etcd and a real kube-apiserver for tests,
// built from the Go module proxy by test/kubeapi/build.sh and cached between
// runs. Everything listens on loopback (or a chosen address, for example
// inside a lab network namespace), keeps its data in t.TempDir() and is
// killed in t.Cleanup, even when the test fails.
package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ReadyTimeout bounds the wait for etcd's /health and the apiserver's /readyz.
const ReadyTimeout = 30 * time.Second

// Options change how the cluster is started; the zero value is loopback.
type Options struct {
	// BindAddress is where etcd and the apiserver listen; default 127.0.0.1.
	BindAddress string
	// Wrap is prepended to each command, e.g. []string{"ip", "netns",
	// "exec", "ns1"}; it must exec the command so the process group is the
	// one we kill.
	Wrap []string
	// Dial, if set, is used by the readiness probes and the client (for an
	// address only reachable through a namespace).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Listen, if set, is how free ports on BindAddress are found (for an
	// address that only exists inside a namespace).
	Listen func(network, addr string) (net.Listener, error)
	// EndpointReconciler keeps the apiserver's own default/kubernetes
	// EndpointSlice; off by default so tests own that service's slices.
	EndpointReconciler bool
	// ExtraAPIServerArgs are appended to the apiserver's flags.
	ExtraAPIServerArgs []string
}

// Cluster is a running etcd + kube-apiserver.
type Cluster struct {
	// Client talks to the apiserver as a member of system:masters.
	Client kubernetes.Interface
	// Config is the rest.Config behind Client.
	Config *rest.Config
	// Kubeconfig is a kubeconfig file for the same identity.
	Kubeconfig string
	// URL is the apiserver's https URL; Token its bearer token.
	URL, Token string
	// Dir holds data, certificates and logs.
	Dir string

	t       testing.TB
	opts    Options
	bin     string
	apiArgs []string

	mu        sync.Mutex
	etcd      *proc
	apiserver *proc
}

// Start starts etcd and the apiserver on loopback and waits for /readyz.
func Start(t testing.TB) *Cluster { return StartWith(t, Options{}) }

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.BindAddress == "" {
		o.BindAddress = "127.0.0.1"
	}
	bin := Binaries(t)
	dir := t.TempDir()
	c := &Cluster{t: t, opts: o, bin: bin, Dir: dir}
	t.Cleanup(c.cleanup)

	listen := o.Listen
	if listen == nil {
		listen = net.Listen
	}
	etcdClient := freePort(t, listen, o.BindAddress)
	etcdPeer := freePort(t, listen, o.BindAddress)
	apiPort := freePort(t, listen, o.BindAddress)
	host := o.BindAddress
	clientURL := "http://" + net.JoinHostPort(host, strconv.Itoa(etcdClient))
	peerURL := "http://" + net.JoinHostPort(host, strconv.Itoa(etcdPeer))

	began := time.Now()
	c.etcd = c.spawn("etcd", filepath.Join(bin, "etcd"),
		"--name=default",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL,
		// Durability is pointless for a throw-away store and fsync on a
		// shared build machine makes start-up and writes slow.
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	if err := c.waitHTTP(clientURL+"/health", "", func(b []byte) bool {
		return bytes.Contains(b, []byte(`"health":"true"`))
	}); err != nil {
		t.Fatalf("kubetest: etcd not healthy: %v", err)
	}
	t.Logf("kubetest: etcd healthy after %v", time.Since(began).Round(time.Millisecond))

	c.Token = randomHex(t)
	tokens := filepath.Join(dir, "tokens.csv")
	writeFile(t, tokens, []byte(c.Token+`,admin,admin-uid,"system:masters"`+"\n"))
	saKey, saPub := serviceAccountKeys(t, dir)
	reconciler := "none"
	if o.EndpointReconciler {
		reconciler = "lease"
	}
	c.URL = "https://" + net.JoinHostPort(host, strconv.Itoa(apiPort))
	c.apiArgs = append([]string{
		"--etcd-servers=" + clientURL,
		"--bind-address=" + host,
		"--advertise-address=" + host,
		"--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + saPub,
		"--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.96.0.0/24",
		"--endpoint-reconciler-type=" + reconciler,
		"--allow-privileged=true",
		// On SIGTERM, end open watches within 2 s (clients see the stream
		// close, as at any apiserver restart). Without it the apiserver's
		// HTTP shutdown waits for watches that never end, and every Stop
		// with a client watching took kubetest's full 10 s before SIGKILL.
		"--shutdown-watch-termination-grace-period=2s",
	}, o.ExtraAPIServerArgs...)

	c.Config = &rest.Config{
		Host:            c.URL,
		BearerToken:     c.Token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             100,
		Burst:           200,
	}
	if o.Dial != nil {
		c.Config.Dial = o.Dial
	}
	c.startAPIServer()
	t.Logf("kubetest: kube-apiserver ready at %s after %v", c.URL, time.Since(began).Round(time.Millisecond))

	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatalf("kubetest: client: %v", err)
	}
	c.Client = cs
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	writeFile(t, c.Kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubetest
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: kubetest
  context:
    cluster: kubetest
    user: admin
current-context: kubetest
`, c.URL, c.Token)))
	return c
}

func (c *Cluster) startAPIServer() {
	c.t.Helper()
	p := c.spawn("kube-apiserver", filepath.Join(c.bin, "kube-apiserver"), c.apiArgs...)
	c.mu.Lock()
	c.apiserver = p
	c.mu.Unlock()
	if err := c.waitHTTP(c.URL+"/readyz", c.Token, func(b []byte) bool {
		return bytes.Equal(bytes.TrimSpace(b), []byte("ok"))
	}); err != nil {
		c.t.Fatalf("kubetest: kube-apiserver not ready: %v", err)
	}
}

// Stop stops the apiserver alone (etcd keeps the data); clients see the API
// as unreachable until Restart.
func (c *Cluster) Stop() {
	c.mu.Lock()
	p := c.apiserver
	c.apiserver = nil
	c.mu.Unlock()
	if p != nil {
		t0 := time.Now()
		p.stop()
		c.t.Logf("kubetest: kube-apiserver stopped in %s", time.Since(t0).Round(time.Millisecond))
	}
}

// Restart starts the apiserver again on the same address and waits for
// /readyz.
func (c *Cluster) Restart() {
	c.t.Helper()
	c.Stop()
	c.startAPIServer()
}

// StopFor makes the API unreachable for d, then brings it back.
func (c *Cluster) StopFor(d time.Duration) {
	c.t.Helper()
	c.Stop()
	time.Sleep(d)
	c.startAPIServer()
}

// PIDs returns the process ids of etcd and the apiserver (0 when stopped),
// for measuring their memory.
func (c *Cluster) PIDs() (etcd, apiserver int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.etcd != nil {
		etcd = c.etcd.cmd.Process.Pid
	}
	if c.apiserver != nil {
		apiserver = c.apiserver.cmd.Process.Pid
	}
	return etcd, apiserver
}

func (c *Cluster) cleanup() {
	c.Stop()
	c.mu.Lock()
	e := c.etcd
	c.etcd = nil
	c.mu.Unlock()
	if e != nil {
		e.stop()
	}
	if c.t.Failed() {
		for _, name := range []string{"etcd", "kube-apiserver"} {
			c.t.Logf("kubetest: last lines of %s.log:\n%s", name, tail(filepath.Join(c.Dir, name+".log"), 40))
		}
	}
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

func (c *Cluster) spawn(name, path string, args ...string) *proc {
	c.t.Helper()
	logf, err := os.OpenFile(filepath.Join(c.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatalf("kubetest: %v", err)
	}
	argv := append(append(append([]string{}, c.opts.Wrap...), path), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group: cleanup kills everything the command started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		c.t.Fatalf("kubetest: start %s: %v", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), log: logf}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p
}

func (p *proc) stop() {
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Children that ignored SIGTERM in the group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	p.log.Close()
}

func (c *Cluster) waitHTTP(url, token string, ok func([]byte) bool) error {
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // self-signed test apiserver
	if c.opts.Dial != nil {
		tr.DialContext = c.opts.Dial
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	deadline := time.Now().Add(ReadyTimeout)
	var last error
	for time.Now().Before(deadline) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("probe %s: %w", url, err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err == nil {
			b, _ := readAll(resp)
			if resp.StatusCode == http.StatusOK && ok(b) {
				return nil
			}
			last = fmt.Errorf("%s: %s: %.200s", url, resp.Status, b)
		} else {
			last = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last == nil {
		last = errors.New("no attempt")
	}
	return fmt.Errorf("not ready within %v: %w", ReadyTimeout, last)
}

func readAll(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err := b.ReadFrom(resp.Body)
	return b.Bytes(), err
}

// Binaries returns the directory holding kube-apiserver and etcd, building
// them with test/kubeapi/build.sh when the cache is cold. INFRADNS_KUBE_BIN
// names a ready directory instead. A missing toolchain or a failed build
// fails the test: the integration tests must never skip silently.
func Binaries(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("INFRADNS_KUBE_BIN"); d != "" {
		for _, b := range []string{"etcd", "kube-apiserver"} {
			if _, err := os.Stat(filepath.Join(d, b)); err != nil {
				t.Fatalf("kubetest: INFRADNS_KUBE_BIN: %v", err)
			}
		}
		return d
	}
	script, err := buildScript()
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	began := time.Now()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubetest: %s failed: %v\n%s%s", script, err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	dir := lines[len(lines)-1]
	t.Logf("kubetest: binaries in %s (ensured in %v)", dir, time.Since(began).Round(time.Millisecond))
	return dir
}

// buildScript finds test/kubeapi/build.sh above the working directory (go
// test runs in the package directory).
func buildScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getwd: %w", err)
	}
	for {
		p := filepath.Join(dir, "test", "kubeapi", "build.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("test/kubeapi/build.sh not found above the working directory")
		}
		dir = parent
	}
}

func freePort(t testing.TB, listen func(network, addr string) (net.Listener, error), host string) int {
	t.Helper()
	l, err := listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("kubetest: free port on %s: %v", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func randomHex(t testing.TB) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	return hex.EncodeToString(b)
}

func serviceAccountKeys(t testing.TB, dir string) (key, pub string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("kubetest: service-account key: %v", err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatalf("kubetest: service-account key: %v", err)
	}
	key, pub = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	writeFile(t, key, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
	writeFile(t, pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	return key, pub
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// RSS returns the resident set size of pid in bytes, from /proc.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("rss: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("rss: %w", err)
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("rss: no VmRSS line")
}
