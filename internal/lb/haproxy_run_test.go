package lb

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHAProxyRunsRendered starts the real haproxy on the rendered file in a
// namespace made for the test: `haproxy -c` does not catch everything (a
// global maxconn 20000 passed -c, then haproxy refused to start under a
// 20000 descriptor limit). The health frontend must answer, with 503 while
// no backend is up.
func TestHAProxyRunsRendered(t *testing.T) {
	tools := labTools(t)
	ns := tools.Wrap[len(tools.Wrap)-1]
	p, err := Desired(snap(3, false), config(false))
	if err != nil {
		t.Fatal(err)
	}
	h, err := RenderHAProxy(p)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "haproxy.cfg")
	writeTestFile(t, cfg, string(h))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, "haproxy", "-W", "-db", "-f", cfg, "-S", filepath.Join(dir, "master.sock"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("haproxy output:\n%s", out.String())
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("haproxy exited: %v", err)
		default:
		}
		code, _ := exec.Command("ip", "netns", "exec", ns, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
			"-m", "1", "http://127.0.0.1:9454/haproxy_ready").Output()
		if string(code) == "503" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Health frontend answered %q, want 503 (no apiserver up)", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
