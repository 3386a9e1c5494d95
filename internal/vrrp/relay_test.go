package vrrp

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestRelaySetupScript(t *testing.T) {
	s, err := RelaySetupScript("bond0.42")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"table ip infradns_relay {}\ndelete table ip infradns_relay\n",
		"table ip6 infradns_relay {}\ndelete table ip6 infradns_relay\n",
		`iifname "bond0.42" tcp flags & syn == 0 socket wildcard 1 counter dup to ip daddr map @resigned device "bond0.42" drop`,
		`iifname "bond0.42" tcp flags & syn == 0 socket wildcard 1 counter dup to ip6 daddr map @resigned device "bond0.42" drop`,
		"type ipv4_addr : ipv4_addr", "type ipv6_addr : ipv6_addr",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("setup script lacks %q:\n%s", want, s)
		}
	}
	for _, bad := range []string{"", "eth0\" drop; #", "a-very-long-interface-name", "eth 0", "eth0/1"} {
		if s, err := RelaySetupScript(bad); err == nil {
			t.Errorf("RelaySetupScript(%q) = %q, want an error", bad, s)
		}
	}
}

func TestResignedVIPs(t *testing.T) {
	vips := []netip.Addr{netip.MustParseAddr("198.51.100.100"), netip.MustParseAddr("2001:db8::100")}
	own := func(a netip.Addr) bool { return a == netip.MustParseAddr("198.51.100.12") }
	obs := func(src string, prio uint8, addrs ...string) Observation {
		var as []netip.Addr
		for _, a := range addrs {
			as = append(as, netip.MustParseAddr(a))
		}
		return Observation{Source: netip.MustParseAddr(src), Advert: Advert{Version: 3, VRID: 7, Priority: prio, Addresses: as}}
	}
	for _, tc := range []struct {
		name string
		o    Observation
		want []string
	}{
		{"resignation", obs("198.51.100.11", 0, "198.51.100.100"), []string{"198.51.100.100"}},
		{"mapped", obs("::ffff:198.51.100.11", 0, "::ffff:198.51.100.100"), []string{"198.51.100.100"}},
		{"a holder's advert", obs("198.51.100.11", 200, "198.51.100.100"), nil},
		{"ours", obs("198.51.100.12", 0, "198.51.100.100"), nil},
		{"not our VIPs", obs("198.51.100.11", 0, "198.51.100.99", "198.51.100.100", "198.51.100.100"), []string{"198.51.100.100"}},
		{"IPv6 from a link-local source", obs("fe80::11", 0, "2001:db8::100"), []string{"2001:db8::100"}},
		{"families mixed", obs("198.51.100.11", 0, "2001:db8::100"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, a := range ResignedVIPs(tc.o, vips, own) {
				got = append(got, a.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ResignedVIPs = %v, want %v", got, tc.want)
			}
		})
	}
}
