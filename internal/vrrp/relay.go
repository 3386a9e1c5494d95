package vrrp

import (
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// The hand-over relay. When a holder gives a VIP up gracefully (keepalived
// stopped, or reloaded without the instance: a drain), the connections
// clients had open to the VIP live on that node, which keeps the address on
// lo for the drain (see Drainer). Their next packets reach the new holder
// as soon as the client's ARP entry follows its gratuitous ARP, and a node
// with no such connection answers with a reset: one failed request in about
// one hand-over in five in the lab (a client opening a connection every
// 20 ms, each a few milliseconds long).
//
// Every node therefore keeps an nftables rule that sends a TCP packet for a
// VIP back to the node that resigned it, unchanged (the kernel's dup to a
// neighbor, then drop), when the packet is not a SYN and no connection here
// expects it: the socket lookup finds only a wildcard listener (haproxy's
// and the routers' `bind :::port`). An established connection, a half-open
// one (its handshake's ACK) or a TIME_WAIT is found first and stays here; a
// SYN is always ours. The rule matches only VIPs in its map, and an element
// enters the map when the node hears the priority-0 advert of the resigning
// holder, and expires by itself after DefaultRelay, well before the old
// holder drops its copy on lo.
//
// The element is put there by the kernel, from the advert itself, as the
// packet arrives: a rule per VIP and position in the advert's address list
// matches it and updates the map. It must be there before this node's own
// keepalived takes over, which waits only the skew time (1.4 ms at priority
// 250, 11 ms at 210, with 60-ms adverts). lbconfig also adds it when its
// listener hears the advert (Relay.Observe, 0.06-0.4 ms of netlink), for
// the log, the metric and a second hand-over within DefaultRelay (the
// kernel's update keeps an element's old target); on its own that lost the
// race on a busy node: with one core kept busy, the priority-250 node reset
// a connection open at the flip in 1 of 6 runs of the lab's IPv6 graceful
// stops.

// DefaultRelay is how long a resigned VIP's stray packets are relayed: half
// the old holder's DefaultDrain, which started when it resigned, so a
// relayed packet never reaches a node that no longer has the address (it
// would route it back here).
const DefaultRelay = DefaultDrain / 2

// LiveHolder says whether a takeover at now took the VIP from a router that
// was still advertising it (last heard at last): a holder that stops (a
// crash, a pause, a lost link) is silent for the backups' master-down
// interval before one takes over, so one heard within masterDown − advert
// of the takeover was alive, and this node's keepalived missed its adverts
// (its VRRP process starved, or deaf to them). Such a takeover sends no
// resignation, so the hand-over relay does not start by itself, and the
// connections open to that router would be reset here as their packets
// follow this node's gratuitous ARP (the rolling-upgrade test lost one
// request per run that way beside other jobs' builds).
func LiveHolder(last, now time.Time, masterDown, advert time.Duration) bool {
	return !last.IsZero() && !now.Before(last) && now.Sub(last) < masterDown-advert
}

// RelayTable is the nftables table (in the ip and ip6 families) that holds
// the relay, RelayMap its map from a VIP to the node that resigned it, and
// RelayLiveMap its map from a VIP to the other router heard advertising it
// last (see Relay.Live).
const (
	RelayTable   = "infradns_relay"
	RelayMap     = "resigned"
	RelayLiveMap = "live"
)

// RelaySetupScript is the nft script that (re)creates the relay tables for
// iface, with empty maps whose elements last d, and the rules that learn
// the resignations of vips from the adverts arriving on iface (the VIPs a
// node would keep on lo: see DrainCopy). With live above 0 the tables also
// learn, from the other routers' ordinary adverts, who advertises each VIP,
// each entry kept for live after the last one: a takeover from a router
// still advertising then relays its connections' packets from the first
// one on (see Relay.Live).
//
// A relayed packet arrives with a TTL (hop limit) of 1 and one that arrives
// with it is never relayed again: two nodes that would each send a packet
// no connection of theirs expects to the other (a resigner that hears the
// new holder, while the holder relays to the resigner) must not bounce it
// between them. dup lowers the copy's TTL by one in prerouting, so the
// rule sets 2; a mere decrement let the lab's two nodes pass one packet
// back and forth 20,000 times in 300 ms. The target delivers it locally,
// where the TTL does not matter, and routes it nowhere.
func RelaySetupScript(iface string, vips []netip.Addr, d, live time.Duration) (string, error) {
	if !validIfname(iface) {
		return "", fmt.Errorf("relay: bad interface name %q", iface)
	}
	if d < time.Millisecond {
		return "", fmt.Errorf("relay: duration %v: want at least 1ms", d)
	}
	if live != 0 && live < time.Millisecond {
		return "", fmt.Errorf("relay: live duration %v: want 0 or at least 1ms", live)
	}
	s := RelayTeardownScript()
	for _, f := range []struct {
		family, addr, proto, fib, ttl string
		bits                          int
	}{
		{"ip", "ipv4_addr", "ip protocol 112", "fib saddr type != local", "ip ttl", 32},
		{"ip6", "ipv6_addr", "meta l4proto 112", "fib saddr . iif type != local", "ip6 hoplimit", 128},
	} {
		var fam []netip.Addr
		for _, v := range vips {
			if v = v.Unmap(); v.BitLen() == f.bits && !slices.Contains(fam, v) {
				fam = append(fam, v)
			}
		}
		// VRRP is protocol 112 by number: nft resolves names through
		// /etc/protocols, which the image does not have.
		//
		// An advert of ours carries some of our VIPs of its family, in any
		// order: each VIP at each position up to their number. Offsets are
		// bits into the VRRP header: version and type at 0 (0x31, a v3
		// advertisement, as lbconfig configures keepalived; nft 1.0.6 cannot
		// list a match on the type's 4 bits), priority at 16, address count
		// at 24, the addresses from 64.
		learn := func(m string) string {
			var out string
			for _, v := range fam {
				for i := range fam {
					out += fmt.Sprintf("\t\t@th,24,8 > %d @th,%d,%d 0x%x update @%s { %s : %s saddr }\n",
						i, 64+i*f.bits, f.bits, v.AsSlice(), m, v, f.family)
				}
			}
			return out
		}
		advert := fmt.Sprintf(`iifname "%s" %s @th,0,8 0x31`, iface, f.proto)
		relay := func(m string) string {
			return fmt.Sprintf("\t\tiifname \"%[1]s\" %[2]s != 1 tcp flags & syn == 0 socket wildcard 1 %[3]s daddr @%[4]s %[2]s set 2 counter dup to %[3]s daddr map @%[4]s device \"%[1]s\" drop\n",
				iface, f.ttl, f.family, m)
		}
		maps := relayMap(RelayMap, f.addr, d)
		chains := "\tchain learn {\n" + learn(RelayMap) + "\t}\n"
		rules := fmt.Sprintf("\t\t%s @th,16,8 0 %s jump learn\n", advert, f.fib)
		relays := relay(RelayMap)
		if live > 0 {
			maps += relayMap(RelayLiveMap, f.addr, live)
			chains += "\tchain learn_live {\n" + learn(RelayLiveMap) + "\t}\n"
			rules += fmt.Sprintf("\t\t%s @th,16,8 != 0 %s jump learn_live\n", advert, f.fib)
			// A resignation's target first: the router that gave the VIP
			// up keeps it on lo for a drain.
			relays += relay(RelayLiveMap)
		}
		s += fmt.Sprintf("table %s %s {\n%s%s\tchain prerouting {\n\t\ttype filter hook prerouting priority raw; policy accept;\n%s%s\t}\n}\n",
			f.family, RelayTable, maps, chains, rules, relays)
	}
	return s, nil
}

func relayMap(name, addr string, d time.Duration) string {
	return fmt.Sprintf("\tmap %[1]s {\n\t\ttype %[2]s : %[2]s\n\t\tflags dynamic,timeout\n\t\ttimeout %[3]dms\n\t}\n", name, addr, d.Milliseconds())
}

// RelayTeardownScript removes the relay tables (and is harmless without them).
func RelayTeardownScript() string {
	var s string
	for _, family := range []string{"ip", "ip6"} {
		s += fmt.Sprintf("table %[1]s %[2]s {}\ndelete table %[1]s %[2]s\n", family, RelayTable)
	}
	return s
}

// ResignedVIPs are the VIPs of ours that an advert gives up: a priority-0
// advert from another router (own says whether a source is this node).
func ResignedVIPs(o Observation, vips []netip.Addr, own func(netip.Addr) bool) []netip.Addr {
	if o.Advert.Priority != 0 || !o.Source.IsValid() || (own != nil && own(o.Source)) {
		return nil
	}
	var out []netip.Addr
	for _, a := range o.Advert.Addresses {
		a = a.Unmap()
		if a.Is6() == o.Source.Unmap().Is6() && contains(vips, a) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// validIfname accepts what Linux accepts as an interface name and nothing
// that could end the quoted string in a script.
func validIfname(s string) bool {
	if s == "" || len(s) > 15 {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c > '~' || c == '"' || c == '\\' || c == '/' {
			return false
		}
	}
	return true
}
