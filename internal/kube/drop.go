package kube

import "sync"

// Drop is a value the API sent that no snapshot carries, because a render
// would write it into a file root runs (keepalived.conf, haproxy.cfg).
type Drop struct {
	// Object says where it came from: "Node master-0",
	// "EndpointSlice default/kubernetes".
	Object string
	// Field is name, InternalIP, address, port or nodeName.
	Field string
	// Value is the value as the API sent it; quote it (%q) when printing.
	Value string
	// Reason is one of the Reason constants (a metric label).
	Reason string
}

// Why a value is dropped.
const (
	ReasonName    = "invalid-name"   // not a Node name (RFC 1123 subdomain)
	ReasonAddress = "not-an-address" // does not parse as an IP address
	ReasonUnicast = "not-unicast"    // zoned, unspecified, loopback, multicast, link-local, reserved
	ReasonPort    = "port-out-of-range"
)

const maxSeen = 1024

// dropper reports each distinct drop once: a snapshot is taken after every
// change in the cluster, and a bad value would otherwise be reported again
// with each one.
// Each Node watch reports from its own goroutine.
type dropper struct {
	report func(Drop)
	mu     sync.Mutex
	seen   map[Drop]bool
}

func (d *dropper) add(x Drop) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen[x] {
		return
	}
	if len(d.seen) >= maxSeen {
		clear(d.seen) // an API sending ever new bad values: report again rather than grow
	}
	d.seen[x] = true
	if d.report != nil {
		d.report(x)
	}
}
