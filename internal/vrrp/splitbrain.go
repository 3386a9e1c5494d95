package vrrp

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"
)

// MAC is a link-layer address, comparable so it can key maps and be ordered.
type MAC [6]byte

func (m MAC) String() string { return net.HardwareAddr(m[:]).String() }

// Claim is another host that said it has one of a group's VIPs (an ARP
// reply or a gratuitous ARP with the VIP as sender) in the last probe
// window. Peer says its MAC is a known cluster node's: only a peer running
// VRRP for the group can step down as we would, so only a peer's claim is
// settled by the rule; any other device answering for the VIP is reported,
// never obeyed (stepping down would hand the VIP to something that is not
// serving it).
type Claim struct {
	VIP  netip.Addr
	MAC  MAC
	Peer bool
}

// SplitInput is what one check of a group saw.
type SplitInput struct {
	// Held: one of the group's VIPs is on our interface now.
	Held bool
	// Self is our interface's MAC, the one we answer ARP with.
	Self MAC
	// Claims are the other hosts that claimed the group's VIPs since the
	// last check.
	Claims []Claim
	// HeardFrom says whether, for each of vips, one of the routers with
	// these MACs advertised it (priority above 0) after the given time: the
	// keeper's VRRP reaches us again for every VIP the split was about.
	// Another router's adverts say nothing (a third node that took over for
	// a moment when we resigned is heard too, the keeper still not), and
	// neither do the keeper's adverts of a VIP of the other family, whose
	// VRRP may flow while this one's is dropped.
	HeardFrom func(since time.Time, macs []MAC, vips []netip.Addr) bool
	// Liveness says whether a peer that claims the VIP serves: nil says
	// every peer does. A paused node (a VM stun, SIGSTOP) still answers ARP
	// from its kernel and looks like a split-brain keeper; stepping down for
	// it made every healthy backup give the VIP up in turn, an outage for as
	// long as the pause. Only a live keeper is stepped down for.
	Liveness func(MAC) Liveness
}

// Liveness is what a probe of a peer's service said.
type Liveness int

const (
	// LiveUnknown: no answer yet; a step-down waits for one.
	LiveUnknown Liveness = iota
	// Live: the peer's service answered (or cannot be probed).
	Live
	// Dead: the peer accepted a connection and never answered: its kernel
	// runs, its processes do not.
	Dead
)

// SplitEvent is what a check decided.
type SplitEvent int

const (
	SplitNone SplitEvent = iota
	// SplitKept: two holders for Confirm, and the rule keeps the VIP here.
	SplitKept
	// SplitStepDown: two holders for Confirm, and the rule gives the VIP up
	// here: the group goes to FAULT until a Resume.
	SplitStepDown
	// SplitResumeHeard: stepped down, and the holder's adverts reach us
	// again: back to BACKUP, where VRRP decides as usual.
	SplitResumeHeard
	// SplitResumeQuiet: stepped down, and nobody claimed the VIP for
	// Quiet: the other holder is gone, back to BACKUP so we can take over.
	SplitResumeQuiet
	// SplitForeign: a host that is no cluster node claims a VIP we hold.
	SplitForeign
	// SplitResumeDead: stepped down, and every keeper stopped serving (a
	// pause): back to BACKUP so we can take over.
	SplitResumeDead
	// SplitKeptDead: two holders for Confirm, a lower-MAC peer among them,
	// but it does not serve: the VIP is kept here.
	SplitKeptDead
)

func (e SplitEvent) String() string {
	switch e {
	case SplitNone:
		return "none"
	case SplitKept:
		return "kept"
	case SplitStepDown:
		return "stepped-down"
	case SplitResumeHeard:
		return "resumed-adverts-heard"
	case SplitResumeQuiet:
		return "resumed-holder-gone"
	case SplitForeign:
		return "foreign"
	case SplitResumeDead:
		return "resumed-keeper-dead"
	case SplitKeptDead:
		return "kept-keeper-dead"
	}
	return fmt.Sprintf("event-%d", int(e))
}

// Default split-brain timings. Confirm outlasts the overlap of a normal
// takeover (the dead holder's stale VIP goes within ~260 ms of a crash, lab)
// so only a lasting second holder counts; Quiet is three probe intervals
// without a claim.
const (
	DefaultSplitConfirm = 400 * time.Millisecond
	DefaultSplitQuiet   = 600 * time.Millisecond
)

// SplitBrain settles two VRRP masters of one group that cannot hear each
// other (a switch that drops the multicast adverts while unicast flows:
// IGMP snooping without a querier, a filter): VRRP alone keeps both for as
// long as it lasts, each answering ARP for the VIP, and clients split
// between them. The rule is one both sides compute alike without talking:
// of the cluster nodes claiming the VIP, the one with the lowest MAC keeps
// it; the others step down (their instance goes to FAULT) and stay down
// while the keeper claims the VIP and its adverts still do not reach them.
// Pure:
// the caller probes and writes the files.
type SplitBrain struct {
	Confirm time.Duration // 0: DefaultSplitConfirm
	Quiet   time.Duration // 0: DefaultSplitQuiet

	down          bool
	conflictSince time.Time
	liveSince     time.Time // a live lower-MAC peer claimed at every check since
	downSince     time.Time
	lastClaim     time.Time
	keepers       []MAC        // the lower-MAC peers we stepped down for
	split         []netip.Addr // the VIPs they claimed
	kept          bool         // SplitKept reported for the current conflict
	foreignSince  time.Time    // a foreign claim seen at every check since
	foreign       bool         // SplitForeign reported for the current claim
}

// Down says whether the group is stepped down.
func (s *SplitBrain) Down() bool { return s.down }

// Step takes one check's input and says what changed.
func (s *SplitBrain) Step(in SplitInput, now time.Time) SplitEvent {
	confirm := s.Confirm
	if confirm <= 0 {
		confirm = DefaultSplitConfirm
	}
	quiet := s.Quiet
	if quiet <= 0 {
		quiet = DefaultSplitQuiet
	}
	var peers []Claim
	foreign := false
	for _, c := range in.Claims {
		switch {
		case c.MAC == in.Self:
		case c.Peer:
			peers = append(peers, c)
		default:
			foreign = true
		}
	}
	if s.down {
		// Only the keepers' claims keep us down. Another peer's is the
		// node that took over when a keeper stopped claiming (a keeper
		// paused, then resumed as BACKUP): waiting on it kept a node in
		// FAULT for good, for a keeper whose adverts never came again.
		if slices.ContainsFunc(peers, func(c Claim) bool { return slices.Contains(s.keepers, c.MAC) }) {
			s.lastClaim = now
		}
		switch {
		case in.HeardFrom != nil && in.HeardFrom(s.downSince, s.keepers, s.split):
			s.reset()
			return SplitResumeHeard
		case now.Sub(s.lastClaim) >= quiet:
			s.reset()
			return SplitResumeQuiet
		case !slices.ContainsFunc(s.keepers, func(m MAC) bool { return in.liveness(m) != Dead }):
			s.reset()
			return SplitResumeDead
		}
		return SplitNone
	}
	if !in.Held {
		s.conflictSince, s.liveSince, s.kept = time.Time{}, time.Time{}, false
		s.foreignSince, s.foreign = time.Time{}, false
		return SplitNone
	}
	// A claim by a MAC not (yet) known as a peer's is reported once it
	// lasts: a peer's MAC may only be learned a check later.
	ev := SplitNone
	switch {
	case !foreign:
		s.foreignSince, s.foreign = time.Time{}, false
	case s.foreignSince.IsZero():
		s.foreignSince = now
	case !s.foreign && now.Sub(s.foreignSince) >= confirm:
		s.foreign = true
		ev = SplitForeign
	}
	if len(peers) == 0 {
		s.conflictSince, s.liveSince, s.kept = time.Time{}, time.Time{}, false
		return ev
	}
	if s.conflictSince.IsZero() {
		s.conflictSince = now
	}
	var keepers []MAC
	var split []netip.Addr
	lower, waiting := false, false
	for _, p := range peers {
		if bytes.Compare(p.MAC[:], in.Self[:]) >= 0 {
			continue
		}
		lower = true
		switch in.liveness(p.MAC) {
		case LiveUnknown:
			waiting = true
			continue
		case Dead:
			continue
		}
		if !slices.Contains(keepers, p.MAC) {
			keepers = append(keepers, p.MAC)
		}
		if p.VIP.IsValid() && !slices.Contains(split, p.VIP) {
			split = append(split, p.VIP)
		}
	}
	// A keeper counts once it has claimed the VIP while serving for half
	// of Confirm (two checks), not at its first live claim: a paused holder
	// claims from its kernel for the whole pause, so the conflict is long
	// confirmed when it resumes, and the gratuitous ARP it sends as it
	// resumes, before it hears our adverts and yields, made the node that
	// had taken over step down for it (CI: three moves for one 1 s pause of
	// TestVRRPPausedHolder).
	if len(keepers) == 0 {
		s.liveSince = time.Time{}
	} else if s.liveSince.IsZero() {
		s.liveSince = now
	}
	if now.Sub(s.conflictSince) < confirm {
		return ev
	}
	if waiting && len(keepers) == 0 {
		return ev // a keeper's probe has not answered yet
	}
	if len(keepers) > 0 && now.Sub(s.liveSince) < confirm/2 {
		return ev
	}
	if len(keepers) > 0 {
		s.down, s.downSince, s.lastClaim, s.keepers, s.split = true, now, now, keepers, split
		s.conflictSince, s.liveSince, s.kept = time.Time{}, time.Time{}, false
		s.foreignSince, s.foreign = time.Time{}, false
		return SplitStepDown
	}
	if !s.kept {
		s.kept = true
		if lower {
			return SplitKeptDead
		}
		return SplitKept
	}
	return ev
}

func (in SplitInput) liveness(m MAC) Liveness {
	if in.Liveness == nil {
		return Live
	}
	return in.Liveness(m)
}

func (s *SplitBrain) reset() {
	*s = SplitBrain{Confirm: s.Confirm, Quiet: s.Quiet}
}
