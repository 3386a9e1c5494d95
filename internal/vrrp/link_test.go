package vrrp

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// linkFixture is a cluster with an API group (VRID 222: 192.0.2.5 and
// 2001:db8::5) and an ingress group (VRID 223: 192.0.2.10), seen from a
// node whose API group peers are .12 and .13 (MACs ...:12 and ...:13 in
// the neighbour table; .13 has no entry) and which is in no ingress group.
type linkFixture struct {
	link     *Link
	guard    *Guard
	heard    *Heard
	resigned []Observation
	// advertised: what reached the relay's live map (Relay.Advertised).
	advertised []Observation
}

var (
	peerMAC12   = MAC{2, 0, 0, 0, 0, 0x12}
	peerMAC14v6 = MAC{2, 0, 0, 0, 0, 0x14}
	rogueMAC    = MAC{2, 0, 0, 0, 0, 0x66}
)

func newLinkFixture() *linkFixture {
	f := &linkFixture{guard: &Guard{Window: time.Second, Expiry: time.Minute}, heard: &Heard{}}
	f.guard.Start(time.Unix(0, 0))
	f.link = &Link{
		Cluster: []Instance{
			{Name: "ocp4_api_v4", VRID: 222, VIPs: addrs("192.0.2.5")},
			{Name: "ocp4_api_v6", VRID: 222, V6: true, VIPs: addrs("2001:db8::5")},
			{Name: "ocp4_ingress_v4", VRID: 223, VIPs: addrs("192.0.2.10")},
			{Name: "ocp4_ingress_v6", VRID: 223, V6: true},
		},
		Guard:      f.guard,
		Heard:      f.heard,
		Resigned:   func(o Observation) { f.resigned = append(f.resigned, o) },
		Advertised: func(o Observation) { f.advertised = append(f.advertised, o) },
		Own:        func(a netip.Addr) bool { return a == netip.MustParseAddr("198.51.100.11") },
		Neighbors: func() map[netip.Addr][]MAC {
			return map[netip.Addr][]MAC{
				netip.MustParseAddr("198.51.100.12"):  {peerMAC12},
				netip.MustParseAddr("2001:db8:1::14"): {peerMAC14v6},
				netip.MustParseAddr("198.51.100.66"):  {rogueMAC},
			}
		},
	}
	f.link.SetGroups([]LinkGroup{{VRID: 222, VIPs: addrs("192.0.2.5", "2001:db8::5"),
		Peers: addrs("198.51.100.12", "198.51.100.13", "2001:db8:1::14")}})
	return f
}

func advertFrom(src string, mac MAC, vrid, prio uint8, vips ...string) Observation {
	return Observation{Source: netip.MustParseAddr(src), MAC: mac,
		Advert: Advert{Version: 3, VRID: vrid, Priority: prio, Addresses: addrs(vips...)}}
}

// TestLinkVerdicts: each advert is judged once, and only a group peer's
// advert for exactly its group's VIPs under its router ID reaches Heard
// and the relay's live map (priority above 0) or the relay (priority 0);
// everything about the
// cluster reaches the guard; the rest nothing.
func TestLinkVerdicts(t *testing.T) {
	many := []string{"192.0.2.5"}
	for i := range 254 {
		many = append(many, fmt.Sprintf("10.9.%d.%d", i/200, i%200+1))
	}
	for _, tc := range []struct {
		name string
		o    Observation
		want LinkVerdict
	}{
		{"peer holds the API VIP", advertFrom("198.51.100.12", peerMAC12, 222, 210, "192.0.2.5"), Peer},
		{"peer resigns", advertFrom("198.51.100.12", peerMAC12, 222, 0, "192.0.2.5"), Peer},
		{"peer without a neighbour entry", advertFrom("198.51.100.13", rogueMAC, 222, 0, "192.0.2.5"), Peer},
		{"peer address from another MAC (forged)", advertFrom("198.51.100.12", rogueMAC, 222, 0, "192.0.2.5"), Other},
		{"IPv6 link-local from a peer's MAC", advertFrom("fe80::14", peerMAC14v6, 222, 0, "fe80::14", "2001:db8::5"), Peer},
		{"IPv6 link-local from the IPv4 peer's MAC", advertFrom("fe80::12", peerMAC12, 222, 200, "2001:db8::5"), Peer},
		{"IPv6 link-local from a stranger's MAC", advertFrom("fe80::66", rogueMAC, 222, 0, "2001:db8::5"), Other},
		{"IPv6 link-local without a MAC", advertFrom("fe80::14", MAC{}, 222, 0, "2001:db8::5"), Other},
		{"stranger with our VRID and VIP", advertFrom("198.51.100.66", rogueMAC, 222, 0, "192.0.2.5"), Other},
		{"peer, 255 addresses under our VRID", advertFrom("198.51.100.12", peerMAC12, 222, 0, many...), Other},
		{"peer, our VIP under another VRID", advertFrom("198.51.100.12", peerMAC12, 17, 0, "192.0.2.5"), Other},
		{"peer, a group this node is not in", advertFrom("198.51.100.12", peerMAC12, 223, 0, "192.0.2.10"), Other},
		{"peer, the other family's VIP", advertFrom("198.51.100.12", peerMAC12, 222, 0, "2001:db8::5"), Other},
		{"foreign VRID, foreign addresses", advertFrom("198.51.100.66", rogueMAC, 17, 0, "192.0.2.77"), Unrelated},
		{"our ingress VRID on IPv6, foreign addresses", advertFrom("fe80::66", rogueMAC, 223, 100, "2001:db8::77"), Other},
		{"our API VRID on another family's router", advertFrom("fe80::66", rogueMAC, 17, 100, "2001:db8::77"), Unrelated},
		{"ourselves", advertFrom("198.51.100.11", MAC{}, 222, 250, "192.0.2.5"), Unrelated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newLinkFixture()
			var got []LinkVerdict
			f.link.Verdict = func(v LinkVerdict) { got = append(got, v) }
			now := time.Unix(100, 0)
			f.link.Observe(tc.o, now)
			if !slices.Equal(got, []LinkVerdict{tc.want}) {
				t.Fatalf("verdicts %v, want [%v]", got, tc.want)
			}
			peer := tc.want == Peer
			if n := len(f.resigned); n != btoi(peer && tc.o.Advert.Priority == 0) {
				t.Errorf("relay told %d times", n)
			}
			if n := len(f.advertised); n != btoi(peer && tc.o.Advert.Priority > 0) {
				t.Errorf("relay's live map told %d times", n)
			}
			heard := len(f.heard.From(globalAddrs(tc.o.Advert.Addresses)[0], now.Add(-time.Second))) > 0
			if heard != (peer && tc.o.Advert.Priority > 0) {
				t.Errorf("heard = %v", heard)
			}
			f.guard.mu.Lock()
			guarded := len(f.guard.lastSeen)
			f.guard.mu.Unlock()
			if guarded != btoi(tc.want != Unrelated) {
				t.Errorf("guard keeps %d adverts", guarded)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestLinkFloodBounded floods the link's judge as a rogue host on the
// bridge would: 20,000 adverts of 255 addresses each (the cluster's VIPs
// among them), random VRIDs and the cluster's, spoofed sources (node
// addresses among them), a third of them resignations. What is kept stays
// within the bounds, nothing reaches Heard or the relay, and a real peer's
// resignation in the middle of it still does.
func TestLinkFloodBounded(t *testing.T) {
	f := newLinkFixture()
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Unix(100, 0)
	for i := range 20000 {
		var src netip.Addr
		switch i % 3 {
		case 0:
			src = netip.AddrFrom4([4]byte{198, 51, 100, byte(rng.IntN(254) + 1)})
		case 1:
			src = netip.AddrFrom4([4]byte{10, byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(254) + 1)})
		default:
			src = netip.MustParseAddr("198.51.100.12") // a peer's address, forged
		}
		vrid := uint8(rng.IntN(256))
		if i%8 == 0 {
			vrid = 222
		}
		a := Advert{Version: 3, VRID: vrid, Priority: uint8(rng.IntN(3) * 100), Addresses: make([]netip.Addr, 255)}
		for j := range a.Addresses {
			a.Addresses[j] = netip.AddrFrom4([4]byte{192, 0, 2, byte(rng.IntN(256))})
		}
		f.link.Observe(Observation{Source: src, MAC: rogueMAC, Advert: a}, now)
		if i == 10000 {
			f.link.Observe(advertFrom("198.51.100.12", peerMAC12, 222, 0, "192.0.2.5"), now)
		}
		now = now.Add(time.Millisecond)
	}
	if len(f.resigned) != 1 || f.resigned[0].Source != netip.MustParseAddr("198.51.100.12") || f.resigned[0].MAC != peerMAC12 {
		t.Errorf("relay told %v, want only the peer's resignation", f.resigned)
	}
	if len(f.advertised) != 0 {
		t.Errorf("relay's live map told of %d forged adverts", len(f.advertised))
	}
	f.heard.mu.Lock()
	heardVIPs := len(f.heard.from)
	f.heard.mu.Unlock()
	if heardVIPs != 0 {
		t.Errorf("heard remembers %d addresses from forged adverts", heardVIPs)
	}
	f.guard.mu.Lock()
	defer f.guard.mu.Unlock()
	if n := len(f.guard.lastSeen); n == 0 || n > maxTracked {
		t.Errorf("guard keeps %d adverts, want 1..%d", n, maxTracked)
	}
	for _, s := range f.guard.lastSeen {
		// The cluster's 3 VIPs, at most maxOtherAddrs others.
		if n := len(s.obs.Advert.Addresses); n > 3+maxOtherAddrs || cap(s.obs.Advert.Addresses) > 8 {
			t.Fatalf("guard keeps an advert of %d addresses (capacity %d): %v", n, cap(s.obs.Advert.Addresses), s.obs)
		}
		if s.obs.Omitted == 0 {
			t.Fatalf("a trimmed advert says nothing was omitted: %v", s.obs)
		}
	}
}

// TestLinkNeighborReads: a flood of strangers' link-local adverts (whose
// MACs the table lacks) reads the neighbour table a few times a second,
// not once per advert.
func TestLinkNeighborReads(t *testing.T) {
	f := newLinkFixture()
	reads := 0
	table := f.link.Neighbors
	f.link.Neighbors = func() map[netip.Addr][]MAC { reads++; return table() }
	now := time.Unix(100, 0)
	for range 1000 {
		f.link.Observe(advertFrom("fe80::66", rogueMAC, 222, 0, "2001:db8::5"), now)
		now = now.Add(time.Millisecond)
	}
	// One second of adverts: a read at the start, then one per retry period.
	if want := int(time.Second/neighborRetry) + 1; reads > want {
		t.Errorf("%d neighbour table reads for 1000 adverts in 1 s, want at most %d", reads, want)
	}
}

// TestTrimKeepsDetect: trimming an advert changes nothing Detect decides.
func TestTrimKeepsDetect(t *testing.T) {
	ours := []Instance{{Name: "ocp4_api_v4", VRID: 222, VIPs: addrs("192.0.2.5")}}
	long := []string{"192.0.2.5"}
	for i := range 200 {
		long = append(long, fmt.Sprintf("10.0.0.%d", i+1))
	}
	for _, o := range []Observation{
		advertFrom("198.51.100.66", MAC{}, 222, 100, long...),
		advertFrom("198.51.100.66", MAC{}, 7, 100, long...),
		advertFrom("198.51.100.66", MAC{}, 222, 100, "192.0.2.5"),
		advertFrom("198.51.100.66", MAC{}, 222, 100, "192.0.2.5", "192.0.2.5", "192.0.2.5"),
		advertFrom("198.51.100.66", MAC{}, 222, 100, "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"),
	} {
		before := Detect(ours, nil, nil, []Observation{o})
		after := Detect(ours, nil, nil, []Observation{Trim(o, ours)})
		if len(before) != len(after) || (len(before) > 0 && before[0].Kind != after[0].Kind) {
			t.Errorf("%d addresses: Detect %v before trimming, %v after", len(o.Advert.Addresses), before, after)
		}
	}
}

// TestLinkExcluded: an address a Services instance holds but leaves out
// of its adverts is the cluster's all the same: an advert naming it under
// a VRID of no cluster instance is the Guard's, and trimming keeps it.
func TestLinkExcluded(t *testing.T) {
	g := &Guard{Window: time.Second, Expiry: time.Minute}
	g.Start(time.Unix(0, 0))
	svc := Instance{Name: "ocp4_services_v4", VRID: 141, VIPs: addrs("203.0.113.1"), Excluded: addrs("203.0.113.3")}
	g.SetInstances([]Instance{svc}, nil, nil)
	var got []LinkVerdict
	l := &Link{Cluster: []Instance{svc}, Guard: g, Verdict: func(v LinkVerdict) { got = append(got, v) }}
	now := time.Unix(100, 0)
	l.Observe(advertFrom("198.51.100.66", rogueMAC, 7, 100, "192.0.2.77", "203.0.113.3"), now)
	l.Observe(advertFrom("198.51.100.66", rogueMAC, 8, 100, "192.0.2.77"), now)
	if !slices.Equal(got, []LinkVerdict{Other, Unrelated}) {
		t.Errorf("verdicts %v, want [other unrelated]", got)
	}
	cs := g.Conflicts(now)
	if len(cs) != 1 || cs[0].Kind != VIPUnderOtherID || cs[0].VRID != 7 {
		t.Errorf("conflicts %v, want the excluded address under VRID 7", cs)
	}
	long := []string{"203.0.113.3"}
	for i := range 20 {
		long = append(long, fmt.Sprintf("10.0.0.%d", i+1))
	}
	trimmed := Trim(advertFrom("198.51.100.66", MAC{}, 7, 100, long...), []Instance{svc})
	if !slices.Contains(trimmed.Advert.Addresses, netip.MustParseAddr("203.0.113.3")) || trimmed.Omitted != 16 {
		t.Errorf("trimmed to %v (+%d), want the excluded address kept", trimmed.Advert.Addresses, trimmed.Omitted)
	}
}

// TestHeardBounded: whatever it is fed, Heard keeps at most maxHeardVIPs
// addresses; an old one makes room for a new one.
func TestHeardBounded(t *testing.T) {
	h := &Heard{}
	t0 := time.Unix(1000, 0)
	for i := range 4 * maxHeardVIPs {
		h.Observe(advertFrom("198.51.100.12", peerMAC12, 222, 100, fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)), t0)
	}
	if n := len(h.from); n != maxHeardVIPs {
		t.Errorf("%d addresses remembered, want the bound %d", n, maxHeardVIPs)
	}
	later := t0.Add(2 * heardExpiry)
	h.Observe(advertFrom("198.51.100.12", peerMAC12, 222, 100, "192.0.2.5"), later)
	if !h.Since(netip.MustParseAddr("192.0.2.5"), t0) {
		t.Error("a VIP heard after the others expired found no room")
	}
	if got := h.MACs(netip.MustParseAddr("192.0.2.5"), t0); !slices.Equal(got, []MAC{peerMAC12}) {
		t.Errorf("MACs = %v", got)
	}
}

// TestGuardBoundsAddresses: an advert fed to the guard untrimmed keeps at
// most maxGuardAddrs addresses, in a list of its own.
func TestGuardBoundsAddresses(t *testing.T) {
	g := &Guard{Window: time.Second, Expiry: time.Minute}
	long := make([]string, 255)
	for i := range long {
		long[i] = fmt.Sprintf("10.2.0.%d", i+1)
	}
	g.Observe(advertFrom("198.51.100.66", MAC{}, 222, 100, long...), time.Unix(1, 0))
	for _, s := range g.lastSeen {
		if n := len(s.obs.Advert.Addresses); n != maxGuardAddrs || cap(s.obs.Advert.Addresses) != maxGuardAddrs || s.obs.Omitted != 255-maxGuardAddrs {
			t.Errorf("kept %d addresses (capacity %d), %d omitted", n, cap(s.obs.Advert.Addresses), s.obs.Omitted)
		}
	}
}

// BenchmarkLinkFlood is the cost of judging one forged advert of 255
// addresses (what a rogue host sends ~1,000 of a second in the lab).
func BenchmarkLinkFlood(b *testing.B) {
	f := newLinkFixture()
	f.link.Neighbors = nil
	a := Advert{Version: 3, VRID: 222, Priority: 0, Addresses: make([]netip.Addr, 255)}
	for j := range a.Addresses {
		a.Addresses[j] = netip.AddrFrom4([4]byte{192, 0, 2, byte(j)})
	}
	now := time.Unix(100, 0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		src := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		f.link.Observe(Observation{Source: src, Advert: a}, now)
	}
}
