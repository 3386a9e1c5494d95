package mdns

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
)

var (
	n1v4  = netip.MustParseAddr("198.51.100.11")
	n1v6  = netip.MustParseAddr("2001:db8:1::11")
	n1new = netip.MustParseAddr("198.51.100.111")
	n2v4  = netip.MustParseAddr("198.51.100.12")
	rogue = netip.MustParseAddr("198.51.100.66")
)

type step struct {
	at  time.Duration
	src netip.Addr
	msg func(t *testing.T, at time.Time) *dns.Msg
}

func ann(host, cluster string, k []byte, goodbye bool, addrs ...netip.Addr) func(*testing.T, time.Time) *dns.Msg {
	return func(t *testing.T, at time.Time) *dns.Msg { return announce(t, host, cluster, addrs, k, at, goodbye) }
}

// addrBye is a node's goodbye for addresses it no longer holds.
func addrBye(host string, gone ...netip.Addr) func(*testing.T, time.Time) *dns.Msg {
	return func(t *testing.T, _ time.Time) *dns.Msg {
		z := NewZone(host+".local.", "ocp4", []Service{DefaultService("ocp4", host)}, []netip.Addr{n1new}, nil)
		return roundTrip(t, z.AddrGoodbye(gone))
	}
}

// served returns the snapshot as "label=addr,addr," strings, in its own
// order: the tests' lists are sorted, so they check that it is too.
func served(h Heard) []string {
	var out []string
	for _, n := range h.Hosts {
		e := n.Label + "="
		for _, a := range n.Addrs {
			e += a.String() + ","
		}
		out = append(out, e)
	}
	return out
}

func TestCache(t *testing.T) {
	tests := []struct {
		name     string
		key      []byte
		filter   func(*Filter)
		steps    []step
		at       time.Duration // when the index is checked
		want     []string
		rejected map[string]int
	}{
		{name: "announcement served", steps: []step{{0, n1v4, ann("node1", "ocp4", nil, false, n1v4, n1v6)}},
			at: time.Second, want: []string{"node1=198.51.100.11,2001:db8:1::11,"}},
		{name: "hosts by label, addresses IPv4 first", steps: []step{
			{0, n2v4, ann("node2", "ocp4", nil, false, n2v4)},
			{0, n1v4, ann("node1", "ocp4", nil, false, n1v6, n1new, n1v4)}},
			at: time.Second, want: []string{"node1=198.51.100.11,198.51.100.111,2001:db8:1::11,", "node2=198.51.100.12,"}},
		{name: "host records expire after 120 s", steps: []step{{0, n1v4, ann("node1", "ocp4", nil, false, n1v4)}},
			at: 121 * time.Second},
		{name: "goodbye is not served", steps: []step{{0, n1v4, ann("node1", "ocp4", nil, false, n1v4)}, {time.Second, n1v4, ann("node1", "ocp4", nil, true, n1v4)}},
			at: time.Second},
		{name: "goodbye rescued within a second", steps: []step{
			{0, n1v4, ann("node1", "ocp4", nil, false, n1v4)},
			{time.Second, n1v4, ann("node1", "ocp4", nil, true, n1v4)},
			{1500 * time.Millisecond, n1v4, ann("node1", "ocp4", nil, false, n1v4)}},
			at: 3 * time.Second, want: []string{"node1=198.51.100.11,"}},
		{name: "flush replaces old address after one second", steps: []step{
			{0, n1v6, ann("node1", "ocp4", nil, false, n1v4, n1v6)},
			{5 * time.Second, n1v6, ann("node1", "ocp4", nil, false, n1new, n1v6)}},
			at: 6*time.Second + time.Millisecond, want: []string{"node1=198.51.100.111,2001:db8:1::11,"}},
		{name: "flush keeps both during the second", steps: []step{
			{0, n1v6, ann("node1", "ocp4", nil, false, n1v4, n1v6)},
			{5 * time.Second, n1v6, ann("node1", "ocp4", nil, false, n1new, n1v6)}},
			at: 5*time.Second + 500*time.Millisecond, want: []string{"node1=198.51.100.11,198.51.100.111,2001:db8:1::11,"}},
		{name: "address goodbye drops the old address at once", steps: []step{
			{0, n1v6, ann("node1", "ocp4", nil, false, n1v4, n1v6)},
			{5 * time.Second, n1v6, ann("node1", "ocp4", nil, false, n1new, n1v6)},
			{5 * time.Second, n1v6, addrBye("node1", n1v4)}},
			at: 5*time.Second + 10*time.Millisecond, want: []string{"node1=198.51.100.111,2001:db8:1::11,"}},
		{name: "address goodbye for the only address leaves no address", steps: []step{
			{0, n1v4, ann("node1", "ocp4", nil, false, n1v4)},
			{time.Second, n1v4, addrBye("node1", n1v4)}},
			at: time.Second + 10*time.Millisecond},
		{name: "address change from a known source", steps: []step{
			{0, n1v6, ann("node1", "ocp4", nil, false, n1v4, n1v6)},
			{5 * time.Second, n1v6, ann("node1", "ocp4", nil, false, n1new, n1v6)},
			{5 * time.Second, n1new, ann("node1", "ocp4", nil, false, n1new, n1v6)}},
			at: 7 * time.Second, want: []string{"node1=198.51.100.111,2001:db8:1::11,"}},
		{name: "unsigned: address change from an unknown source only conflicts", steps: []step{
			{0, n1v4, ann("node1", "ocp4", nil, false, n1v4)},
			{5 * time.Second, n1new, ann("node1", "ocp4", nil, false, n1new)}},
			at: 7 * time.Second, want: []string{"node1=198.51.100.11,"}, rejected: map[string]int{ReasonConflict: 1}},
		{name: "rogue claiming a live node conflicts", steps: []step{
			{0, n1v4, ann("node1", "ocp4", nil, false, n1v4)},
			{time.Second, rogue, ann("node1", "ocp4", nil, false, rogue)}},
			at: 3 * time.Second, want: []string{"node1=198.51.100.11,"}, rejected: map[string]int{ReasonConflict: 1}},
		{name: "same data from the node's other family", steps: []step{
			{0, n1v4, ann("node1", "ocp4", nil, false, n1v4, n1v6)},
			{0, netip.MustParseAddr("fe80::11"), ann("node1", "ocp4", nil, false, n1v4, n1v6)}},
			at: time.Second, want: []string{"node1=198.51.100.11,2001:db8:1::11,"}},
		{name: "rogue goodbye for a live node conflicts", steps: []step{
			{0, n1v4, ann("node1", "ocp4", nil, false, n1v4)},
			{time.Second, rogue, ann("node1", "ocp4", nil, true, n1v4)}},
			at: 3 * time.Second, want: []string{"node1=198.51.100.11,"}, rejected: map[string]int{ReasonConflict: 2}},
		{name: "name free after goodbye", steps: []step{
			{0, n1v4, ann("node1", "ocp4", nil, false, n1v4)},
			{time.Second, n1v4, ann("node1", "ocp4", nil, true, n1v4)},
			{3 * time.Second, n2v4, ann("node1", "ocp4", nil, false, n2v4)}},
			at: 4 * time.Second, want: []string{"node1=198.51.100.12,"}},
		{name: "other cluster", steps: []step{{0, n1v4, ann("node1", "other", nil, false, n1v4)}},
			at: time.Second, rejected: map[string]int{ReasonCluster: 1}},
		{name: "no cluster filter", filter: func(f *Filter) { f.Cluster = "" }, steps: []step{{0, n1v4, ann("node1", "other", nil, false, n1v4)}},
			at: time.Second, want: []string{"node1=198.51.100.11,"}},
		{name: "api-int is reserved", steps: []step{{0, rogue, ann("api-int", "ocp4", nil, false, rogue)}},
			at: time.Second, rejected: map[string]int{ReasonReserved: 1}},
		{name: "api is reserved", steps: []step{{0, rogue, ann("api", "ocp4", nil, false, rogue)}},
			at: time.Second, rejected: map[string]int{ReasonReserved: 1}},
		{name: "reserved set is a parameter", filter: func(f *Filter) { f.Reserved = []string{"node1"} }, steps: []step{{0, n1v4, ann("node1", "ocp4", nil, false, n1v4)}},
			at: time.Second, rejected: map[string]int{ReasonReserved: 1}},
		{name: "multi-label host", steps: []step{{0, rogue, func(t *testing.T, at time.Time) *dns.Msg {
			z := NewZone("x.apps.local.", "ocp4", []Service{{Instance: "ocp4 Workstation-x", Type: DefaultServiceType, Domain: "local.", Host: "x.apps.local.", Port: 1}}, []netip.Addr{rogue}, nil)
			return roundTrip(t, z.Announcement(Stamp{}, false))
		}}}, at: time.Second, rejected: map[string]int{ReasonName: 1}},
		{name: "OpenShift instance name without cluster TXT", steps: []step{{0, n1v4, func(t *testing.T, at time.Time) *dns.Msg {
			z := NewZone("node1.local.", "", []Service{DefaultService("ocp4", "node1")}, []netip.Addr{n1v4}, nil)
			return roundTrip(t, z.Announcement(Stamp{}, false))
		}}}, at: time.Second, want: []string{"node1=198.51.100.11,"}},
		{name: "signed accepted", key: key, steps: []step{{0, n1v4, ann("node1", "ocp4", key, false, n1v4, n1v6)}},
			at: time.Second, want: []string{"node1=198.51.100.11,2001:db8:1::11,"}},
		{name: "signed address change replaces at once", key: key, steps: []step{
			{0, n1v4, ann("node1", "ocp4", key, false, n1v4)},
			{time.Second, n1v4, ann("node1", "ocp4", key, false, n1new)}},
			at: time.Second, want: []string{"node1=198.51.100.111,"}},
		{name: "signed goodbye", key: key, steps: []step{
			{0, n1v4, ann("node1", "ocp4", key, false, n1v4)},
			{time.Second, n1v4, ann("node1", "ocp4", key, true, n1v4)}},
			at: time.Second},
		{name: "unsigned rejected", key: key, steps: []step{{0, n1v4, ann("node1", "ocp4", nil, false, n1v4)}},
			at: time.Second, rejected: map[string]int{ReasonUnsigned: 1}},
		{name: "wrong key", key: key, steps: []step{{0, n1v4, ann("node1", "ocp4", []byte("another-key-of-16-bytes"), false, n1v4)}},
			at: time.Second, rejected: map[string]int{ReasonSignature: 1}},
		{name: "stale", key: key, steps: []step{{0, n1v4, func(t *testing.T, at time.Time) *dns.Msg {
			return announce(t, "node1", "ocp4", []netip.Addr{n1v4}, key, at.Add(-time.Minute), false)
		}}}, at: time.Second, rejected: map[string]int{ReasonStale: 1}},
		{name: "tampered address", key: key, steps: []step{{0, rogue, func(t *testing.T, at time.Time) *dns.Msg {
			m := announce(t, "node1", "ocp4", []netip.Addr{n1v4}, key, at, false)
			m.Answer[3].(*dns.A).A = rogue.AsSlice()
			return m
		}}}, at: time.Second, rejected: map[string]int{ReasonSignature: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := testFilter()
			if tc.filter != nil {
				tc.filter(&f)
			}
			var v *Verifier
			if tc.key != nil {
				v = NewVerifier(tc.key)
			}
			c := NewCache(f, v)
			rejected := map[string]int{}
			for _, s := range tc.steps {
				now := t0.Add(s.at)
				c.Expire(now)
				res := c.Process(now, s.src, s.msg(t, now))
				for r, n := range res.Rejected {
					rejected[r] += n
				}
			}
			now := t0.Add(tc.at)
			c.Expire(now)
			if got := served(c.Heard(now)); !slices.Equal(got, tc.want) {
				t.Errorf("Served %v, want %v", got, tc.want)
			}
			for r, n := range tc.rejected {
				if rejected[r] != n {
					t.Errorf("Rejected %v, want %v", rejected, tc.rejected)
					break
				}
			}
			if len(tc.rejected) == 0 && len(rejected) > 0 {
				t.Errorf("Rejected %v, want none", rejected)
			}
		})
	}
}
