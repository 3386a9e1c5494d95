package cluster

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func bgpSpec() Spec {
	s := spec()
	s.Mode = ModeBGP
	s.BGP = BGP{ASN: 64513, Peers: []BGPPeer{
		{Address: netip.MustParseAddr("10.91.1.1"), ASN: 64512},
		{Address: netip.MustParseAddr("fd00:91:1::1"), ASN: 64512},
	}}
	return s
}

// TestBGPRefuses lists every BGP setting the model refuses, with the exact
// error: the key and the reason.
func TestBGPRefuses(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Spec)
		want string
	}{
		{"unknown mode", func(s *Spec) { s.Mode = "ospf" }, `vipMode: "ospf": want vrrp or bgp`},
		{"unknown speaker", func(s *Spec) { s.BGP.Speaker = "frr" }, `bgp.speaker: "frr": want embedded or table`},
		{"mode in upper case", func(s *Spec) { s.Mode = "BGP" }, `vipMode: "BGP": want vrrp or bgp (values are case-sensitive: did you mean "bgp"?)`},
		{"speaker in upper case", func(s *Spec) { s.BGP.Speaker = "Table" }, `bgp.speaker: "Table": want embedded or table (values are case-sensitive: did you mean "table"?)`},
		{"no asn", func(s *Spec) { s.BGP.ASN = 0 }, `bgp.asn: missing (an AS number in [1, 4294967294])`},
		{"AS_TRANS", func(s *Spec) { s.BGP.ASN = 23456 }, `bgp.asn: 23456 is AS_TRANS (RFC 6793), not an AS number a speaker may use`},
		{"reserved asn", func(s *Spec) { s.BGP.ASN = 4294967295 }, `bgp.asn: 4294967295 is reserved (RFC 7300)`},
		{"v6 router id", func(s *Spec) { s.BGP.RouterID = netip.MustParseAddr("fd00::1") }, `bgp.routerID: fd00::1: a router ID is a non-zero IPv4 address`},
		{"no peers", func(s *Spec) { s.BGP.Peers = nil }, `bgp.peers, vipMode: BGP mode needs at least one peer (the ToR) to announce the VIPs to`},
		{"peer not unicast", func(s *Spec) { s.BGP.Peers[0].Address = netip.MustParseAddr("224.0.0.5") }, `bgp.peers: peer 1 (224.0.0.5): a multicast address`},
		{"peer twice", func(s *Spec) { s.BGP.Peers[1].Address = s.BGP.Peers[0].Address }, `bgp.peers: peer 10.91.1.1 is listed twice`},
		{"peer is a vip", func(s *Spec) { s.BGP.Peers[0].Address = netip.MustParseAddr("192.0.2.10") }, `bgp.peers, ingressVIPs: peer 192.0.2.10 is a VIP`},
		{"peer asn", func(s *Spec) { s.BGP.Peers[0].ASN = 0 }, `bgp.peers: peer 10.91.1.1: asn: missing (an AS number in [1, 4294967294])`},
		{"long password", func(s *Spec) { s.BGP.Peers[0].Password = strings.Repeat("x", 81) }, `bgp.peers: peer 10.91.1.1: the password is 81 bytes: a TCP MD5 password is at most 80`},
		{"password with a no-break space", func(s *Spec) { s.BGP.Peers[0].Password = "s3\u00a0cret" }, `bgp.peers: peer 10.91.1.1: the password holds a space (U+00A0) at byte 2: use visible characters only`},
		{"relative password file", func(s *Spec) { s.BGP.Peers[0].PasswordFile = "tor.password" }, `bgp.peers: peer 10.91.1.1: passwordFile: "tor.password" must be a clean absolute path of letters, digits and ._/+@-`},
		{"hold too short", func(s *Spec) { s.BGP.Peers[0].HoldTime = 2 * time.Second }, `bgp.peers: peer 10.91.1.1: hold time 2s: want [3s, 65535s] (RFC 4271)`},
		{"hold not whole", func(s *Spec) { s.BGP.Peers[0].HoldTime = 3500 * time.Millisecond }, `bgp.peers: peer 10.91.1.1: hold time 3.5s and keepalive 1s must be whole seconds`},
		{"keepalive not below hold", func(s *Spec) { s.BGP.Peers[0].HoldTime, s.BGP.Peers[0].Keepalive = 3*time.Second, 3*time.Second }, `bgp.peers: peer 10.91.1.1: keepalive 3s: want at least 1s and less than the hold time 3s`},
		{"bfd too fast", func(s *Spec) { s.BGP.Peers[0].BFD.Interval = 5 * time.Millisecond }, `bgp.peers: peer 10.91.1.1: BFD interval 5ms: want whole milliseconds in [10ms, 1m]`},
		{"bfd multiplier", func(s *Spec) { s.BGP.Peers[0].BFD.Multiplier = 1 }, `bgp.peers: peer 10.91.1.1: BFD multiplier 1: want [2, 255]`},
		{"v6 vip without v6 peer", func(s *Spec) { s.BGP.Peers = s.BGP.Peers[:1] }, `apiVIPs, bgp.peers: 2001:db8::5 has no v6 peer to be announced to`},
		{"table with peers", func(s *Spec) { s.BGP.Speaker = SpeakerTable }, `bgp.peers, bgp.speaker: speaker table hands the routes to the site's own speaker, which has the peers: leave peers out`},
		{"kernel's table", func(s *Spec) { s.BGP.Speaker, s.BGP.Peers, s.BGP.Table = SpeakerTable, nil, 254 }, `bgp.table: 254: want a routing table in [1, 252] (253-255 are the kernel's)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := bgpSpec()
			tc.mod(&s)
			_, err := New(s)
			if err == nil {
				t.Fatalf("New accepted %+v", s.BGP)
			}
			if err.Error() != tc.want {
				t.Errorf("Err =\n  %s\nwant\n  %s", err, tc.want)
			}
		})
	}
}

func TestBGPDefaults(t *testing.T) {
	m, err := New(bgpSpec())
	if err != nil {
		t.Fatal(err)
	}
	b := m.Spec().BGP
	p := b.Peers[0]
	if m.Mode() != ModeBGP || b.Speaker != SpeakerEmbedded || b.Table != 0 || p.Port != 179 ||
		p.HoldTime != 9*time.Second || p.Keepalive != 3*time.Second ||
		p.BFD.Off || p.BFD.Interval != 100*time.Millisecond || p.BFD.Multiplier != 3 {
		t.Errorf("BGP defaults = %+v", b)
	}
	s := bgpSpec()
	s.BGP = BGP{Speaker: SpeakerTable}
	m, err = New(s)
	if err != nil {
		t.Fatal(err)
	}
	if b := m.Spec().BGP; b.Table != DefaultBGPTable {
		t.Errorf("table speaker defaults = %+v", b)
	}
	// VRRP mode ignores a BGP section it does not use.
	s = spec()
	s.BGP = BGP{ASN: 0}
	if m, err := New(s); err != nil || m.Mode() != ModeVRRP {
		t.Errorf("VRRP mode with an unused BGP section: %v", err)
	}
}

// TestCheckBGPPassword: every kind of space and invisible character is
// refused (U+00A0, \v and \f used to pass render-node and break lbconfig's
// Corefile parse), and the error never quotes the password.
func TestCheckBGPPassword(t *testing.T) {
	for _, ok := range []string{"s3cret", "x", strings.Repeat("a", 80), "p@ss-w0rd!#{}\"'`", "pässwört", "密码"} {
		if err := CheckBGPPassword(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, tc := range []struct{ pw, want string }{
		{"", "the password is empty"},
		{strings.Repeat("a", 81), "the password is 81 bytes: a TCP MD5 password is at most 80"},
		{"s3cret\xff", "the password is not UTF-8 text"},
		{"s3 cret", "a space (U+0020) at byte 2"},
		{"s3cret\t", "a space (U+0009) at byte 6"},
		{"s3\u00a0cret", "a space (U+00A0) at byte 2"},
		{"s3\vcret", "a space (U+000B) at byte 2"},
		{"s3\fcret", "a space (U+000C) at byte 2"},
		{"s3\u3000cret", "a space (U+3000) at byte 2"},
		{"s3\u2028cret", "a space (U+2028) at byte 2"},
		{"s3cret\r", "a space (U+000D) at byte 6"},
		{"s3\u200bcret", "an invisible or control character (U+200B) at byte 2"},
		{"\ufeffs3cret", "an invisible or control character (U+FEFF) at byte 0"},
		{"s3\x00cret", "an invisible or control character (U+0000) at byte 2"},
		{"s3\x1bcret", "an invisible or control character (U+001B) at byte 2"},
	} {
		err := CheckBGPPassword(tc.pw)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.pw, err, tc.want)
			continue
		}
		if len(tc.pw) > 3 && strings.Contains(err.Error(), "cret") {
			t.Errorf("%q: the error quotes the password: %v", tc.pw, err)
		}
	}
	for _, tc := range []struct{ file, want, err string }{
		{"s3cret\n", "s3cret", ""},
		{"s3cret", "s3cret", ""},
		{"s3cret\n\n", "", "more than one line"},
		{"s3cret\r\n", "", "U+000D"},
		{"s3cret \n", "", "a space (U+0020) at byte 6"},
		{"\n", "", "empty"},
	} {
		pw, err := ParseBGPPasswordFile([]byte(tc.file))
		if tc.err == "" && (err != nil || pw != tc.want) || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("file %q: %q, %v; want %q, %q", tc.file, pw, err, tc.want, tc.err)
		}
	}
}
