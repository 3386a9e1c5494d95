//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/test/e2e/lab"
)

// TestBindFollowsAddresses runs the node resolver's listen mode (`bind eth0
// lo`, beside systemd-resolved's stub) as a node meets it:
//   - started while eth0's IPv6 address is still tentative (duplicate address
//     detection, as at boot): CoreDNS's own bind exits with "bind: cannot
//     assign requested address"; it must come up, and answer on that address
//     once detection is over;
//   - a VIP added to eth0 afterwards (as keepalived adds it) must be answered
//     on, from another host, and no longer once removed: CoreDNS's own bind
//     refused every query on it, so the API VIP, every node's second
//     nameserver, answered nothing on a node in that mode.
func TestBindFollowsAddresses(t *testing.T) {
	l := lab.New(t, lab.Config{Prefix: "bind", Nodes: 1, Client: true, TeardownGrace: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, client := l.Nodes()[0], l.Client()
	// Detection on for eth0 (the lab turns it off), slow enough to start
	// CoreDNS inside it: two probes a second apart.
	tentative := lab.Host6(99)
	for _, argv := range [][]string{
		{"sysctl", "-qw", "net.ipv6.conf." + lab.Iface + ".accept_dad=1", "net.ipv6.conf." + lab.Iface + ".dad_transmits=2"},
		// Linux's default (the lab allows it for haproxy): an address the
		// host lacks cannot be bound unless the socket asks (IP_FREEBIND).
		{"sysctl", "-qw", "net.ipv4.ip_nonlocal_bind=0", "net.ipv6.ip_nonlocal_bind=0"},
		{"ip", "addr", "add", netip.PrefixFrom(tentative, 64).String(), "dev", lab.Iface},
	} {
		if _, err := n.Run(ctx, argv...); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(t.TempDir(), "Corefile")
	// Two VIPs named as the node's Corefile names the API VIP, bound ahead.
	ahead := []netip.Prefix{netip.PrefixFrom(lab.Host4(131), 32), netip.PrefixFrom(lab.Host6(131), 128)}
	writeFile(t, conf, fmt.Sprintf(".:53 {\n    bind %s lo %s %s\n    whoami\n}\n", lab.Iface, ahead[0].Addr(), ahead[1].Addr()))
	dns := n.Start("coredns", []string{lab.Binary(t, "coredns"), "-conf", conf})
	started := time.Now()
	if res, err := n.Run(ctx, "ip", "-6", "addr", "show", "dev", lab.Iface, "tentative"); err != nil || !strings.Contains(res.Stdout, tentative.String()) {
		t.Fatalf("%s is not tentative when CoreDNS starts (the case is not tested): %v %q", tentative, err, res.Stdout)
	}
	answers := func(server netip.Addr) error {
		res, err := client.Dig(ctx, "+time=1", "@"+server.String(), "whoami.example", "A")
		if err != nil {
			return err
		}
		if !strings.Contains(res.Stdout, "status: NOERROR") {
			return fmt.Errorf("no answer: %s", res.Stdout)
		}
		return nil
	}
	gone := func(round int, vip netip.Addr) {
		t.Helper()
		lab.Eventually(t, 5*time.Second, 50*time.Millisecond, fmt.Sprintf("round %d: no answer on %s once removed", round, vip), func() error {
			if answers(vip) == nil {
				return fmt.Errorf("still answered")
			}
			return nil
		})
	}
	lab.Eventually(t, 10*time.Second, 50*time.Millisecond, "CoreDNS up on the node's address", func() error { return answers(n.IPv4) })
	lab.Eventually(t, 10*time.Second, 50*time.Millisecond, "answers on the address that was tentative at start", func() error { return answers(tentative) })
	t.Logf("measure: answering on the address tentative at start %v after CoreDNS started (detection: 2 probes, 1 s apart)", time.Since(started).Round(time.Millisecond))
	if dns.Exited() {
		t.Fatalf("CoreDNS exited:\n%s", lab.Tail(dns.LogPath, 20))
	}

	// VIPs added and removed as keepalived does, each family, five rounds.
	var took []time.Duration
	for round := range 5 {
		for _, vip := range []netip.Prefix{netip.PrefixFrom(lab.Host4(130), 32), netip.PrefixFrom(lab.Host6(130), 128)} {
			added := time.Now()
			if err := n.AddAddr(vip); err != nil {
				t.Fatal(err)
			}
			lab.Eventually(t, 5*time.Second, 2*time.Millisecond, fmt.Sprintf("round %d: answers on %s once added", round, vip.Addr()), func() error { return answers(vip.Addr()) })
			took = append(took, time.Since(added))
			if err := n.DelAddr(vip); err != nil {
				t.Fatal(err)
			}
			// The client still sends to the node (neighbour cache): the
			// node must not answer for an address it no longer has.
			gone(round, vip.Addr())
		}
	}
	slices.Sort(took)
	t.Logf("measure: VIP added → answered on it from another host: min %v, median %v, max %v (n=%d, dig polled every 2 ms)",
		took[0].Round(time.Millisecond), took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), len(took))
	if !strings.Contains(string(mustRead(t, dns.LogPath)), "answering on "+lab.Host4(130).String()) {
		t.Errorf("the log does not say it answers on the VIP:\n%s", lab.Tail(dns.LogPath, 20))
	}

	// The VIPs the Corefile names are bound before the node has them: a
	// query is answered with no work by CoreDNS when the address arrives.
	// Shown with CoreDNS stopped (SIGSTOP, a starved node's extreme) while
	// the VIP is added and queried: the query waits in the socket and is
	// answered once CoreDNS runs again. Following the address event instead
	// (the VIP above), a query sent then is refused: nothing listens yet.
	for _, vip := range ahead {
		if !strings.Contains(dns.Log(), "answering on "+vip.Addr().String()+" as soon as the host has it") {
			t.Fatalf("%s: not bound ahead of the address:\n%s", vip.Addr(), lab.Tail(dns.LogPath, 20))
		}
	}
	for round := range 3 {
		for _, vip := range ahead {
			if err := dns.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			if err := n.AddAddr(vip); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			got := make(chan error, 1)
			go func() {
				res, err := client.Run(ctx, "dig", "+time=3", "+tries=1", "@"+vip.Addr().String(), "whoami.example", "A")
				if err == nil && !strings.Contains(res.Stdout, "status: NOERROR") {
					err = fmt.Errorf("no answer: %s", res.Stdout)
				}
				got <- err
			}()
			time.Sleep(300 * time.Millisecond)
			if err := dns.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Errorf("round %d: %s added while CoreDNS was stopped, queried at once: %v", round, vip.Addr(), err)
			} else if round == 0 {
				t.Logf("measure: %s added while CoreDNS was stopped for 300 ms: the query sent then answered %v after it was sent", vip.Addr(), time.Since(sent).Round(time.Millisecond))
			}
			if err := n.DelAddr(vip); err != nil {
				t.Fatal(err)
			}
			// Bound ahead, the socket stays; the host no longer has the address.
			gone(round, vip.Addr())
		}
	}
}
