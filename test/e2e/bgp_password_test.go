//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/test/e2e/lab"
)

// TestBGPPasswordFile: the embedded speaker's TCP MD5 password comes from
// a root-only file (password-file), read when lbconfig starts, against an
// FRR ToR that requires it. A file with another password gets no session
// (FRR's socket drops segments signed with another key), so the session
// that comes up with the right file proves the file's password is the one
// on the wire. Neither the Corefile nor lbconfig's log holds the password.
func TestBGPPasswordFile(t *testing.T) {
	const pw, wrong = "Md5-s3cret#1{x}", "Md5-wr0ng#2{y}"
	const asn = 64513
	l := lab.New(t, lab.Config{Prefix: "bgpmd5", Nodes: 1, Routed: true, TeardownGrace: time.Second})
	n := l.Nodes()[0]
	tor, err := l.StartFRR(lab.ToRConfig{ASN: bgpToRASN, VIPs: bgpVIPPrefixes, Peers: []lab.ToRPeer{{Addr: n.IPv4, ASN: asn, Password: pw}}})
	if err != nil {
		t.Fatalf("FRR: %v", err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "track"), 0o755); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(dir, "tor.password")
	conf := fmt.Sprintf(`.:1053 {
    lbconfig {
        cluster %s
        node %s
        api-vip %s
        backends %s
        health-check api none
        track-dir %s
        vip-mode bgp
        bgp-asn %d
        bgp-peer %s %d hold 3s keepalive 1s bfd off password-file %s
    }
}
`, bgpCluster, n.Name, bgpVIP, netip.AddrPortFrom(n.IPv4, vrrpAPIPort), filepath.Join(dir, "track"), asn, n.Gateway4, bgpToRASN, pwFile)
	prefix := netip.PrefixFrom(bgpVIP, 32)

	// Another password: no session, no route, for longer than the right
	// one takes to bring both up (below).
	if err := os.WriteFile(pwFile, []byte(wrong+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startCorefile(t, n, dir, conf)
	deadline := time.Now().Add(bgpRouteBound)
	for time.Now().Before(deadline) {
		if err := running(p); err != nil {
			t.Fatal(err)
		}
		est, err := tor.Established()
		if err != nil {
			t.Fatal(err)
		}
		hs, err := tor.NextHops(prefix)
		if err != nil {
			t.Fatal(err)
		}
		if est != 0 || len(hs) != 0 {
			t.Fatalf("with another password: %d sessions established, next hops %v; want none (does the ToR check MD5?)\n%s", est, hs, tor.Show("summary"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}

	// The right password, as an operator changes it: the file, then a
	// restart (the password is read at setup).
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p = startCorefile(t, n, dir, conf)
	ctx, cancel := context.WithTimeout(context.Background(), bgpRouteBound)
	defer cancel()
	if hs, err := tor.WaitNextHops(ctx, prefix, 1); err != nil || hs[0] != n.IPv4 {
		t.Fatalf("with the right password: next hops %v, %v; want %s\n%s\n%s", hs, err, n.IPv4, tor.Show("summary"), lab.Tail(p.LogPath, 20))
	}
	t.Logf("session up and the VIP announced %d ms after lbconfig started with the right password", time.Since(start).Milliseconds())
	for _, f := range []string{filepath.Join(dir, "Corefile"), p.LogPath} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), pw) || strings.Contains(string(b), wrong) {
			t.Errorf("%s holds a password", f)
		}
	}
}
