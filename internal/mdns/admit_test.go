package mdns

import (
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestCacheReplay(t *testing.T) {
	c := NewCache(testFilter(), NewVerifier(key))
	first := announce(t, "node1", "ocp4", []netip.Addr{n1v4}, key, t0, false)
	if res := c.Process(t0, n1v4, first); res.Accepted != 1 {
		t.Fatalf("First announcement: %+v", res)
	}
	bye := announce(t, "node1", "ocp4", []netip.Addr{n1v4}, key, t0.Add(time.Second), true)
	c.Process(t0.Add(time.Second), n1v4, bye)
	// The same announcement again, an older one, and one a moment older
	// than the goodbye (as a reordered packet would be): none brings it
	// back; the last is ignored, not counted as a replay.
	for _, tc := range []struct {
		name   string
		m      *dns.Msg
		replay int
	}{
		{"the same again", first, 1},
		{"older by 1.5 s", announce(t, "node1", "ocp4", []netip.Addr{n1v4}, key, t0.Add(-500*time.Millisecond), false), 1},
		{"older by 0.5 s", announce(t, "node1", "ocp4", []netip.Addr{n1v4}, key, t0.Add(500*time.Millisecond), false), 0},
	} {
		res := c.Process(t0.Add(2*time.Second), rogue, tc.m)
		if res.Rejected[ReasonReplay] != tc.replay || res.Accepted != 0 {
			t.Errorf("%s: %+v, want %d replays and nothing accepted", tc.name, res, tc.replay)
		}
	}
	now := t0.Add(3 * time.Second)
	c.Expire(now)
	if h := c.Heard(now); len(h.Hosts) != 0 {
		t.Errorf("Served %v after replays, want nothing", served(h))
	}
}

func TestCacheQueriesMissing(t *testing.T) {
	c := NewCache(testFilter(), nil)
	m := announce(t, "node1", "ocp4", []netip.Addr{n1v4}, nil, t0, false)
	m.Answer = m.Answer[:3] // PTR, SRV, TXT without the addresses
	res := c.Process(t0, n1v4, m)
	want := []dns.Question{q("node1.local.", dns.TypeA), q("node1.local.", dns.TypeAAAA)}
	if !slices.Equal(res.Query, want) {
		t.Errorf("Query %v, want %v", res.Query, want)
	}
	// The answer to that query alone completes the node.
	a := new(dns.Msg)
	a.Response = true
	a.Answer = testZone(nil).addrRRs(dns.TypeA, rrOpts{flush: true})
	c.Process(t0.Add(100*time.Millisecond), n1v4, a)
	if got := served(c.Heard(t0.Add(time.Second))); !slices.Equal(got, []string{"node1=198.51.100.11,"}) {
		t.Errorf("Served %v", got)
	}
}

// TestCacheChanged checks that Result.Changed says whether what is served
// changed, so that the records a link repeats all the time (refreshes, the
// other family's copy, answers to other resolvers' queries) do not make a
// Browser rebuild its answers, and every real change does.
func TestCacheChanged(t *testing.T) {
	txtOnly := func(t *testing.T, at time.Time) *dns.Msg {
		m := announce(t, "node1", "ocp4", []netip.Addr{n1v4}, nil, at, false)
		m.Answer = []dns.RR{m.Answer[2]} // the TXT record alone
		return m
	}
	tests := []struct {
		name  string
		key   []byte
		steps []step
		want  []bool // Changed of each step
	}{
		{name: "new, repeated, other family", steps: []step{
			{0, n1v4, ann("node1", "ocp4", nil, false, n1v4, n1v6)},
			{time.Second, n1v4, ann("node1", "ocp4", nil, false, n1v4, n1v6)},
			{time.Second, netip.MustParseAddr("fe80::11"), ann("node1", "ocp4", nil, false, n1v4, n1v6)},
			{2 * time.Second, n1v4, txtOnly}},
			want: []bool{true, false, false, false}},
		{name: "address added, goodbye, rescue", steps: []step{
			{0, n1v4, ann("node1", "ocp4", nil, false, n1v4)},
			{time.Second, n1v4, ann("node1", "ocp4", nil, false, n1v4, n1new)},
			{2 * time.Second, n1v4, ann("node1", "ocp4", nil, true, n1v4, n1new)},
			{2*time.Second + 100*time.Millisecond, n1v4, ann("node1", "ocp4", nil, true, n1v4, n1new)},
			{2*time.Second + 500*time.Millisecond, n1v4, ann("node1", "ocp4", nil, false, n1v4, n1new)}},
			want: []bool{true, true, true, false, true}},
		{name: "address goodbye", steps: []step{
			{0, n1v6, ann("node1", "ocp4", nil, false, n1v4, n1v6)},
			{time.Second, n1v6, addrBye("node1", n1v4)}},
			want: []bool{true, true}},
		{name: "refused and over the limit change nothing", steps: []step{
			{0, n1v4, ann("node1", "ocp4", nil, false, addrsFrom(0, MaxHostAddrs)...)},
			{time.Second, n1v4, ann("node1", "ocp4", nil, false, addrsFrom(100, 4)...)},
			{time.Second, rogue, ann("node1", "ocp4", nil, false, rogue)}},
			want: []bool{true, false, false}},
		{name: "signed: new, repeated, address change, goodbye", key: key, steps: []step{
			{0, n1v4, ann("node1", "ocp4", key, false, n1v4, n1v6)},
			{time.Second, n1v4, ann("node1", "ocp4", key, false, n1v6, n1v4)},
			{2 * time.Second, n1v4, ann("node1", "ocp4", key, false, n1new, n1v6)},
			{3 * time.Second, n1v4, ann("node1", "ocp4", key, true, n1new, n1v6)}},
			want: []bool{true, false, true, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var v *Verifier
			if tc.key != nil {
				v = NewVerifier(tc.key)
			}
			c := NewCache(testFilter(), v)
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				c.Expire(now)
				if got := c.Process(now, s.src, s.msg(t, now)).Changed; got != tc.want[i] {
					t.Errorf("Step %d: Changed = %v, want %v", i, got, tc.want[i])
				}
			}
		})
	}
}

// TestExpireChanged checks that Expire reports a change only when a served
// record expires, not when a goodbye's grace second ends.
func TestExpireChanged(t *testing.T) {
	c := NewCache(testFilter(), nil)
	c.Process(t0, n1v4, announce(t, "node1", "ocp4", []netip.Addr{n1v4}, nil, t0, false))
	c.Process(t0, n2v4, announce(t, "node2", "ocp4", []netip.Addr{n2v4}, nil, t0, false))
	at := t0.Add(time.Second)
	c.Process(at, n1v4, announce(t, "node1", "ocp4", []netip.Addr{n1v4}, nil, at, true))
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{
		{2 * time.Second, false},         // node1's goodbye records go: already not served
		{119 * time.Second, false},       // nothing expires
		{HostTTL * time.Second, true},    // node2's address expires
		{ServiceTTL * time.Second, true}, // node2's SRV expires: counted, though it had no address left
		{2 * ServiceTTL * time.Second, false},
	} {
		if got := c.Expire(t0.Add(tc.at)); got != tc.want {
			t.Errorf("Expire at %v = %v, want %v", tc.at, got, tc.want)
		}
	}
}

// TestCacheSignedCopies: a publisher sends each packet on both families, so
// a resolver on a link with IPv6 (every Linux interface has a link-local
// address) hears every signed announcement twice, from two source
// addresses, milliseconds apart. The second copy is the same announcement:
// neither accepted again nor refused (it was counted as a replay and its
// addresses as unsigned, so every healthy signed cluster raised
// InfradnsMDNSRejections). A real replay is still refused, once, and a
// copy never brings back what a newer announcement changed.
func TestCacheSignedCopies(t *testing.T) {
	ll := netip.MustParseAddr("fe80::11") // node1's IPv6 link-local address
	type msg struct {
		at    time.Duration // its timestamp, from t0
		nonce string
		bye   bool
		addrs []netip.Addr
	}
	type send struct {
		at  time.Duration
		src netip.Addr
		msg int // index in msgs: the same index twice is two copies of one packet
	}
	both := []netip.Addr{n1v4, n1v6}
	tests := []struct {
		name     string
		msgs     []msg
		sends    []send
		accepted int
		rejected map[string]int
		want     []string // served at 3 s
	}{
		{name: "a copy from the other family",
			msgs:     []msg{{0, "a", false, both}},
			sends:    []send{{0, n1v4, 0}, {3 * time.Millisecond, ll, 0}},
			accepted: 1, want: []string{"node1=198.51.100.11,2001:db8:1::11,"}},
		{name: "copies interleaved with the next answer (two sockets, no order between them)",
			msgs:     []msg{{0, "a", false, both}, {10 * time.Millisecond, "b", false, both}},
			sends:    []send{{0, n1v4, 0}, {10 * time.Millisecond, n1v4, 1}, {12 * time.Millisecond, ll, 0}, {14 * time.Millisecond, ll, 1}},
			accepted: 2, want: []string{"node1=198.51.100.11,2001:db8:1::11,"}},
		{name: "a goodbye's copy",
			msgs:     []msg{{0, "a", false, both}, {time.Second, "b", true, both}},
			sends:    []send{{0, n1v4, 0}, {2 * time.Millisecond, ll, 0}, {time.Second, n1v4, 1}, {time.Second + 2*time.Millisecond, ll, 1}},
			accepted: 2},
		{name: "a copy after the goodbye brings nothing back",
			msgs:     []msg{{0, "a", false, both}, {100 * time.Millisecond, "b", true, both}},
			sends:    []send{{0, n1v4, 0}, {100 * time.Millisecond, n1v4, 1}, {500 * time.Millisecond, rogue, 0}},
			accepted: 2},
		{name: "a copy after an address change brings nothing back",
			msgs:     []msg{{0, "a", false, both}, {100 * time.Millisecond, "b", false, []netip.Addr{n1new}}},
			sends:    []send{{0, n1v4, 0}, {100 * time.Millisecond, n1v4, 1}, {500 * time.Millisecond, ll, 0}},
			accepted: 2, want: []string{"node1=198.51.100.111,"}},
		{name: "replayed after the copies' second: a replay, not unsigned as well",
			msgs:     []msg{{0, "a", false, both}},
			sends:    []send{{0, n1v4, 0}, {2 * time.Millisecond, ll, 0}, {2 * time.Second, rogue, 0}},
			accepted: 1, rejected: map[string]int{ReasonReplay: 1}, want: []string{"node1=198.51.100.11,2001:db8:1::11,"}},
		{name: "the same nonce signed over other addresses: a replay",
			msgs:     []msg{{0, "a", false, both}, {0, "a", false, []netip.Addr{rogue}}},
			sends:    []send{{0, n1v4, 0}, {5 * time.Millisecond, rogue, 1}},
			accepted: 1, rejected: map[string]int{ReasonReplay: 1}, want: []string{"node1=198.51.100.11,2001:db8:1::11,"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pkts := make([]*dns.Msg, len(tc.msgs))
			for i, m := range tc.msgs {
				z := NewZone("node1.local.", "ocp4", []Service{DefaultService("ocp4", "node1")}, m.addrs, key)
				pkts[i] = roundTrip(t, z.Announcement(Stamp{TS: t0.Add(m.at).UnixMilli(), Nonce: m.nonce}, m.bye))
			}
			c := NewCache(testFilter(), NewVerifier(key))
			accepted, rejected := 0, map[string]int{}
			for _, s := range tc.sends {
				now := t0.Add(s.at)
				c.Expire(now)
				res := c.Process(now, s.src, pkts[s.msg])
				accepted += res.Accepted
				for r, n := range res.Rejected {
					rejected[r] += n
				}
			}
			if accepted != tc.accepted {
				t.Errorf("Accepted %d, want %d", accepted, tc.accepted)
			}
			if !maps.Equal(rejected, tc.rejected) {
				t.Errorf("Rejected %v, want %v", rejected, tc.rejected)
			}
			now := t0.Add(3 * time.Second)
			c.Expire(now)
			if got := served(c.Heard(now)); !slices.Equal(got, tc.want) {
				t.Errorf("Served %v, want %v", got, tc.want)
			}
		})
	}
}
