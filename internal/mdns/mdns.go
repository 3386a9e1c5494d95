// Package mdns is the Multicast DNS (RFC 6762) and DNS-SD (RFC 6763) engine of
// infradns: the records a node publishes, the cache a resolver keeps of what it
// hears, HMAC-authenticated announcements, the probe/announce/goodbye and query
// schedules, and the sockets and loops (Responder, Browser) that run them.
//
// Everything that decides is pure and takes the time as an argument; only
// conn.go, responder.go, browser.go and iface.go touch the network.
package mdns

import (
	"net/netip"
	"time"
)

// Port is the mDNS port; responses from any other source port are not mDNS.
const Port = 5353

// The mDNS groups.
var (
	GroupV4 = netip.AddrFrom4([4]byte{224, 0, 0, 251})
	GroupV6 = netip.MustParseAddr("ff02::fb")
)

// TTLs recommended by RFC 6762 section 10: records that carry a host name or
// address 120 s, all others 75 minutes.
const (
	HostTTL    = 120
	ServiceTTL = 4500
)

// DNS-SD defaults, as OpenShift's mdns-publisher used them.
const (
	DefaultServiceType = "_workstation._tcp"
	DefaultDomain      = "local."
	DefaultPort        = 42424
)

// Bits of the class field: the cache-flush bit in resource records (RFC 6762
// 10.2) and the unicast-response bit in questions (5.4) are the same bit.
const (
	classFlush   = 1 << 15
	classUnicast = 1 << 15
)

// GoodbyeGrace is how long a record that said goodbye (TTL 0) or was flushed
// stays in the cache so a cooperating responder can rescue it (RFC 6762 10.1, 10.2).
const GoodbyeGrace = time.Second

// maxPacket is the largest mDNS message we send or read (RFC 6762 17).
const maxPacket = 9000
