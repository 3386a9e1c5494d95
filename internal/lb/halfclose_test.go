package lb

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHAProxyHalfClosedSoftStop runs the rendered haproxy.cfg with the real
// haproxy: a connection whose server has closed and whose client's FIN
// never comes (the client gone with its host, or its packets sent to
// another node by an ECMP fabric's rehash) must not hold a soft stop for
// the tunnel's 24 h. It held a BGP lab node's haproxy 10 s and more after
// an upgrade's soft stop before "timeout client-fin".
func TestHAProxyHalfClosedSoftStop(t *testing.T) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Fatalf("haproxy not found (run hack/install-deps.sh as root): %v", err)
	}
	// The apiserver: /readyz for haproxy's checks, /bye answered and the
	// connection closed by the server.
	api := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bye" {
			w.Header().Set("Connection", "close")
		}
		fmt.Fprintln(w, "ok")
	}))
	api.StartTLS()
	defer api.Close()
	backend := netip.MustParseAddrPort(strings.TrimPrefix(api.URL, "https://"))

	s := spec(false)
	s.LBPort, s.HealthPort = uint16(freePort(t)), uint16(freePort(t))
	// The plan refuses loopback servers (a node's apiserver is never one):
	// rendered with a node's, which then points at the test's.
	p, err := Desired(Snapshot{Nodes: []Node{{Name: "master-0", ControlPlane: true, Addresses: ips("198.51.100.11")}},
		APIServers: []netip.AddrPort{ap("198.51.100.11:6443")}}, mustModel(s))
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := RenderHAProxy(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rendered), " 198.51.100.11:6443 ") {
		t.Fatalf("the rendered config has no server 198.51.100.11:6443:\n%s", rendered)
	}
	cfg := strings.ReplaceAll(string(rendered), " 198.51.100.11:6443 ", " "+backend.String()+" ")
	dir := t.TempDir()
	path := filepath.Join(dir, "haproxy.cfg")
	writeTestFile(t, path, cfg)
	exited := startHAProxy(t, nil, path, filepath.Join(dir, "master.sock"))

	// The client: a request answered, the server's close seen (EOF), and
	// its own FIN never sent.
	var conn *tls.Conn
	waitFor(t, func() (string, bool) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", s.LBPort), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return err.Error(), false
		}
		conn = c
		return "", true
	})
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /bye HTTP/1.1\r\nHost: api\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the request through haproxy: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		t.Fatalf("through haproxy: %s %q", resp.Status, body)
	}

	// haproxy's soft stop (what its pod's preStop sends the master): it
	// ends once its connections have.
	var pid int
	waitFor(t, func() (string, bool) {
		out, err := masterQuery(filepath.Join(dir, "master.sock"), "show proc")
		if err != nil {
			return err.Error(), false
		}
		pid, _ = strconv.Atoi(procPID(out, "master"))
		return out, pid != 0
	})
	stopped := time.Now()
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		t.Logf("haproxy exited %v after its soft stop with a half-closed connection (%v)", time.Since(stopped).Round(10*time.Millisecond), err)
		if err != nil {
			t.Errorf("haproxy's exit after a soft stop: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("haproxy still runs 10 s after its soft stop: a half-closed connection holds it (timeout client-fin)")
	}
}
