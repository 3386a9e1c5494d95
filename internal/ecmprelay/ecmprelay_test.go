package ecmprelay

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestNewPlan(t *testing.T) {
	for _, tc := range []struct {
		name        string
		self, peers []netip.Addr
		local       string // "" : empty plan
		want        []string
	}{
		{"IPv4 between IPv4 nodes", addrs("10.0.1.2"), addrs("10.0.2.2", "10.0.3.2"), "10.0.1.2", []string{"10.0.2.2", "10.0.3.2"}},
		{"dual stack talks IPv4", addrs("fd00::2", "10.0.1.2"), addrs("fd00:2::2", "10.0.2.2"), "10.0.1.2", []string{"10.0.2.2"}},
		{"IPv6-only", addrs("fd00:1::2"), addrs("fd00:2::2", "fd00:3::2"), "fd00:1::2", []string{"fd00:2::2", "fd00:3::2"}},
		{"IPv6 when no peer has IPv4", addrs("10.0.1.2", "fd00:1::2"), addrs("fd00:2::2"), "fd00:1::2", []string{"fd00:2::2"}},
		{"own addresses, duplicates and order", addrs("10.0.1.2"), addrs("10.0.3.2", "10.0.1.2", "10.0.2.2", "10.0.3.2"), "10.0.1.2", []string{"10.0.2.2", "10.0.3.2"}},
		{"mapped addresses", addrs("::ffff:10.0.1.2"), addrs("::ffff:10.0.2.2"), "10.0.1.2", []string{"10.0.2.2"}},
		{"no peer", addrs("10.0.1.2"), nil, "", nil},
		{"only itself", addrs("10.0.1.2"), addrs("10.0.1.2"), "", nil},
		{"no address of the peers' family", addrs("10.0.1.2"), addrs("fd00:2::2"), "", nil},
		{"link-local and loopback are no endpoints", addrs("127.0.0.1", "fe80::1"), addrs("fe80::2", "127.0.0.2"), "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlan(tc.self, tc.peers)
			if err != nil {
				t.Fatal(err)
			}
			if tc.local == "" {
				if !p.Empty() {
					t.Fatalf("plan %+v, want an empty one", p)
				}
				return
			}
			if p.Local != netip.MustParseAddr(tc.local) {
				t.Errorf("local %s, want %s", p.Local, tc.local)
			}
			var got []string
			for i, pe := range p.Peers {
				got = append(got, pe.Addr.String())
				if want := fmt.Sprintf("169.254.91.%d", i+1); pe.Key4.String() != want {
					t.Errorf("peer %s: key %s, want %s", pe.Addr, pe.Key4, want)
				}
				if want := fmt.Sprintf("fe80:91::%x", i+1); pe.Key6.String() != want {
					t.Errorf("peer %s: key %s, want %s", pe.Addr, pe.Key6, want)
				}
				if pe.MAC.String() != MACFor(pe.Addr).String() {
					t.Errorf("peer %s: MAC %s, want %s", pe.Addr, pe.MAC, MACFor(pe.Addr))
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("peers %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNewPlanMaxPeers(t *testing.T) {
	var peers []netip.Addr
	for i := range MaxPeers + 6 {
		peers = append(peers, netip.AddrFrom4([4]byte{10, 1, byte(i / 200), byte(1 + i%200)}))
	}
	p, err := NewPlan(addrs("10.0.0.1"), peers)
	if err == nil || !strings.Contains(err.Error(), "first 254") {
		t.Errorf("error %v, want one that says only the first %d are relayed to", err, MaxPeers)
	}
	if len(p.Peers) != MaxPeers || p.Peers[MaxPeers-1].Key4 != netip.MustParseAddr("169.254.91.254") {
		t.Errorf("%d peers, the last key %s; want %d, 169.254.91.254", len(p.Peers), p.Peers[len(p.Peers)-1].Key4, MaxPeers)
	}
}

func TestMACFor(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"10.9.1.2", "02:49:0a:09:01:02"},
		{"::ffff:10.9.1.2", "02:49:0a:09:01:02"},
		{"192.168.0.255", "02:49:c0:a8:00:ff"},
	} {
		if got := MACFor(netip.MustParseAddr(tc.addr)).String(); got != tc.want {
			t.Errorf("MACFor(%s) = %s, want %s", tc.addr, got, tc.want)
		}
	}
	// IPv6: hashed, still locally administered unicast, and distinct.
	seen := map[string]string{}
	for _, s := range []string{"fd00:91:1::2", "fd00:91:2::2", "fd00:91:3::2", "2001:db8::2"} {
		m := MACFor(netip.MustParseAddr(s))
		if len(m) != 6 || m[0] != 0x02 {
			t.Errorf("MACFor(%s) = %s: want 6 bytes, locally administered unicast", s, m)
		}
		if o, ok := seen[m.String()]; ok {
			t.Errorf("MACFor(%s) = MACFor(%s) = %s", s, o, m)
		}
		seen[m.String()] = s
	}
}

func TestMessage(t *testing.T) {
	for _, m := range []Message{
		{ID: 7, For: 500 * time.Millisecond, VIPs: addrs("10.91.100.1", "fd00:91:100::1")},
		{Ack: true, ID: 1 << 31},
		{ID: 1, For: time.Hour, VIPs: addrs("10.0.0.1")}, // capped
	} {
		got, err := ParseMessage(m.Marshal())
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		want := m
		want.For = min(m.For, MaxLeave)
		if got.Ack != want.Ack || got.ID != want.ID || got.For != want.For || !slices.Equal(got.VIPs, want.VIPs) {
			t.Errorf("round trip of %+v = %+v", want, got)
		}
	}
	good := Message{ID: 3, For: time.Second, VIPs: addrs("10.0.0.1")}.Marshal()
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"short header", good[:headerLen-1]},
		{"wrong magic", append([]byte("XDNSRLY"), good[7:]...)},
		{"version 2", func() []byte { b := slices.Clone(good); b[7] = 2; return b }()},
		{"unknown flag", func() []byte { b := slices.Clone(good); b[8] = 2; return b }()},
		{"cut address", good[:len(good)-1]},
		{"trailing byte", append(slices.Clone(good), 0)},
		{"count beyond the bytes", func() []byte { b := slices.Clone(good); b[headerLen-1] = 2; return b }()},
	} {
		if _, err := ParseMessage(tc.b); !errors.Is(err, ErrMessage) {
			t.Errorf("%s: error %v, want ErrMessage", tc.name, err)
		}
	}
}

func TestAccept(t *testing.T) {
	p, err := NewPlan(addrs("10.0.1.2"), addrs("10.0.2.2", "10.0.3.2"))
	if err != nil {
		t.Fatal(err)
	}
	vips := addrs("10.91.100.1", "fd00:91:100::1")
	for _, tc := range []struct {
		name    string
		from    string
		m       Message
		want    []Entry
		wantErr string
	}{
		{"a peer leaving both VIPs", "10.0.3.2", Message{For: time.Second, VIPs: addrs("10.91.100.1", "fd00:91:100::1")},
			[]Entry{{addrs("10.91.100.1")[0], addrs("169.254.91.2")[0], time.Second}, {addrs("fd00:91:100::1")[0], addrs("fe80:91::2")[0], time.Second}}, ""},
		{"not our VIP, and a duplicate", "10.0.2.2", Message{For: time.Second, VIPs: addrs("10.91.100.9", "10.91.100.1", "10.91.100.1")},
			[]Entry{{addrs("10.91.100.1")[0], addrs("169.254.91.1")[0], time.Second}}, ""},
		{"capped", "::ffff:10.0.2.2", Message{For: time.Hour, VIPs: addrs("10.91.100.1")},
			[]Entry{{addrs("10.91.100.1")[0], addrs("169.254.91.1")[0], MaxLeave}}, ""},
		{"no time", "10.0.2.2", Message{VIPs: addrs("10.91.100.1")}, nil, ""},
		{"not a peer", "10.0.9.9", Message{For: time.Second, VIPs: addrs("10.91.100.1")}, nil, "no peer"},
		{"itself", "10.0.1.2", Message{For: time.Second, VIPs: addrs("10.91.100.1")}, nil, "no peer"},
		{"an answer", "10.0.2.2", Message{Ack: true}, nil, "answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Accept(p, vips, netip.MustParseAddr(tc.from), tc.m)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("entries %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSetupScript(t *testing.T) {
	s := SetupScript()
	for _, want := range []string{
		`table ip infradns_ecmp_relay {`,
		`table ip6 infradns_ecmp_relay {`,
		`type ipv4_addr : ipv4_addr`,
		`iifname "infradns-relay" fib daddr type != local counter drop`,
		`iifname != "infradns-relay" ip6 daddr @leaving tcp flags & syn == 0 socket wildcard 1 counter dup to ip6 daddr map @leaving device "infradns-relay" drop`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("script has no %q:\n%s", want, s)
		}
	}
	if !strings.HasPrefix(s, TeardownScript()) {
		t.Errorf("script does not start by removing the old tables")
	}
}
