package mdns

import (
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
	// The same announcement again, and an older one: neither brings it back.
	for _, m := range []*dns.Msg{first, announce(t, "node1", "ocp4", []netip.Addr{n1v4}, key, t0.Add(500*time.Millisecond), false)} {
		res := c.Process(t0.Add(2*time.Second), rogue, m)
		if res.Rejected[ReasonReplay] != 1 {
			t.Errorf("Replay: %+v, want rejected as replay", res)
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
