package vrrp

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRelaySetupScript(t *testing.T) {
	v4, v6 := netip.MustParseAddr("198.51.100.100"), netip.MustParseAddr("2001:db8::100")
	s, err := RelaySetupScript("bond0.42", []netip.Addr{v4, netip.MustParseAddr("::ffff:198.51.100.101"), v6, v4}, 500*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"table ip infradns_relay {}\ndelete table ip infradns_relay\n",
		"table ip6 infradns_relay {}\ndelete table ip6 infradns_relay\n",
		// A relayed packet arrives with TTL 1 (dup takes one off) and is never
		// relayed again.
		`iifname "bond0.42" ip ttl != 1 tcp flags & syn == 0 socket wildcard 1 ip daddr @resigned ip ttl set 2 counter dup to ip daddr map @resigned device "bond0.42" drop`,
		`iifname "bond0.42" ip6 hoplimit != 1 tcp flags & syn == 0 socket wildcard 1 ip6 daddr @resigned ip6 hoplimit set 2 counter dup to ip6 daddr map @resigned device "bond0.42" drop`,
		"type ipv4_addr : ipv4_addr", "type ipv6_addr : ipv6_addr", "flags dynamic,timeout\n\t\ttimeout 500ms\n",
		// Resignations (priority 0) in a VRRPv3 advertisement, not our own.
		`iifname "bond0.42" ip protocol 112 @th,0,8 0x31 @th,16,8 0 fib saddr type != local jump learn`,
		`iifname "bond0.42" meta l4proto 112 @th,0,8 0x31 @th,16,8 0 fib saddr . iif type != local jump learn`,
		// Each VIP at each position of a list as long as the family's VIPs.
		"@th,24,8 > 0 @th,64,32 0xc6336464 update @resigned { 198.51.100.100 : ip saddr }",
		"@th,24,8 > 1 @th,96,32 0xc6336464 update @resigned { 198.51.100.100 : ip saddr }",
		"@th,24,8 > 0 @th,64,32 0xc6336465 update @resigned { 198.51.100.101 : ip saddr }",
		"@th,24,8 > 1 @th,96,32 0xc6336465 update @resigned { 198.51.100.101 : ip saddr }",
		"@th,24,8 > 0 @th,64,128 0x20010db8000000000000000000000100 update @resigned { 2001:db8::100 : ip6 saddr }",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("setup script lacks %q:\n%s", want, s)
		}
	}
	// The duplicate and the mapped form count once: two IPv4 VIPs, one IPv6.
	if n := strings.Count(s, "update @resigned"); n != 2*2+1 {
		t.Errorf("%d learning rules, want 5:\n%s", n, s)
	}
	if strings.Contains(s, "@th,128,") {
		t.Errorf("a position beyond the number of VIPs:\n%s", s)
	}
	if strings.Contains(s, RelayLiveMap) {
		t.Errorf("a live map without a live duration:\n%s", s)
	}

	// With a live duration: the other routers' ordinary adverts fill a
	// second map, consulted after the resignations'.
	s, err = RelaySetupScript("eth0", []netip.Addr{v4, v6}, 500*time.Millisecond, 131*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"map live {\n\t\ttype ipv4_addr : ipv4_addr\n\t\tflags dynamic,timeout\n\t\ttimeout 131ms\n",
		"map live {\n\t\ttype ipv6_addr : ipv6_addr\n\t\tflags dynamic,timeout\n\t\ttimeout 131ms\n",
		`iifname "eth0" ip protocol 112 @th,0,8 0x31 @th,16,8 != 0 fib saddr type != local jump learn_live`,
		`iifname "eth0" meta l4proto 112 @th,0,8 0x31 @th,16,8 != 0 fib saddr . iif type != local jump learn_live`,
		"@th,24,8 > 0 @th,64,32 0xc6336464 update @live { 198.51.100.100 : ip saddr }",
		"@th,24,8 > 0 @th,64,128 0x20010db8000000000000000000000100 update @live { 2001:db8::100 : ip6 saddr }",
		`ip daddr @resigned ip ttl set 2 counter dup to ip daddr map @resigned device "eth0" drop
		iifname "eth0" ip ttl != 1 tcp flags & syn == 0 socket wildcard 1 ip daddr @live ip ttl set 2 counter dup to ip daddr map @live device "eth0" drop`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("setup script with live lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "update @live"); n != 2 {
		t.Errorf("%d live learning rules, want 2:\n%s", n, s)
	}
	for _, bad := range []string{"", "eth0\" drop; #", "a-very-long-interface-name", "eth 0", "eth0/1"} {
		if s, err := RelaySetupScript(bad, nil, time.Second, 0); err == nil {
			t.Errorf("RelaySetupScript(%q) = %q, want an error", bad, s)
		}
	}
	if s, err := RelaySetupScript("eth0", nil, 0, 0); err == nil {
		t.Errorf("RelaySetupScript with no duration = %q, want an error", s)
	}
	if s, err := RelaySetupScript("eth0", nil, time.Second, time.Microsecond); err == nil {
		t.Errorf("RelaySetupScript with a live duration below 1ms = %q, want an error", s)
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

func TestLiveHolder(t *testing.T) {
	const advert = 60 * time.Millisecond
	masterDown := 3*advert + 46*advert/256 // rank 1 at 60 ms: 190.8 ms
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name  string
		ago   time.Duration // since the last advert
		never bool          // no advert heard
		want  bool
	}{
		{"heard one advert interval ago: a live holder (this keepalived missed it)", advert, false, true},
		{"heard just now", 0, false, true},
		{"heard 130 ms ago", 130 * time.Millisecond, false, true},
		{"silent for master-down less one advert: stopped", masterDown - advert, false, false},
		{"silent for the master-down interval: crashed or paused", masterDown, false, false},
		{"silent for seconds", 3 * time.Second, false, false},
		{"never heard", 0, true, false},
		{"heard after now (clock step)", -2 * time.Second, false, false},
	} {
		var last time.Time
		if !tc.never {
			last = now.Add(-tc.ago)
		}
		if got := LiveHolder(last, now, masterDown, advert); got != tc.want {
			t.Errorf("%s: LiveHolder = %v, want %v", tc.name, got, tc.want)
		}
	}
}
