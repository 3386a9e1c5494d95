//go:build e2e

package e2e

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/tor"
)

// TestToRConfigsParse: the ToR configurations internal/tor renders (the
// operator guide's example, and one with IPv6 sessions, a password and the
// lab's timers) pass FRR 8.4's and BIRD 2's own configuration checks
// (vtysh --dryrun, bird -p). The routed lab runs them too (TestBGPVIPs).
func TestToRConfigsParse(t *testing.T) {
	for _, bin := range []string{"vtysh", "bird"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is missing (Debian packages frr and bird2; make deps): %v", bin, err)
		}
	}
	full := tor.Config{
		ASN:      64512,
		RouterID: netip.MustParseAddr("10.91.255.1"),
		Peers: []tor.Peer{
			{Addr: netip.MustParseAddr("10.91.0.11"), ASN: 64513, Password: "Md5-s3cret#1{x}"},
			{Addr: netip.MustParseAddr("fd00:91::11"), ASN: 64514},
		},
		BFD:          true,
		HoldTime:     3 * time.Second,
		Keepalive:    time.Second,
		ConnectRetry: time.Second,
		VIPs:         []netip.Prefix{netip.MustParsePrefix("10.91.100.0/24"), netip.MustParsePrefix("10.91.101.7/32"), netip.MustParsePrefix("fd00:91:100::/64")},
	}
	dir := t.TempDir()
	for name, cfg := range map[string]tor.Config{"example": tor.Example, "full": full, "no-vips": {ASN: 1, Peers: full.Peers}} {
		if err := cfg.Check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		frr, bird := filepath.Join(dir, name+".frr.conf"), filepath.Join(dir, name+".bird.conf")
		if err := os.WriteFile(frr, []byte(tor.FRR(cfg)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bird, []byte(tor.BIRD(cfg)), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("vtysh", "--dryrun", "-f", frr).CombinedOutput(); err != nil {
			t.Errorf("%s: FRR refuses its configuration: %v\n%s\n%s", name, err, out, tor.FRR(cfg))
		}
		if out, err := exec.Command("bird", "-p", "-c", bird).CombinedOutput(); err != nil {
			t.Errorf("%s: BIRD refuses its configuration: %v\n%s\n%s", name, err, out, tor.BIRD(cfg))
		}
	}
	// The checks can fail: a line FRR does not know, a BIRD syntax error.
	bad := filepath.Join(dir, "bad.frr.conf")
	os.WriteFile(bad, []byte(tor.FRR(tor.Example)+"router bgp 64512\n neighbor 198.51.100.11 no-such-option\n"), 0o644)
	if err := exec.Command("vtysh", "--dryrun", "-f", bad).Run(); err == nil {
		t.Error("vtysh --dryrun took an unknown command: the check cannot fail")
	}
	badBird := filepath.Join(dir, "bad.bird.conf")
	os.WriteFile(badBird, []byte(tor.BIRD(tor.Example)+"protocol bgp x { no-such-option; }\n"), 0o644)
	if err := exec.Command("bird", "-p", "-c", badBird).Run(); err == nil {
		t.Error("bird -p took an unknown option: the check cannot fail")
	}
}
