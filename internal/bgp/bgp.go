// Package bgp announces a node's VIP groups as host routes: what to announce
// (pure, from the groups the node may hold and their health), and the two
// ways to get it to the fabric: an embedded speaker (GoBGP) or a kernel
// routing table a site's own speaker redistributes. Either way the node
// also holds each VIP locally (a local route on lo) so haproxy and the
// router accept traffic for it.
package bgp

import (
	"context"
	"net/netip"
	"slices"
)

// Group is a VIP group the node may announce now, and the check that gates it.
type Group struct {
	Name  string
	Check string
	VIPs  []netip.Addr
}

// State is what the announcer knows: the groups Assign lets this node hold
// (from the last plan: losing the API keeps them), the health verdict of each
// check (absent: not known yet, so not announced) and whether the node is
// going away.
type State struct {
	Groups []Group
	// Services are the Services' addresses this node may announce now (a
	// second source beside the plan's groups, from the Services' watch).
	Services []Group
	Healthy  map[string]bool
	// Passed are the checks that have passed since the process started.
	Passed   map[string]bool
	Draining bool
}

func (s State) all() []Group { return slices.Concat(s.Groups, s.Services) }

// Routes are the host routes to announce: every VIP of an eligible group
// whose check passes, none while draining. Sorted, without duplicates.
func (s State) Routes() []netip.Prefix {
	if s.Draining {
		return nil
	}
	var out []netip.Prefix
	for _, g := range s.all() {
		if !s.Healthy[g.Check] {
			continue
		}
		for _, v := range g.VIPs {
			out = append(out, Host(v))
		}
	}
	return sortPrefixes(out)
}

// Local are the VIPs to hold on the node: those of every eligible group
// whose check has passed since the start, healthy now or not. A failing
// check withdraws the route but keeps the address, so connections the
// fabric still sends (until its next hop is gone) are answered rather than
// reset. Not before the first pass: the API VIP is also every node's
// second nameserver, and a starting node that held it before its own
// resolver answered took its own lookups (the fabric's route would have
// led them to a node that answers).
func (s State) Local() []netip.Prefix {
	var out []netip.Prefix
	for _, g := range s.all() {
		if !s.Healthy[g.Check] && !s.Passed[g.Check] {
			continue
		}
		for _, v := range g.VIPs {
			out = append(out, Host(v))
		}
	}
	return sortPrefixes(out)
}

// Host is an address as a host route (/32, /128).
func Host(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen())
}

func sortPrefixes(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return slices.Compact(ps)
}

// Speaker gets host routes to the fabric.
type Speaker interface {
	// Announce makes the announced routes exactly routes (withdrawing the
	// others). It may be called again with the same set.
	Announce(ctx context.Context, routes []netip.Prefix) error
	// Sessions are the speaker's BGP sessions (none for a table hand-off).
	Sessions() []Session
	// Close withdraws everything and closes the sessions.
	Close(ctx context.Context) error
}

// Session is one BGP session's state.
type Session struct {
	Peer netip.Addr
	ASN  uint32
	Up   bool
}

// LocalVIPs holds VIPs on the node.
type LocalVIPs interface {
	// Hold makes the held VIPs exactly vips.
	Hold(vips []netip.Prefix) error
}

// Logger is what the announcer logs through (CoreDNS's clog.P fits).
type Logger interface {
	Infof(format string, v ...any)
	Warningf(format string, v ...any)
	Errorf(format string, v ...any)
}

// diff returns what is in want and not in have (add), and the reverse (del).
func diff(have, want []netip.Prefix) (add, del []netip.Prefix) {
	for _, p := range want {
		if !slices.Contains(have, p) {
			add = append(add, p)
		}
	}
	for _, p := range have {
		if !slices.Contains(want, p) {
			del = append(del, p)
		}
	}
	return add, del
}
