//go:build e2e

// Package e2e holds the end-to-end scenarios: real daemons on a network of
// namespaces built by package lab, checked from outside with real clients.
package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/test/e2e/lab"
)

// The example cluster of corefile.example.
const (
	domain     = "ocp4.example.com"
	apiVIPs    = "192.0.2.5,2001:db8::5"
	ingressIPs = "192.0.2.10,2001:db8::10"
	readyPort  = 18181
	// A loopback port nobody listens on inside the node: names outside the
	// cluster are "forwarded" there, so nothing leaves the lab.
	deadUpstream = "127.0.0.1:5399"
)

// checksPerRun is what hack/verify-dns.sh runs: 14 checks over UDP and TCP.
const checksPerRun = 28

var summaryRE = regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed$`)

// verifyResult is the parsed output of hack/verify-dns.sh.
type verifyResult struct {
	exit           int
	passed, failed int // from the summary line
	passLines      int
	failLines      []string
	out            string
}

func runVerify(ctx context.Context, t *testing.T, from *lab.Node, server netip.Addr, port int, api, ingress string) verifyResult {
	t.Helper()
	script := lab.Path(t, "hack/verify-dns.sh")
	res, err := from.Run(ctx, "bash", script, "--server", server.String(), "--port", fmt.Sprint(port),
		"--domain", domain, "--api-vip", api, "--ingress-vip", ingress)
	if res.ExitCode < 0 {
		t.Fatalf("verify-dns.sh against %v did not finish: %v", server, err)
	}
	v := verifyResult{exit: res.ExitCode, out: res.Stdout + res.Stderr}
	m := summaryRE.FindStringSubmatch(res.Stdout)
	if m == nil {
		t.Fatalf("verify-dns.sh against %v: no summary line in:\n%s", server, v.out)
	}
	fmt.Sscan(m[1], &v.passed)
	fmt.Sscan(m[2], &v.failed)
	for _, line := range strings.Split(res.Stdout, "\n") {
		switch {
		case strings.HasPrefix(line, "PASS "):
			v.passLines++
		case strings.HasPrefix(line, "FAIL "):
			v.failLines = append(v.failLines, line)
		}
	}
	return v
}

// startCoreDNS runs bin/coredns with corefile on port 53 of n and waits until
// its ready plugin answers on readyPort.
func startCoreDNS(t *testing.T, n *lab.Node, corefile string) *lab.Process {
	t.Helper()
	p := n.Start("coredns", []string{lab.Binary(t, "coredns"), "-conf", corefile, "-dns.port", "53"},
		lab.WithEnv("INFRADNS_UPSTREAM="+deadUpstream))
	url := fmt.Sprintf("http://%s/ready", netip.AddrPortFrom(n.IPv4, readyPort))
	lab.Eventually(t, 20*time.Second, 50*time.Millisecond, "coredns ready on "+n.Name, func() error {
		if p.Exited() {
			return fmt.Errorf("coredns exited: %v\n%s", p.Err(), lab.Tail(p.LogPath, 20))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := n.HTTPGet(ctx, url)
		return err
	})
	return p
}

// TestThreeNodeDNS runs the example Corefile on three nodes and checks every
// node, over IPv4 and IPv6, UDP and TCP, with hack/verify-dns.sh from a client
// namespace that is not a node.
func TestThreeNodeDNS(t *testing.T) {
	testStart := time.Now()
	corefile := lab.Path(t, "corefile.example")
	requireExample(t, corefile)
	lab.Binary(t, "coredns")

	l := lab.New(t, lab.Config{Nodes: 3, Client: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client := l.Client()

	readyStart := time.Now()
	for _, n := range l.Nodes() {
		startCoreDNS(t, n, corefile)
	}
	t.Logf("Lab up in %v; 3 CoreDNS ready %v later", l.UpDuration.Round(time.Millisecond), time.Since(readyStart).Round(time.Millisecond))

	verifyStart := time.Now()
	// The group returns when its parallel runs have finished.
	t.Run("verify", func(t *testing.T) {
		for _, n := range l.Nodes() {
			for _, addr := range []netip.Addr{n.IPv4, n.IPv6} {
				t.Run(fmt.Sprintf("%s/%s", n.Name, addr), func(t *testing.T) {
					t.Parallel()
					v := runVerify(ctx, t, client, addr, 53, apiVIPs, ingressIPs)
					if v.exit != 0 || v.passed != checksPerRun || v.failed != 0 || v.passLines != checksPerRun || len(v.failLines) != 0 {
						t.Errorf("verify-dns.sh: exit %d, %d passed (%d PASS lines), %d failed; want exit 0, %d passed:\n%s",
							v.exit, v.passed, v.passLines, v.failed, checksPerRun, v.out)
					}
				})
			}
		}
	})
	t.Logf("6 verify runs (%d checks each) took %v", checksPerRun, time.Since(verifyStart).Round(time.Millisecond))

	// The script must notice a wrong answer, or the runs above prove nothing:
	// a wrong API VIP fails api A, api-int A and the mixed-case api A, on both
	// transports.
	t.Run("wrong expectation fails", func(t *testing.T) {
		n := l.Nodes()[0]
		v := runVerify(ctx, t, client, n.IPv4, 53, "192.0.2.99,2001:db8::5", ingressIPs)
		if v.exit != 1 || v.failed != 6 || v.passed != checksPerRun-6 || len(v.failLines) != 6 {
			t.Errorf("verify-dns.sh with a wrong API VIP: exit %d, %d passed, %d failed; want exit 1, %d passed, 6 failed:\n%s",
				v.exit, v.passed, v.failed, checksPerRun-6, v.out)
		}
		for _, line := range v.failLines {
			if !strings.Contains(strings.ToLower(line), "api") || !strings.Contains(line, " A: got [192.0.2.5], want [192.0.2.99]") {
				t.Errorf("Unexpected failure line: %s", line)
			}
		}
	})

	// A cluster without IPv6 VIPs: a node joins late and serves a Corefile
	// whose plugins have only IPv4 addresses; AAAA must be NODATA with the SOA.
	t.Run("ipv4-only cluster on a late node", func(t *testing.T) {
		conf := v4OnlyCorefile(t, corefile)
		n := l.AddNode("v4only")
		startCoreDNS(t, n, conf)
		for _, addr := range []netip.Addr{n.IPv4, n.IPv6} {
			v := runVerify(ctx, t, client, addr, 53, "192.0.2.5", "192.0.2.10")
			if v.exit != 0 || v.passed != checksPerRun || v.failed != 0 {
				t.Errorf("verify-dns.sh against %v (IPv4-only VIPs): exit %d, %d passed, %d failed:\n%s", addr, v.exit, v.passed, v.failed, v.out)
			}
			if got := strings.Count(v.out, "AAAA = NODATA"); got != 8 {
				t.Errorf("Against %v: %d AAAA NODATA checks, want 8:\n%s", addr, got, v.out)
			}
		}
	})

	closeStart := time.Now()
	if err := l.Close(); err != nil {
		t.Errorf("Teardown: %v", err)
	}
	t.Logf("Teardown %v (measured %v); whole test %v", l.TeardownDuration.Round(time.Millisecond),
		time.Since(closeStart).Round(time.Millisecond), time.Since(testStart).Round(time.Millisecond))
	for _, n := range append(l.Nodes(), client) {
		if _, err := os.Stat(filepath.Join("/run/netns", n.NS)); err == nil {
			t.Errorf("Namespace %s left after teardown", n.NS)
		}
	}
}

// requireExample fails when corefile.example no longer describes the example
// cluster this test expects.
func requireExample(t *testing.T, corefile string) {
	t.Helper()
	b, err := os.ReadFile(corefile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"apiint 192.0.2.5 2001:db8::5", "appswildcard 192.0.2.10 2001:db8::10", "zone " + domain, fmt.Sprintf("ready :%d", readyPort)} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("corefile.example no longer has %q; update this test's example cluster", want)
		}
	}
}

// v4OnlyCorefile writes a copy of corefile.example without the IPv6 VIPs.
func v4OnlyCorefile(t *testing.T, corefile string) string {
	t.Helper()
	b, err := os.ReadFile(corefile)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer("apiint 192.0.2.5 2001:db8::5", "apiint 192.0.2.5",
		"appswildcard 192.0.2.10 2001:db8::10", "appswildcard 192.0.2.10").Replace(string(b))
	p := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
