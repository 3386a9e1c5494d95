package lb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/atomicfile"
	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lb/netnstest"
)

// labTools returns Tools that run keepalived and haproxy inside a network
// namespace made for the test, holding an eth0 (keepalived -t checks that the
// interface exists), so the result does not depend on the host's links.
func labTools(t testing.TB) Tools {
	t.Helper()
	for _, tool := range []string{"keepalived", "haproxy"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (run hack/install-deps.sh as root): %v", tool, err)
		}
	}
	ns := netnstest.New(t, "lb")
	return Tools{Wrap: []string{"ip", "netns", "exec", ns}, Dir: t.TempDir(), Timeout: 3 * time.Second}
}

func TestValidateGoldenWithRealTools(t *testing.T) {
	tools := labTools(t)
	ctx := context.Background()
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []struct {
				kind Kind
				file string
			}{{Keepalived, ".keepalived.conf.golden"}, {HAProxyCfg, ".haproxy.cfg.golden"}} {
				b, err := os.ReadFile(filepath.Join("testdata", tc.name+k.file))
				if err != nil {
					t.Fatal(err)
				}
				if err := tools.Validate(ctx, k.kind, b); err != nil {
					t.Errorf("%s rejects %s: %v", k.kind, tc.name, err)
				}
			}
		})
	}
}

// TestValidateManyServiceAddresses: one Services group holding 200 IPv4
// and 200 IPv6 addresses is one instance per family that keepalived -t
// accepts: the first address in its adverts, the others excluded. The
// same addresses all in virtual_ipaddress it refuses (keepalived 2.2.7:
// 89 IPv6 addresses fit an advert at MTU 1500): why they are excluded.
func TestValidateManyServiceAddresses(t *testing.T) {
	tools := labTools(t)
	var svcs []cluster.LBService
	for i := range 200 {
		svcs = append(svcs, clusterService(fmt.Sprintf("shop/web-%d", i),
			fmt.Sprintf("198.18.%d.%d", i/250, i%250+1), fmt.Sprintf("2001:db8:5::%x", i+1)))
	}
	s := snap(3, false)
	s.Services = svcs
	p, err := Desired(s, withServices(spec(false), cluster.ServicesVRRP{Groups: 1}))
	if err != nil {
		t.Fatal(err)
	}
	var svc []Instance
	for _, in := range p.Instances {
		if in.VRID == p.Groups[len(p.Groups)-1].VRID {
			svc = append(svc, in)
		}
	}
	if len(svc) != 2 || len(svc[0].VIPs) != 1 || len(svc[0].Excluded) != 199 || len(svc[1].VIPs) != 1 || len(svc[1].Excluded) != 199 {
		t.Fatalf("Services instances: %d, want one per family with 1 advertised and 199 excluded addresses each", len(svc))
	}
	k, err := RenderKeepalived(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := tools.Validate(context.Background(), Keepalived, k); err != nil {
		t.Errorf("keepalived rejects 200+200 Services addresses: %v", err)
	}
	for i := range p.Instances {
		in := &p.Instances[i]
		in.VIPs, in.Excluded = append(in.VIPs, in.Excluded...), nil
	}
	all, err := RenderKeepalived(p)
	if err != nil {
		t.Fatal(err)
	}
	var ve *ValidationError
	if err := tools.Validate(context.Background(), Keepalived, all); !errors.As(err, &ve) || !strings.Contains(ve.Output, "exceeds maximum/space") {
		t.Errorf("200 IPv6 addresses in one advert: %v, want keepalived to refuse them", err)
	}
}

// TestValidateRejectsBroken breaks a good render in ways a template or plan
// bug could, checks the real tool refuses each one, and that the validate →
// write step then leaves the good file in place.
func TestValidateRejectsBroken(t *testing.T) {
	tools := labTools(t)
	ctx := context.Background()
	p, err := Desired(snap(3, false), config(false))
	if err != nil {
		t.Fatal(err)
	}
	goodK, _ := RenderKeepalived(p)
	goodH, _ := RenderHAProxy(p)
	dir := t.TempDir()
	live := map[Kind]string{Keepalived: filepath.Join(dir, "keepalived.conf"), HAProxyCfg: filepath.Join(dir, "haproxy.cfg")}
	for k, good := range map[Kind][]byte{Keepalived: goodK, HAProxyCfg: goodH} {
		if changed, err := Install(ctx, tools, k, live[k], good); err != nil || !changed {
			t.Fatalf("Good %s: changed=%v err=%v", k, changed, err)
		}
	}
	tests := []struct {
		name     string
		kind     Kind
		old, new string
	}{
		{"keepalived v2 with a sub-second interval", Keepalived, "vrrp_version 3", "vrrp_version 2"},
		{"keepalived unknown interface", Keepalived, "interface eth0", "interface idnsv-nosuch"},
		{"keepalived vrid out of range", Keepalived, "virtual_router_id 222", "virtual_router_id 300"},
		{"keepalived unbalanced braces (hangs -t: the timeout rejects it)", Keepalived, "    track_file {", "    track_file {{"},
		{"keepalived auth with v3", Keepalived, "    priority 250\n", "    priority 250\n    authentication {\n        auth_type PASS\n        auth_pass ocp4\n    }\n"},
		{"haproxy unknown backend", HAProxyCfg, "default_backend ocp4_api", "default_backend ocp4_nosuch"},
		{"haproxy bad server address", HAProxyCfg, "198.51.100.12:6443", "198.51.100.300:6443"},
		{"haproxy missing timeouts (warning)", HAProxyCfg, "    timeout connect 300ms\n", ""},
		{"haproxy duplicate server", HAProxyCfg, "server master-1_v4 ", "server master-0_v4 "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			good := map[Kind][]byte{Keepalived: goodK, HAProxyCfg: goodH}[tc.kind]
			bad := bytes.Replace(good, []byte(tc.old), []byte(tc.new), 1)
			if bytes.Equal(bad, good) {
				t.Fatalf("%q not found in the render", tc.old)
			}
			changed, err := Install(ctx, tools, tc.kind, live[tc.kind], bad)
			var ve *ValidationError
			if !errors.As(err, &ve) || changed {
				t.Fatalf("Install: changed=%v err=%v, want a ValidationError", changed, err)
			}
			onDisk, err := os.ReadFile(live[tc.kind])
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(onDisk, good) {
				t.Error("The live file changed after a rejected render")
			}
		})
	}
}

// TestInstallRefusesNonRegular: a pipe at the output is refused before
// validating, not read (the compare with the old content would block).
func TestInstallRefusesNonRegular(t *testing.T) {
	p := filepath.Join(t.TempDir(), "keepalived.conf")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Install(context.Background(), acceptAll{}, Keepalived, p, []byte("x\n"))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, atomicfile.ErrNotRegular) {
			t.Errorf("Install = %v, want ErrNotRegular", err)
		}
	case <-time.After(10 * time.Second):
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = w.Close()
		}
		<-done
		t.Error("Install hung reading a named pipe")
	}
	if fi, err := os.Lstat(p); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("%s: %v %v, want the pipe left alone", p, fi.Mode(), err)
	}
}

type acceptAll struct{}

func (acceptAll) Validate(context.Context, Kind, []byte) error { return nil }
