package vrrp

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/lb/netnstest"
)

// onLo says which of vips are on lo in namespace ns.
func onLo(t *testing.T, ns string, vips ...netip.Addr) []bool {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-br", "addr", "show", "dev", "lo").CombinedOutput()
	if err != nil {
		t.Fatalf("ip addr show dev lo: %v: %s", err, out)
	}
	got := make([]bool, len(vips))
	for i, v := range vips {
		got[i] = strings.Contains(string(out), " "+netip.PrefixFrom(v, v.BitLen()).String())
	}
	return got
}

// waitLo waits up to 2 s for lo to hold exactly want of v4 and v6.
func waitLo(t *testing.T, ns, what string, v4, v6 netip.Addr, want4, want6 bool) {
	t.Helper()
	var got []bool
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got = onLo(t, ns, v4, v6); got[0] == want4 && got[1] == want6 {
			return
		}
	}
	t.Fatalf("%s: on lo IPv4 %v, IPv6 %v; want %v, %v", what, got[0], got[1], want4, want6)
}

func TestDrainerStandby(t *testing.T) {
	ns := netnstest.New(t, "ds")
	for _, s := range []string{"net.ipv4.conf.all.arp_ignore=1", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"} {
		if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", s).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", s, err, out)
		}
	}
	netnstest.Run(t, "-n", ns, "link", "set", "eth0", "up")
	v4, v6 := netip.MustParseAddr("198.51.100.100"), netip.MustParseAddr("2001:db8:1::100")
	d := &Drainer{Interface: "eth0", VIPs: []netip.Addr{v4, v6}, Drain: 300 * time.Millisecond,
		Failed: func(p netip.Prefix, err error) { t.Errorf("copy of %s: %v", p, err) }}
	arrived := make(chan netip.Prefix, 10)
	d.Arrived = func(p netip.Prefix) { arrived <- p }
	// On standby before Run: made when it starts; an IPv4 VIP never is.
	d.SetStandby([]netip.Addr{v4, v6}, true)
	ctx, cancel := context.WithCancel(context.Background())
	_, runErr := runIn(t, ctx, ns, func() (*Drainer, error) { return d, nil })
	waitLo(t, ns, "on standby at start", v4, v6, false, true)

	// The point of the standby copy: the VIP is usable the moment it lands
	// on the interface. Without it the local route comes when addrconf's
	// work runs, after the request returns (here 1 to 4 times in 40 with
	// ip, more on a busy node): logged below, after standby ends.
	usable := func() bool {
		cmd := exec.Command("ip", "-6", "-n", ns, "-batch", "-")
		cmd.Stdin = strings.NewReader(fmt.Sprintf("addr add %s/128 dev eth0 nodad\nroute show table local %s\n", v6, v6))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ip -batch: %v: %s", err, out)
		}
		return strings.Contains(string(out), v6.String())
	}
	if !usable() {
		t.Error("IPv6 VIP on standby: no local route right after it was added to eth0")
	}
	waitLo(t, ns, "IPv6 held", v4, v6, false, true)
	netnstest.Run(t, "-n", ns, "addr", "add", v4.String()+"/32", "dev", "eth0")
	waitLo(t, ns, "both held", v4, v6, true, true)
	if held, draining := d.Holding(); !held || draining {
		t.Errorf("both held: Holding() = held %v, draining %v; want true, false", held, draining)
	}
	// Each takeover is told, in order (not the standby copy's lo address).
	for _, want := range []netip.Prefix{netip.PrefixFrom(v6, 128), netip.PrefixFrom(v4, 32)} {
		select {
		case p := <-arrived:
			if p != want {
				t.Errorf("Arrived(%s), want %s", p, want)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("Arrived not told about %s", want)
		}
	}
	netnstest.Run(t, "-n", ns, "addr", "del", v4.String()+"/32", "dev", "eth0")
	netnstest.Run(t, "-n", ns, "addr", "del", v6.String()+"/128", "dev", "eth0")
	time.Sleep(100 * time.Millisecond)
	if got := onLo(t, ns, v4, v6); !got[0] || !got[1] {
		t.Errorf("released 100 ms ago: on lo %v, want both (draining)", got)
	}
	// Once the release events are taken in (not yet, on a loaded machine, at
	// 100 ms), nothing is held and the copies drain.
	var held, draining bool
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if held, draining = d.Holding(); !held {
			break
		}
	}
	if held || !draining {
		t.Errorf("released: Holding() = held %v, draining %v; want false, true", held, draining)
	}
	// The drain ends the IPv4 copy; the IPv6 one stays on standby, which
	// is neither held nor draining: a stopping process need not wait for it.
	waitLo(t, ns, "drained", v4, v6, false, true)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if held, draining = d.Holding(); !held && !draining {
			break
		}
	}
	if held || draining {
		t.Errorf("drained, IPv6 on standby: Holding() = held %v, draining %v; want false, false", held, draining)
	}
	time.Sleep(400 * time.Millisecond)
	waitLo(t, ns, "still on standby after the drain", v4, v6, false, true)
	if len(arrived) != 0 {
		t.Errorf("Arrived told %d more times after the releases, want none", len(arrived))
	}

	// Unhealthy: the copy goes unless the VIP is held; back on standby, back.
	d.SetStandby([]netip.Addr{v6}, false)
	waitLo(t, ns, "off standby", v4, v6, false, false)
	t.Logf("off standby, a local route right after the VIP was added: %v", usable())
	waitLo(t, ns, "held while off standby", v4, v6, false, true)
	netnstest.Run(t, "-n", ns, "addr", "del", v6.String()+"/128", "dev", "eth0")
	waitLo(t, ns, "drained off standby", v4, v6, false, false)
	d.SetStandby([]netip.Addr{v6}, true)
	waitLo(t, ns, "on standby again", v4, v6, false, true)

	// Run's end takes its copies with it.
	cancel()
	if err := <-runErr; err != nil {
		t.Fatal(err)
	}
	if got := onLo(t, ns, v4, v6); got[0] || got[1] {
		t.Errorf("after Run: on lo %v, want neither", got)
	}
}
