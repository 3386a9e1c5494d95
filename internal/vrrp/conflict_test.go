package vrrp

import (
	"net/netip"
	"testing"
)

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, x := range s {
		out[i] = netip.MustParseAddr(x)
	}
	return out
}

func obs(src string, vrid uint8, a ...string) Observation {
	return Observation{Source: netip.MustParseAddr(src), Advert: Advert{Version: 3, VRID: vrid, Priority: 100, Addresses: addrs(a...)}}
}

func TestDetect(t *testing.T) {
	ours := []Instance{
		{Name: "ocp4_api_v4", VRID: 14, VIPs: addrs("192.0.2.5")},
		{Name: "ocp4_api_v6", VRID: 14, V6: true, VIPs: addrs("2001:db8::5")},
		{Name: "ocp4_ingress_v4", VRID: 20, VIPs: addrs("192.0.2.10")},
	}
	self := addrs("198.51.100.11")
	peers := addrs("198.51.100.11", "198.51.100.12", "198.51.100.13")
	tests := []struct {
		name  string
		peers []netip.Addr
		seen  []Observation
		want  []Conflict
	}{
		{"our own cluster", peers, []Observation{
			obs("198.51.100.12", 14, "192.0.2.5"),
			obs("198.51.100.13", 20, "192.0.2.10"),
			obs("198.51.100.11", 14, "192.0.2.99"), // our own advert looped back
		}, nil},
		{"another cluster with our api id", peers, []Observation{
			obs("198.51.100.50", 14, "192.0.2.77"),
			obs("198.51.100.50", 14, "192.0.2.77"), // seen twice, reported once
		}, []Conflict{{Kind: ForeignAddresses, Instance: "ocp4_api_v4", VRID: 14, Source: netip.MustParseAddr("198.51.100.50"), Addresses: addrs("192.0.2.77")}}},
		{"our vip under another id", peers, []Observation{
			obs("198.51.100.60", 99, "192.0.2.10", "192.0.2.11"),
		}, []Conflict{{Kind: VIPUnderOtherID, Instance: "ocp4_ingress_v4", VRID: 99, Source: netip.MustParseAddr("198.51.100.60"), Addresses: addrs("192.0.2.10", "192.0.2.11")}}},
		{"unregistered node", peers, []Observation{
			obs("198.51.100.14", 14, "192.0.2.5"),
		}, []Conflict{{Kind: UnknownPeer, Instance: "ocp4_api_v4", VRID: 14, Source: netip.MustParseAddr("198.51.100.14"), Addresses: addrs("192.0.2.5")}}},
		{"no peer list: no unknown-peer verdict", nil, []Observation{
			obs("198.51.100.14", 14, "192.0.2.5"),
		}, nil},
		{"v6 advert with link-local first", peers, []Observation{
			obs("fe80::12", 14, "fe80::12", "2001:db8::5"),
		}, nil},
		{"v6 foreign, v4 instance unaffected", nil, []Observation{
			obs("fe80::99", 14, "2001:db8::77"),
		}, []Conflict{{Kind: ForeignAddresses, Instance: "ocp4_api_v6", VRID: 14, Source: netip.MustParseAddr("fe80::99"), Addresses: addrs("2001:db8::77")}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Detect(ours, self, tc.peers, tc.seen)
			if len(got) != len(tc.want) {
				t.Fatalf("Got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i].String() != tc.want[i].String() {
					t.Errorf("Conflict %d = %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestDetectExcluded: a Services instance advertises its first address
// and holds the others left out of its adverts (Instance.Excluded). Its
// peers' adverts list the first alone: no clash. Listing them all is
// what keepalived rejects, a clash; one of them under another VRID is a
// VIP held twice.
func TestDetectExcluded(t *testing.T) {
	ours := []Instance{{Name: "ocp4_services_v4", VRID: 141, VIPs: addrs("203.0.113.1"), Excluded: addrs("203.0.113.3", "203.0.113.5")}}
	peers := addrs("198.51.100.11", "198.51.100.12")
	src := netip.MustParseAddr("198.51.100.12")
	tests := []struct {
		name string
		seen []Observation
		want []Conflict
	}{
		{"a peer advertises the first address", []Observation{obs("198.51.100.12", 141, "203.0.113.1")}, nil},
		{"every address in the advert", []Observation{obs("198.51.100.12", 141, "203.0.113.1", "203.0.113.3", "203.0.113.5")},
			[]Conflict{{Kind: ForeignAddresses, Instance: "ocp4_services_v4", VRID: 141, Source: src, Addresses: addrs("203.0.113.1", "203.0.113.3", "203.0.113.5")}}},
		{"an excluded address in our advert's place", []Observation{obs("198.51.100.12", 141, "203.0.113.3")},
			[]Conflict{{Kind: ForeignAddresses, Instance: "ocp4_services_v4", VRID: 141, Source: src, Addresses: addrs("203.0.113.3")}}},
		{"an excluded address under another VRID", []Observation{obs("198.51.100.12", 7, "203.0.113.5")},
			[]Conflict{{Kind: VIPUnderOtherID, Instance: "ocp4_services_v4", VRID: 7, Source: src, Addresses: addrs("203.0.113.5")}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Detect(ours, nil, peers, tc.seen)
			if len(got) != len(tc.want) {
				t.Fatalf("Got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i].String() != tc.want[i].String() {
					t.Errorf("Conflict %d = %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}
