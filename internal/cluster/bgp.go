package cluster

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// VIP modes: how a cluster's VIP groups reach the network. One mode per
// cluster, so no group is ever both held by VRRP and announced over BGP.
const (
	// ModeVRRP: one node of a group holds its VIPs, moved by keepalived;
	// every holder must share one L2 segment.
	ModeVRRP = "vrrp"
	// ModeBGP: every eligible, healthy node announces the VIPs as host
	// routes; the fabric spreads traffic over them (ECMP).
	ModeBGP = "bgp"
)

// Speakers: who speaks BGP for a node in BGP mode.
const (
	// SpeakerEmbedded: lbconfig's own speaker (GoBGP) peers with the
	// fabric.
	SpeakerEmbedded = "embedded"
	// SpeakerTable: lbconfig writes the health-gated VIP routes into a
	// kernel routing table; the site's own speaker (FRR, frr-k8s, bird)
	// redistributes that table.
	SpeakerTable = "table"
)

// BGP defaults. Hold and keepalive are the fallback behind BFD (a peer lost
// without BFD is noticed after the hold time); BFD at 3 × 100 ms took a
// silently dead node's route off the ToR in 300-363 ms in the lab.
const (
	DefaultBGPTable      = 198 // OpenShift's proposal uses table 198 too
	DefaultBGPPort       = 179
	DefaultHoldTime      = 9 * time.Second
	DefaultBFDInterval   = 100 * time.Millisecond
	DefaultBFDMultiplier = 3
	// MaxBGPPeers bounds the sessions of one node (a node peers with its
	// ToRs: two in a typical rack).
	MaxBGPPeers = 16
)

// Keys of the bgp section.
const (
	KeyVIPMode     = "vipMode"
	KeyBGPASN      = "bgp.asn"
	KeyBGPRouterID = "bgp.routerID"
	KeyBGPSpeaker  = "bgp.speaker"
	KeyBGPTable    = "bgp.table"
	KeyBGPPeers    = "bgp.peers"
)

// BGP are the settings of one node's BGP speaker (per-node overrides are
// resolved by the front end: a Spec is one node's view).
type BGP struct {
	// ASN is the node's own AS number.
	ASN uint32
	// RouterID is an IPv4 address; unset, the front end fills it with the
	// node's address towards its first peer.
	RouterID netip.Addr
	// Speaker is SpeakerEmbedded (default) or SpeakerTable.
	Speaker string
	// Table is the kernel routing table of SpeakerTable.
	Table int
	Peers []BGPPeer
}

// BGPPeer is one BGP neighbour (a ToR).
type BGPPeer struct {
	Address netip.Addr
	ASN     uint32
	Port    uint16
	// Password turns on TCP MD5 signatures (RFC 2385). It is read from
	// PasswordFile where it is used (lbconfig), never written in a
	// Corefile or a rendered file.
	Password string
	// PasswordFile is the node's file that holds Password (root, 0600).
	PasswordFile string
	// HoldTime 0 means the default; Keepalive 0 means a third of it.
	HoldTime, Keepalive time.Duration
	BFD                 BFD
}

// BFD is single-hop BFD (RFC 5881) on a session.
type BFD struct {
	Off bool
	// Interval is both the transmit and the required receive interval.
	Interval   time.Duration
	Multiplier int
}

func (b BGP) withDefaults() BGP {
	b.RouterID = b.RouterID.Unmap()
	b.Speaker = cmp.Or(b.Speaker, SpeakerEmbedded)
	if b.Speaker == SpeakerTable {
		b.Table = cmp.Or(b.Table, DefaultBGPTable)
	}
	b.Peers = slices.Clone(b.Peers)
	for i := range b.Peers {
		p := &b.Peers[i]
		p.Address = p.Address.Unmap()
		p.Port = cmp.Or(p.Port, DefaultBGPPort)
		p.HoldTime = cmp.Or(p.HoldTime, DefaultHoldTime)
		p.Keepalive = cmp.Or(p.Keepalive, max(time.Second, (p.HoldTime/3).Truncate(time.Second)))
		if !p.BFD.Off {
			p.BFD.Interval = cmp.Or(p.BFD.Interval, DefaultBFDInterval)
			p.BFD.Multiplier = cmp.Or(p.BFD.Multiplier, DefaultBFDMultiplier)
		}
	}
	return b
}

// CheckASN: a 32-bit AS number a BGP speaker may use (RFC 7300 reserves
// 0 and 4294967295, RFC 6793 makes 23456 AS_TRANS).
func CheckASN(asn uint32) error {
	switch asn {
	case 0:
		return fmt.Errorf("missing (an AS number in [1, 4294967294])")
	case 23456:
		return fmt.Errorf("23456 is AS_TRANS (RFC 6793), not an AS number a speaker may use")
	case 4294967295:
		return fmt.Errorf("4294967295 is reserved (RFC 7300)")
	}
	return nil
}

// CheckBFD: intervals FRR, BIRD and GoBGP all accept (10 ms to 60 s) and a
// multiplier in [2, 255] (one lost packet must not take a route down).
func CheckBFD(b BFD) error {
	if b.Off {
		return nil
	}
	if b.Interval < 10*time.Millisecond || b.Interval > time.Minute || b.Interval%time.Millisecond != 0 {
		return fmt.Errorf("BFD interval %s: want whole milliseconds in [10ms, 1m]", b.Interval)
	}
	if b.Multiplier < 2 || b.Multiplier > 255 {
		return fmt.Errorf("BFD multiplier %d: want [2, 255]", b.Multiplier)
	}
	return nil
}

// CheckHoldTime: 0 (no keepalives) or [3 s, 65535 s] in whole seconds
// (RFC 4271 4.2), and a keepalive shorter than the hold time.
func CheckHoldTime(hold, keepalive time.Duration) error {
	if hold%time.Second != 0 || keepalive%time.Second != 0 {
		return fmt.Errorf("hold time %s and keepalive %s must be whole seconds", hold, keepalive)
	}
	if hold < 3*time.Second || hold > 65535*time.Second {
		return fmt.Errorf("hold time %s: want [3s, 65535s] (RFC 4271)", hold)
	}
	if keepalive < time.Second || keepalive >= hold {
		return fmt.Errorf("keepalive %s: want at least 1s and less than the hold time %s", keepalive, hold)
	}
	return nil
}

// checkBGP applies the rules of BGP mode to a Spec with its defaults.
func (s Spec) checkBGP() error {
	switch s.Mode {
	case ModeVRRP:
		return nil
	case ModeBGP:
	default:
		return keyErr(KeyVIPMode, "%q: want %s or %s%s", s.Mode, ModeVRRP, ModeBGP, CaseHint(s.Mode, ModeVRRP, ModeBGP))
	}
	b := s.BGP
	switch b.Speaker {
	case SpeakerEmbedded, SpeakerTable:
	default:
		return keyErr(KeyBGPSpeaker, "%q: want %s or %s%s", b.Speaker, SpeakerEmbedded, SpeakerTable, CaseHint(b.Speaker, SpeakerEmbedded, SpeakerTable))
	}
	if b.Speaker == SpeakerTable {
		// 253-255 are the kernel's default, main and local tables; FRR's
		// import-table takes 1-252.
		if b.Table < 1 || b.Table > 252 {
			return keyErr(KeyBGPTable, "%d: want a routing table in [1, 252] (253-255 are the kernel's)", b.Table)
		}
		if len(b.Peers) > 0 {
			return errorf([]string{KeyBGPPeers, KeyBGPSpeaker}, "speaker %s hands the routes to the site's own speaker, which has the peers: leave peers out", SpeakerTable)
		}
		return nil
	}
	if err := CheckASN(b.ASN); err != nil {
		return keyErr(KeyBGPASN, "%v", err)
	}
	if b.RouterID.IsValid() && (!b.RouterID.Is4() || b.RouterID.IsUnspecified()) {
		return keyErr(KeyBGPRouterID, "%s: a router ID is a non-zero IPv4 address", b.RouterID)
	}
	if len(b.Peers) == 0 {
		return errorf([]string{KeyBGPPeers, KeyVIPMode}, "BGP mode needs at least one peer (the ToR) to announce the VIPs to")
	}
	if len(b.Peers) > MaxBGPPeers {
		return keyErr(KeyBGPPeers, "%d peers: at most %d", len(b.Peers), MaxBGPPeers)
	}
	for i, p := range b.Peers {
		if err := CheckUnicast(p.Address); err != nil {
			return keyErr(KeyBGPPeers, "peer %d (%s): %v", i+1, p.Address, err)
		}
		if slices.ContainsFunc(b.Peers[:i], func(q BGPPeer) bool { return q.Address == p.Address }) {
			return keyErr(KeyBGPPeers, "peer %s is listed twice", p.Address)
		}
		if slices.Contains(s.VIPs(), p.Address) {
			return errorf([]string{KeyBGPPeers, vipKey(s, p.Address)}, "peer %s is a VIP", p.Address)
		}
		if err := CheckASN(p.ASN); err != nil {
			return keyErr(KeyBGPPeers, "peer %s: asn: %v", p.Address, err)
		}
		if p.PasswordFile != "" {
			if err := CheckPath(p.PasswordFile); err != nil {
				return keyErr(KeyBGPPeers, "peer %s: passwordFile: %v", p.Address, err)
			}
		}
		if p.Password != "" {
			if err := CheckBGPPassword(p.Password); err != nil {
				return keyErr(KeyBGPPeers, "peer %s: %v", p.Address, err)
			}
		}
		if err := CheckHoldTime(p.HoldTime, p.Keepalive); err != nil {
			return keyErr(KeyBGPPeers, "peer %s: %v", p.Address, err)
		}
		if err := CheckBFD(p.BFD); err != nil {
			return keyErr(KeyBGPPeers, "peer %s: %v", p.Address, err)
		}
	}
	// A VIP goes to the peers of its family: an IPv6 VIP with only IPv4
	// sessions would never be announced.
	for _, v := range s.VIPs() {
		if !slices.ContainsFunc(b.Peers, func(p BGPPeer) bool { return p.Address.Is4() == v.Is4() }) {
			return errorf([]string{vipKey(s, v), KeyBGPPeers}, "%s has no %s peer to be announced to", v, Family(v))
		}
	}
	return nil
}

// MaxBGPPassword is the longest TCP MD5 key Linux takes
// (TCP_MD5SIG_MAXKEYLEN).
const MaxBGPPassword = 80

// CheckBGPPassword: a TCP MD5 password the peers' configurations can
// spell: 1 to 80 bytes of UTF-8, every character visible. A space of any
// kind (U+00A0, \v, \f, an ideographic space), a control character or an
// invisible one (U+200B) is refused: a router's configuration language
// cannot say it, a file's trailing space goes unseen, and such a password
// only shows up as a session that never comes up. The error never quotes
// the password; it names the offending character's code point and offset.
func CheckBGPPassword(pw string) error {
	switch {
	case pw == "":
		return fmt.Errorf("the password is empty")
	case len(pw) > MaxBGPPassword:
		return fmt.Errorf("the password is %d bytes: a TCP MD5 password is at most %d", len(pw), MaxBGPPassword)
	case !utf8.ValidString(pw):
		return fmt.Errorf("the password is not UTF-8 text")
	}
	for i, r := range pw {
		if unicode.IsSpace(r) || !unicode.IsGraphic(r) {
			what := "an invisible or control character"
			if unicode.IsSpace(r) {
				what = "a space"
			}
			return fmt.Errorf("the password holds %s (%U) at byte %d: use visible characters only", what, r, i)
		}
	}
	return nil
}

// ParseBGPPasswordFile is the password in a password file's contents: one
// line, its newline optional (echo writes one).
func ParseBGPPasswordFile(b []byte) (string, error) {
	pw := strings.TrimSuffix(string(b), "\n")
	if strings.Contains(pw, "\n") {
		return "", fmt.Errorf("the password file holds more than one line")
	}
	return pw, CheckBGPPassword(pw)
}
