package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/lb/netnstest"
)

// TestScanFindsForeignRouter runs a real keepalived of "another cluster" with
// VRID 14 (the API ID of cluster ostest) for 192.0.2.77 in one namespace and
// vrrp-scan for ostest with API VIP 192.0.2.5 in the other: the scan must
// name the clash and fail, as it would before installing ostest on that LAN.
func TestScanFindsForeignRouter(t *testing.T) {
	if _, err := exec.LookPath("keepalived"); err != nil {
		t.Fatalf("keepalived not found (run hack/install-deps.sh as root): %v", err)
	}
	router, scanner := netnstest.Pair(t, "scan")
	dir := t.TempDir()
	conf := filepath.Join(dir, "keepalived.conf")
	if err := writeFile(conf, `global_defs {
    vrrp_version 3
}
vrrp_instance other_cluster {
    state BACKUP
    interface eth0
    virtual_router_id 14
    priority 100
    advert_int 0.1
    virtual_ipaddress {
        192.0.2.77/32
    }
}
`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", router, "keepalived", "-n", "-l", "-D", "-f", conf,
		"-p", filepath.Join(dir, "k.pid"), "-r", filepath.Join(dir, "v.pid"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()

	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := netnstest.Enter(scanner); err != nil {
			done <- err
			return
		}
		done <- run(ctx, []string{"vrrp-scan", "-interface", "eth0", "-cluster", "ostest", "-api-vip", "192.0.2.5", "-duration", "2s"}, &out)
	}()
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "foreign-addresses") {
		t.Errorf("Scan error = %v, want a foreign-addresses conflict", err)
	}
	if !strings.Contains(out.String(), "CONFLICT foreign-addresses: instance ostest_api_v4: router 198.51.100.11 uses vrid 14 for [192.0.2.77]") {
		t.Errorf("Scan output:\n%s", out.String())
	}
}
