package lb

import (
	"os/exec"
	"path/filepath"
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
	exited := startHAProxy(t, []string{"ip", "netns", "exec", ns}, cfg, filepath.Join(dir, "master.sock"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
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
