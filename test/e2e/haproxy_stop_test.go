//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/nodecfg"
	"github.com/infradns/infradns/internal/plugintest"
	"github.com/infradns/infradns/test/e2e/lab"
)

// TestHAProxyPodStop runs the haproxy container's own script, as
// render-node writes it, with the real haproxy on loopback, and stops it as
// kubelet does (SIGTERM): the stopping file lbconfig reads appears at once,
// haproxy keeps accepting on both ports while the VIP leaves, then stops
// softly, and a connection open through it is served to its end before
// haproxy exits on its own (status 0, well before the hard stop).
func TestHAProxyPodStop(t *testing.T) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Fatalf("haproxy is not installed (hack/install-deps.sh installs it): %v", err)
	}
	// The manifest as render-node writes it.
	root, dir := t.TempDir(), t.TempDir()
	clusterFile := filepath.Join(dir, "cluster.yaml")
	writeFile(t, clusterFile, fmt.Sprintf("cluster: hastop\ndomain: %s\napiVIPs: [192.0.2.5]\ningressVIPs: [192.0.2.10]\ninterface: eth0\nimage: %s\napiServers: [192.0.2.11:6443]\nkubeconfig: /etc/kubernetes/infradns/kubeconfig\n", domain, klImage))
	if out, err := exec.Command(lab.Binary(t, "infradns"), "render-node", "-f", clusterFile, "-role", nodecfg.ControlPlane, "-node", "n0", "-o", root).CombinedOutput(); err != nil {
		t.Fatalf("render-node: %v\n%s", err, out)
	}
	pod := readManifests(t, root)["infradns-haproxy"]
	if pod == nil || len(pod.Spec.Containers) != 1 {
		t.Fatalf("no haproxy pod with one container among the manifests")
	}
	argv := append(pod.Spec.Containers[0].Command, pod.Spec.Containers[0].Args...)
	if len(argv) != 3 || argv[0] != "/bin/sh" || argv[1] != "-c" {
		t.Fatalf("haproxy container's command %q: want /bin/sh -c SCRIPT", argv)
	}
	// The node's paths moved into the test's directory, nothing else.
	run := filepath.Join(dir, "run")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "haproxy.cfg")
	script := strings.NewReplacer(nodecfg.LBDir+"/haproxy.cfg", cfg, nodecfg.HAProxyRunDir, run).Replace(argv[2])
	if strings.Contains(script, "/etc/infradns") || strings.Contains(script, nodecfg.HAProxyRunDir) {
		t.Fatalf("the script names paths this test does not move:\n%s", script)
	}

	// A backend that echoes lines, behind the API frontend.
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	lbPort, healthPort := plugintest.FreePort(t, "tcp"), plugintest.FreePort(t, "tcp")
	writeFile(t, cfg, fmt.Sprintf(`global
    master-worker
    hard-stop-after 5m
defaults
    mode tcp
    timeout connect 300ms
    timeout client 1m
    timeout server 1m
frontend api_health
    mode http
    bind 127.0.0.1:%d
    monitor-uri /haproxy_ready
frontend api
    bind 127.0.0.1:%d
    default_backend api
backend api
    server s1 %s
`, healthPort, lbPort, backend.Addr()))

	sh := exec.Command("/bin/sh", "-c", script)
	logf, err := os.Create(filepath.Join(dir, "haproxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	sh.Stdout, sh.Stderr = logf, logf
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- sh.Wait() }()
	t.Cleanup(func() {
		_ = sh.Process.Kill()
		// haproxy is the script's child: the pid namespace of a real pod
		// would take it along.
		_ = exec.Command("pkill", "-f", "haproxy -W -db -f "+cfg).Run()
	})
	accepts := func(port int) bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	lab.Eventually(t, 10*time.Second, 50*time.Millisecond, "haproxy listens", func() error {
		if !accepts(lbPort) || !accepts(healthPort) {
			return fmt.Errorf("ports %d/%d not both open\n%s", lbPort, healthPort, mustRead(t, logf.Name()))
		}
		return nil
	})
	held, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", lbPort))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	echo := func(msg string) error {
		if err := held.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
			return err
		}
		if _, err := fmt.Fprintln(held, msg); err != nil {
			return err
		}
		got, err := bufio.NewReader(held).ReadString('\n')
		if err == nil && got != msg+"\n" {
			err = fmt.Errorf("echo %q, want %q", got, msg)
		}
		return err
	}
	if err := echo("before"); err != nil {
		t.Fatal(err)
	}

	stopping := filepath.Join(run, lb.HAProxyStopping)
	if _, err := os.Stat(stopping); err == nil {
		t.Fatalf("%s exists before the stop", stopping)
	}
	if err := sh.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	lab.Eventually(t, 2*time.Second, 10*time.Millisecond, "the stopping file", func() error {
		_, err := os.Stat(stopping)
		return err
	})
	t.Logf("stopping file %v after SIGTERM", time.Since(stopped).Round(time.Millisecond))
	// While lbconfig moves the VIP away (it reads the file within 100 ms),
	// haproxy still serves: new connections and the open one.
	time.Sleep(time.Second - time.Since(stopped))
	if !accepts(lbPort) || !accepts(healthPort) {
		t.Errorf("a port closed within 1 s of SIGTERM: the VIP may still be here")
	}
	// Then the soft stop: nothing new accepted, the open connection served.
	lab.Eventually(t, 3*time.Second, 50*time.Millisecond, "the listeners closed (soft stop)", func() error {
		if accepts(lbPort) {
			return fmt.Errorf("port %d still accepts", lbPort)
		}
		return nil
	})
	closed := time.Since(stopped)
	if err := echo("after the soft stop"); err != nil {
		t.Errorf("the connection open through haproxy, after its soft stop: %v", err)
	}
	select {
	case err := <-exited:
		t.Fatalf("the script ended with a connection still open: %v\n%s", err, mustRead(t, logf.Name()))
	default:
	}
	held.Close()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("the script after the soft stop: %v\n%s", err, mustRead(t, logf.Name()))
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("haproxy did not exit within 5 s of its last connection's end\n%s", mustRead(t, logf.Name()))
	}
	t.Logf("SIGTERM: stopping file at once, listeners open %v, the open connection served after that, exit 0 %v after SIGTERM once it closed",
		closed.Round(10*time.Millisecond), time.Since(stopped).Round(10*time.Millisecond))
}
