package vrrp

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/lb/netnstest"
)

// relayLab is a client and two nodes (old, the VIP's holder, and new) on
// one bridge, each in its own namespace, each node with an echo server on
// every address.
type relayLab struct {
	client, old, new string
	vip              netip.Addr
}

func newRelayLab(t *testing.T, suffix string, v6 bool) *relayLab {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("nft not found (run hack/install-deps.sh as root): %v", err)
	}
	br := netnstest.New(t, suffix+"-br")
	netnstest.Run(t, "-n", br, "link", "del", "eth0")
	netnstest.Run(t, "-n", br, "link", "add", "br0", "type", "bridge")
	netnstest.Run(t, "-n", br, "link", "set", "br0", "up")
	l := &relayLab{vip: netip.MustParseAddr("198.51.100.100")}
	if v6 {
		l.vip = netip.MustParseAddr("2001:db8:1::100")
	}
	for i, role := range []*string{&l.client, &l.old, &l.new} {
		ns := netnstest.New(t, fmt.Sprintf("%s-%d", suffix, i))
		*role = ns
		for _, sysctl := range []string{"net.ipv4.conf.all.arp_ignore=1", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"} {
			if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", sysctl).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v: %s", sysctl, err, out)
			}
		}
		netnstest.Run(t, "-n", ns, "link", "del", "eth0")
		netnstest.Run(t, "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", fmt.Sprintf("p%d", i), "netns", br)
		netnstest.Run(t, "-n", br, "link", "set", fmt.Sprintf("p%d", i), "master", "br0", "up")
		netnstest.Run(t, "-n", ns, "addr", "add", []string{"198.51.100.201/24", "198.51.100.11/24", "198.51.100.12/24"}[i], "dev", "eth0")
		netnstest.Run(t, "-n", ns, "addr", "add", []string{"2001:db8:1::201/64", "2001:db8:1::11/64", "2001:db8:1::12/64"}[i], "dev", "eth0", "nodad")
		netnstest.Run(t, "-n", ns, "link", "set", "eth0", "up")
	}
	for _, ns := range []string{l.old, l.new} {
		l.serve(t, ns)
	}
	// The old node holds the VIP, with the copy on lo a Drainer keeps.
	netnstest.Run(t, "-n", l.old, "addr", "add", l.host(), "dev", "eth0", "nodad")
	netnstest.Run(t, "-n", l.old, "addr", "add", l.host(), "dev", "lo", "nodad")
	return l
}

// host is the VIP as a host prefix.
func (l *relayLab) host() string { return netip.PrefixFrom(l.vip, l.vip.BitLen()).String() }

// oldSource is where the old node's resignation comes from: its address,
// or for IPv6 its link-local address (VRRPv3 sends from it).
func (l *relayLab) oldSource(t *testing.T) netip.Addr {
	t.Helper()
	if l.vip.Is4() {
		return netip.MustParseAddr("198.51.100.11")
	}
	out, err := exec.Command("ip", "-n", l.old, "-6", "-br", "addr", "show", "dev", "eth0", "scope", "link").Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	if len(f) < 3 {
		t.Fatalf("no link-local address on the old node: %q", out)
	}
	p, err := netip.ParsePrefix(f[2])
	if err != nil {
		t.Fatal(err)
	}
	return p.Addr()
}

// serve runs an echo server in ns that prefixes each line with ns.
func (l *relayLab) serve(t *testing.T, ns string) {
	t.Helper()
	var s net.Listener
	var err error
	inNS(t, ns, func() { s, err = net.Listen("tcp", ":9000") })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	go func() {
		for {
			c, err := s.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewScanner(c)
				for r.Scan() {
					if _, err := fmt.Fprintf(c, "%s:%s\n", ns, r.Text()); err != nil {
						return
					}
				}
			}()
		}
	}()
}

// dial connects from the client namespace to the VIP.
func (l *relayLab) dial(t *testing.T) net.Conn {
	t.Helper()
	var c net.Conn
	var err error
	inNS(t, l.client, func() { c, err = net.DialTimeout("tcp", netip.AddrPortFrom(l.vip, 9000).String(), 2*time.Second) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ask sends one line and returns the answer.
func ask(c net.Conn, s string) (string, error) {
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return "", err
	}
	if _, err := fmt.Fprintf(c, "%s\n", s); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// handOver moves the VIP from the old node to the new one as keepalived
// does (the old node's copy on lo stays) and points the client at the new
// node's MAC, as its gratuitous ARP does.
func (l *relayLab) handOver(t *testing.T) {
	t.Helper()
	netnstest.Run(t, "-n", l.old, "addr", "del", l.host(), "dev", "eth0")
	netnstest.Run(t, "-n", l.new, "addr", "add", l.host(), "dev", "eth0", "nodad")
	mac := macOf(t, l.new)
	netnstest.Run(t, "-n", l.client, "neigh", "replace", l.vip.String(), "lladdr", mac.String(), "dev", "eth0")
}

func TestRelayHandOver(t *testing.T) {
	for _, tc := range []struct {
		name string
		// How the new node learns of the resignation: "observe" (lbconfig's
		// listener heard it), "advert" (only the kernel sees the advert:
		// lbconfig is late), "advert 100" (an advert that resigns nothing),
		// "advert other" (another VIP resigned), "takeover" (this node took
		// the VIP from a holder still advertising it: TakenOver) or ""
		// (nothing).
		how string
		v6  bool
		// live is the Relay's Live (0: none); quiet how long the old node
		// stays silent after its advert before the hand-over.
		live, quiet time.Duration
	}{
		{"relayed", "observe", false, 0, 0},
		{"relayed by the kernel", "advert", false, 0, 0},
		{"a holder's advert", "advert 100", false, 0, 0},
		{"another VIP resigned", "advert other", false, 0, 0},
		{"not relayed", "", false, 0, 0},
		{"taken over from a live holder", "takeover", false, 0, 0},
		// The old node announced the VIP (a holder that resumed: Announced).
		{"announced by the old node", "announced", false, 0, 0},
		// The kernel learnt the live holder from its advert: no TakenOver.
		{"taken over from a live holder, kernel", "advert 100", false, 1500 * time.Millisecond, 0},
		// Silent for longer than Live: it stopped; its connections are gone.
		{"taken over from a silent holder", "advert 100", false, 300 * time.Millisecond, 500 * time.Millisecond},
		{"IPv6 relayed", "observe", true, 0, 0},
		{"IPv6 relayed by the kernel", "advert", true, 0, 0},
		{"IPv6 holder's advert", "advert 100", true, 0, 0},
		{"IPv6 not relayed", "", true, 0, 0},
		{"IPv6 taken over from a live holder", "takeover", true, 0, 0},
		{"IPv6 announced by the old node", "announced", true, 0, 0},
		{"IPv6 taken over from a live holder, kernel", "advert 100", true, 1500 * time.Millisecond, 0},
		{"IPv6 taken over from a silent holder", "advert 100", true, 300 * time.Millisecond, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newRelayLab(t, fmt.Sprintf("r%d", len(t.Name())%97), tc.v6)
			// A second VIP of the group, which the old node resigns too (or
			// alone, "advert other").
			other := netip.MustParseAddr("198.51.100.99")
			if tc.v6 {
				other = netip.MustParseAddr("2001:db8:1::99")
			}
			// Long enough for the map listing, the hand-over's ip commands
			// and the request on a loaded machine (CI: 400 ms expired
			// before the listing once, beside other tests).
			r := &Relay{Interface: "eth0", VIPs: []netip.Addr{l.vip, other}, For: 1500 * time.Millisecond, Live: tc.live}
			relayed := make(chan netip.Addr, 1)
			r.Relayed = func(_, to netip.Addr) { relayed <- to }
			r.Failed = func(err error) { t.Error(err) }
			startRelay(t, l.new, r)

			c := l.dial(t)
			if got, err := ask(c, "a"); err != nil || got != l.old+":a" {
				t.Fatalf("before the hand-over: %q, %v; want the old node's answer", got, err)
			}
			src := l.oldSource(t)
			want := tc.how == "observe" || tc.how == "advert" || tc.how == "takeover" || tc.how == "announced" || tc.live > 0 && tc.quiet == 0
			table := RelayMap
			if tc.live > 0 {
				table = RelayLiveMap
			}
			switch tc.how {
			case "takeover":
				var ok bool
				inNS(t, l.new, func() { ok = r.TakenOver(l.vip, src, r.For) })
				if !ok {
					t.Fatal("TakenOver started no relay")
				}
			case "announced":
				var ok bool
				inNS(t, l.new, func() { ok = r.Announced(l.vip, src) })
				if !ok {
					t.Fatal("Announced started no relay")
				}
			case "observe":
				// From the new node's namespace: Observe reads its arp_ignore.
				inNS(t, l.new, func() {
					r.Observe(Observation{Source: src, Advert: Advert{Version: 3, VRID: 1, Priority: 0, Addresses: []netip.Addr{l.vip}}})
				})
				select {
				case to := <-relayed:
					if to != src {
						t.Fatalf("relayed to %s, want the resigning node", to)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("no relay 5 s after the resignation")
				}
			case "advert", "advert 100", "advert other":
				// The VIP second in the list: the rules look at every position.
				a := Advert{Version: 3, VRID: 1, Interval: 60 * time.Millisecond, Addresses: []netip.Addr{other, l.vip}}
				switch tc.how {
				case "advert 100":
					a.Priority = 100
				case "advert other":
					a.Addresses = []netip.Addr{other}
				}
				l.sendAdvert(t, src, a)
			}
			// The kernel's update is done when the packet has passed the
			// hook: the map already says, whoever wrote it.
			time.Sleep(tc.quiet)
			m := nftIn(t, l.new, "list", "map", map[bool]string{false: "ip", true: "ip6"}[tc.v6], RelayTable, table)
			if got := strings.Contains(m, l.vip.String()+" ") && strings.Contains(m, ": "+src.String()); got != want {
				t.Fatalf("relay map %s on the new node (want an element for %s: %v):\n%s", table, l.vip, want, m)
			}
			l.handOver(t)
			got, err := ask(c, "b")
			if want {
				if err != nil || got != l.old+":b" {
					t.Fatalf("open connection after the hand-over: %q, %v; want the old node to finish it", got, err)
				}
			} else if !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("open connection after the hand-over without a relay: %q, %v; want a reset from the new node", got, err)
			}
			if got, err := ask(l.dial(t), "c"); err != nil || got != l.new+":c" {
				t.Fatalf("new connection after the hand-over: %q, %v; want the new node's answer", got, err)
			}
			if !want {
				return
			}
			// The relay ends by itself (the map's timeout): the old node's
			// copy on lo is gone by then, and the new node resets.
			time.Sleep(max(r.For, r.Live) + 100*time.Millisecond)
			if got, err := ask(c, "d"); !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("open connection after the relay's end: %q, %v; want a reset from the new node", got, err)
			}
		})
	}
}

// sendAdvert sends a from the old node as keepalived does: to the VRRP
// group on the link (IPv6, from the link-local address src), or for IPv4
// straight to the new node (the namespaces have no multicast route).
func (l *relayLab) sendAdvert(t *testing.T, src netip.Addr, a Advert) {
	t.Helper()
	dst, network, zone := netip.MustParseAddr("198.51.100.12"), "ip4:112", ""
	if l.vip.Is6() {
		dst, network, zone = netip.MustParseAddr("ff02::12"), "ip6:112", "eth0"
	}
	b, err := a.Marshal(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	inNS(t, l.old, func() {
		var c net.PacketConn
		if c, err = net.ListenPacket(network, ""); err != nil {
			return
		}
		defer c.Close()
		if zone != "" {
			// The index: Go caches names across namespaces.
			var ifi *net.Interface
			if ifi, err = net.InterfaceByName(zone); err != nil {
				return
			}
			zone = strconv.Itoa(ifi.Index)
		}
		// A fresh interface has its IPv6 multicast route once addrconf's
		// work has run: until then, unreachable.
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			_, err = c.WriteTo(b, &net.IPAddr{IP: dst.AsSlice(), Zone: zone})
			if !errors.Is(err, syscall.ENETUNREACH) || time.Now().After(deadline) {
				return
			}
		}
	})
	if err != nil {
		t.Fatalf("advert from the old node: %v", err)
	}
	// Received when the new node's counter of VRRP packets moves; the
	// advert has then been through the hook.
	time.Sleep(50 * time.Millisecond)
}

// startRelay runs r on a thread in namespace ns (nft, run from it, works
// there) until the test ends, and checks that its tables are gone after.
func startRelay(t testing.TB, ns string, r *Relay) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	_, runErr := runIn(t, ctx, ns, func() (*Relay, error) { return r, nil })
	t.Cleanup(func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Error(err)
		}
		if out := nftIn(t, ns, "list", "tables"); strings.Contains(out, RelayTable) {
			t.Errorf("relay tables left after Run:\n%s", out)
		}
	})
	for deadline := time.Now().Add(5 * time.Second); !r.ready.Load(); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-runErr:
			t.Fatalf("relay: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("relay tables not installed after 5 s")
		}
	}
}

func nftIn(t testing.TB, ns string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns, "nft"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("nft %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestRelayRefusesLoopback(t *testing.T) {
	// Nothing to hand over on lo (keepalived refuses VRRP there), and the
	// tables would land in whatever namespace runs it: the tests that run
	// lbconfig on lo in the host's own namespace must leave it alone.
	r := &Relay{Interface: "lo"}
	err := r.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("Run on lo: %v, want a refusal naming the loopback", err)
	}
	if r.ready.Load() {
		t.Error("ready after the refusal")
	}
}

func TestRelayObserve(t *testing.T) {
	// Only a resignation of one of our VIPs by another router enters the
	// map, for For; the same again replaces it (new target, new timeout).
	ns := netnstest.New(t, "ro")
	vip4, vip6 := netip.MustParseAddr("198.51.100.100"), netip.MustParseAddr("2001:db8::100")
	if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1").CombinedOutput(); err != nil {
		t.Fatalf("arp_ignore: %v: %s", err, out)
	}
	r := &Relay{Interface: "eth0", VIPs: []netip.Addr{vip4, vip6}, For: time.Minute,
		Own: func(a netip.Addr) bool { return a == netip.MustParseAddr("198.51.100.12") }}
	var relayed []string
	r.Relayed = func(vip, to netip.Addr) { relayed = append(relayed, vip.String()+">"+to.String()) }
	r.Failed = func(err error) { t.Error(err) }
	startRelay(t, ns, r)
	adv := func(src string, prio uint8, vips ...netip.Addr) Observation {
		return Observation{Source: netip.MustParseAddr(src), Advert: Advert{Version: 3, VRID: 9, Priority: prio, Addresses: vips}}
	}
	inNS(t, ns, func() {
		for _, o := range []Observation{
			adv("198.51.100.11", 100, vip4),                           // a holder's advert
			adv("198.51.100.12", 0, vip4),                             // our own resignation
			adv("198.51.100.11", 0, netip.MustParseAddr("192.0.2.1")), // not our VIP
			adv("198.51.100.11", 0, vip4),                             // relayed
			adv("198.51.100.11", 0, vip4),                             // a repeat: nothing more
			adv("fe80::11", 0, vip6),                                  // relayed
		} {
			r.Observe(o)
		}
	})
	if want := []string{"198.51.100.100>198.51.100.11", "2001:db8::100>fe80::11"}; !slices.Equal(relayed, want) {
		t.Errorf("relayed %v, want %v", relayed, want)
	}
	m4, m6 := nftIn(t, ns, "list", "map", "ip", RelayTable, RelayMap), nftIn(t, ns, "list", "map", "ip6", RelayTable, RelayMap)
	// For is the map's own timeout, so an element shows only its expiry.
	if !strings.Contains(m4, "198.51.100.100 expires 59s") || !strings.Contains(m4, ": 198.51.100.11") || strings.Contains(m4, "192.0.2.1") {
		t.Errorf("IPv4 map:\n%s", m4)
	}
	if !strings.Contains(m6, "2001:db8::100 expires 59s") || !strings.Contains(m6, ": fe80::11") {
		t.Errorf("IPv6 map:\n%s", m6)
	}
	// Another node resigns the same VIP later (after For/4): replaced.
	r.mu.Lock()
	r.last[vip4] = time.Time{}
	r.mu.Unlock()
	inNS(t, ns, func() { r.Observe(adv("198.51.100.13", 0, vip4)) })
	if m4 := nftIn(t, ns, "list", "map", "ip", RelayTable, RelayMap); !strings.Contains(m4, ": 198.51.100.13") || strings.Contains(m4, "198.51.100.11") {
		t.Errorf("IPv4 map after a second resignation:\n%s", m4)
	}
}

func TestRelayAnnounced(t *testing.T) {
	// A peer's announcement of one of our VIPs relays it to the peer for
	// For; ours, another address's or a repeat within For/4 write nothing;
	// a renewal is no new start; another announcer replaces the target.
	ns := netnstest.New(t, "rn")
	vip4, vip6 := netip.MustParseAddr("198.51.100.100"), netip.MustParseAddr("2001:db8::100")
	if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1").CombinedOutput(); err != nil {
		t.Fatalf("arp_ignore: %v: %s", err, out)
	}
	self, peer, other := netip.MustParseAddr("198.51.100.12"), netip.MustParseAddr("198.51.100.11"), netip.MustParseAddr("198.51.100.13")
	r := &Relay{Interface: "eth0", VIPs: []netip.Addr{vip4, vip6}, For: time.Minute, Own: func(a netip.Addr) bool { return a == self }}
	r.Failed = func(err error) { t.Error(err) }
	startRelay(t, ns, r)
	m4 := func() string { return nftIn(t, ns, "list", "map", "ip", RelayTable, RelayMap) }
	for _, step := range []struct {
		name      string
		vip, by   netip.Addr
		before    func()
		started   bool
		wantIn    string // in the IPv4 map after the step ("" nothing)
		wantNotIn string
	}{
		{name: "our own announcement", vip: vip4, by: self, wantNotIn: vip4.String()},
		{name: "not our VIP", vip: netip.MustParseAddr("192.0.2.1"), by: peer, wantNotIn: "192.0.2.1"},
		{name: "a peer's", vip: vip4, by: peer, started: true, wantIn: ": " + peer.String()},
		{name: "the same again", vip: vip4, by: peer, wantIn: ": " + peer.String()},
		{name: "a renewal after For/4", vip: vip4, by: peer, before: func() {
			r.mu.Lock()
			r.announced[[2]netip.Addr{vip4, peer}] = time.Now().Add(-20 * time.Second)
			r.mu.Unlock()
		}, wantIn: ": " + peer.String()},
		{name: "another peer's", vip: vip4, by: other, started: true, wantIn: ": " + other.String(), wantNotIn: peer.String()},
	} {
		if step.before != nil {
			step.before()
		}
		var started bool
		inNS(t, ns, func() { started = r.Announced(step.vip, step.by) })
		if started != step.started {
			t.Errorf("%s: Announced = %v, want %v", step.name, started, step.started)
		}
		m := m4()
		if step.wantIn != "" && (!strings.Contains(m, vip4.String()+" ") || !strings.Contains(m, step.wantIn)) {
			t.Errorf("%s: IPv4 map, want %s → %s:\n%s", step.name, vip4, step.wantIn, m)
		}
		if step.wantNotIn != "" && strings.Contains(m, step.wantNotIn) {
			t.Errorf("%s: IPv4 map has %s:\n%s", step.name, step.wantNotIn, m)
		}
	}
	var started bool
	inNS(t, ns, func() { started = r.Announced(vip6, netip.MustParseAddr("2001:db8::11")) })
	if m6 := nftIn(t, ns, "list", "map", "ip6", RelayTable, RelayMap); !started || !strings.Contains(m6, ": 2001:db8::11") {
		t.Errorf("IPv6 announcement: started %v, map:\n%s", started, m6)
	}
}

func TestRelayAdvertised(t *testing.T) {
	// The live map names the router that advertises a VIP now: a second
	// router's adverts replace the first (the kernel's update would keep
	// it); resignations, our own adverts and other addresses do not count.
	ns := netnstest.New(t, "ra")
	vip := netip.MustParseAddr("198.51.100.100")
	// What makes a node keep a VIP on lo (DrainCopy): the others would too.
	if out, err := exec.Command("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1").CombinedOutput(); err != nil {
		t.Fatalf("arp_ignore: %v: %s", err, out)
	}
	r := &Relay{Interface: "eth0", VIPs: []netip.Addr{vip}, Live: time.Minute,
		Own: func(a netip.Addr) bool { return a == netip.MustParseAddr("198.51.100.12") }}
	r.Failed = func(err error) { t.Error(err) }
	startRelay(t, ns, r)
	adv := func(src string, prio uint8, vips ...netip.Addr) Observation {
		return Observation{Source: netip.MustParseAddr(src), Advert: Advert{Version: 3, VRID: 9, Priority: prio, Addresses: vips}}
	}
	live := func() string { return nftIn(t, ns, "list", "map", "ip", RelayTable, RelayLiveMap) }
	for _, step := range []struct {
		o    Observation
		want string // the target in the map after it; "" none
	}{
		{adv("198.51.100.11", 0, vip), ""},                                // a resignation
		{adv("198.51.100.12", 250, vip), ""},                              // our own advert
		{adv("198.51.100.11", 250, netip.MustParseAddr("192.0.2.1")), ""}, // not our VIP
		{adv("198.51.100.11", 250, vip), "198.51.100.11"},
		{adv("198.51.100.11", 250, vip), "198.51.100.11"}, // the same again
		{adv("198.51.100.13", 210, vip), "198.51.100.13"}, // another router: replaced
	} {
		inNS(t, ns, func() { r.Advertised(step.o) })
		m := live()
		if step.want == "" {
			if strings.Contains(m, vip.String()) {
				t.Errorf("after %v from %s: live map has %s:\n%s", step.o.Advert.Addresses, step.o.Source, vip, m)
			}
			continue
		}
		if !strings.Contains(m, vip.String()+" ") || !strings.Contains(m, ": "+step.want) || strings.Count(m, " expires ") != 1 {
			t.Errorf("after an advert from %s: live map, want %s → %s:\n%s", step.o.Source, vip, step.want, m)
		}
	}
}

func TestRelayNoBounce(t *testing.T) {
	// Both nodes relay the VIP to each other (the old one hears the new
	// holder; the new one learnt the old one from a resignation and from
	// its adverts). A packet no connection of either expects goes once from
	// the new node to the old one, which answers it with a reset and never
	// sends it back: dup keeps the TTL, so without the TTL of 1 the two
	// would pass it between them until the map entries expire.
	l := newRelayLab(t, "rn", false)
	rNew := &Relay{Interface: "eth0", VIPs: []netip.Addr{l.vip}, For: time.Minute, Live: time.Minute}
	rOld := &Relay{Interface: "eth0", VIPs: []netip.Addr{l.vip}, For: time.Minute, Live: time.Minute}
	for _, r := range []*Relay{rNew, rOld} {
		r.Failed = func(err error) { t.Error(err) }
	}
	startRelay(t, l.new, rNew)
	startRelay(t, l.old, rOld)
	oldAddr, newAddr := netip.MustParseAddr("198.51.100.11"), netip.MustParseAddr("198.51.100.12")
	inNS(t, l.new, func() {
		rNew.Advertised(Observation{Source: oldAddr, Advert: Advert{Version: 3, VRID: 1, Priority: 250, Addresses: []netip.Addr{l.vip}}})
		if !rNew.TakenOver(l.vip, oldAddr, time.Minute) {
			t.Error("TakenOver started no relay")
		}
	})
	inNS(t, l.old, func() {
		rOld.Advertised(Observation{Source: newAddr, Advert: Advert{Version: 3, VRID: 1, Priority: 250, Addresses: []netip.Addr{l.vip}}})
	})
	l.handOver(t)

	// A bare ACK from the client to the VIP: no socket anywhere expects it.
	inNS(t, l.client, func() {
		c, err := net.ListenPacket("ip4:tcp", "198.51.100.201")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.WriteTo(tcpACK(netip.MustParseAddr("198.51.100.201"), l.vip, 40000, 9000), &net.IPAddr{IP: l.vip.AsSlice()}); err != nil {
			t.Fatal(err)
		}
	})
	time.Sleep(300 * time.Millisecond)
	if n := relayCount(t, l.new); n != 1 {
		t.Errorf("the new node relayed %d packets, want 1:\n%s", n, nftIn(t, l.new, "list", "chain", "ip", RelayTable, "prerouting"))
	}
	if n := relayCount(t, l.old); n != 0 {
		t.Errorf("the old node relayed %d packets back, want 0:\n%s", n, nftIn(t, l.old, "list", "chain", "ip", RelayTable, "prerouting"))
	}
}

// relayCount is how many packets the IPv4 relay rules of ns have sent on.
func relayCount(t *testing.T, ns string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(nftIn(t, ns, "list", "chain", "ip", RelayTable, "prerouting"), "\n") {
		if !strings.Contains(line, "dup to") {
			continue
		}
		f := strings.Fields(line[strings.Index(line, "counter packets"):])
		c, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("counter in %q: %v", line, err)
		}
		n += c
	}
	return n
}

// tcpACK is a TCP header with the ACK flag alone, its checksum over the
// IPv4 pseudo-header of src and dst.
func tcpACK(src, dst netip.Addr, sport, dport uint16) []byte {
	h := make([]byte, 20)
	binary.BigEndian.PutUint16(h[0:], sport)
	binary.BigEndian.PutUint16(h[2:], dport)
	binary.BigEndian.PutUint32(h[4:], 12345)
	binary.BigEndian.PutUint32(h[8:], 67890)
	h[12] = 5 << 4
	h[13] = 0x10 // ACK
	binary.BigEndian.PutUint16(h[14:], 65535)
	pseudo := append(append(src.AsSlice(), dst.AsSlice()...), 0, 6, 0, byte(len(h)))
	var sum uint32
	for _, b := range [][]byte{pseudo, h} {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(h[16:], ^uint16(sum))
	return h
}

// TestRelayScriptsKernel runs the setup script through the real nft and
// kernel twice (it replaces what is there) and the teardown twice (harmless
// without the tables).
func TestRelayScriptsKernel(t *testing.T) {
	ns := netnstest.New(t, "rk")
	run := func(script string) string {
		t.Helper()
		cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nft -f:\n%s\n%v: %s", script, err, out)
		}
		return nftIn(t, ns, "list", "ruleset")
	}
	setup, err := RelaySetupScript("eth0", []netip.Addr{netip.MustParseAddr("198.51.100.100"), netip.MustParseAddr("2001:db8::100")}, time.Second, 131*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	run(setup)
	if got := run(setup); strings.Count(got, "chain prerouting") != 2 || strings.Count(got, "map "+RelayMap) != 2 || strings.Count(got, "map "+RelayLiveMap) != 2 {
		t.Errorf("after the setup twice:\n%s", got)
	}
	if got := run(RelayTeardownScript()); strings.Contains(got, RelayTable) {
		t.Errorf("after the teardown:\n%s", got)
	}
	run(RelayTeardownScript())
}

// BenchmarkRelayAdd is what a resignation costs before the relay is in
// place: a new entry (the usual case) and a replaced one (a second hand-over
// of the VIP to another node within the relay time). Compare with the
// skew time of the next holder: 1.4 ms at priority 250, 60-ms adverts.
func BenchmarkRelayAdd(b *testing.B) {
	ns := netnstest.New(b, "rb")
	r := &Relay{Interface: "eth0", VIPs: []netip.Addr{netip.MustParseAddr("198.51.100.100")}}
	startRelay(b, ns, r)
	for _, bc := range []struct {
		name     string
		replaced bool
	}{{"new", false}, {"replaced", true}} {
		b.Run(bc.name, func(b *testing.B) {
			inNS(b, ns, func() {
				for i := 0; b.Loop(); i++ {
					vip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
					to := netip.MustParseAddr("198.51.100.11")
					if bc.replaced {
						vip, to = netip.MustParseAddr("198.51.100.100"), netip.AddrFrom4([4]byte{198, 51, 100, byte(11 + i%2)})
					}
					if err := r.add(RelayMap, vip, to, time.Minute); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
