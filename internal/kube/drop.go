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

// Once tells whether a value is new: a value reported after every change
// (a bad value the API keeps sending, a refused name) is then logged once.
// It holds at most 1024 values; past that it starts over, so a source of
// ever new values is reported again rather than grows it. The zero value
// is ready; safe for concurrent use.
type Once[T comparable] struct {
	mu   sync.Mutex
	seen map[T]bool
}

// First reports whether v was not seen before, and remembers it.
func (o *Once[T]) First(v T) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen[v] {
		return false
	}
	if o.seen == nil || len(o.seen) >= maxSeen {
		o.seen = map[T]bool{}
	}
	o.seen[v] = true
	return true
}

// dropper reports each distinct drop once: a snapshot is taken after every
// change in the cluster, and a bad value would otherwise be reported again
// with each one.
// Each Node watch reports from its own goroutine.
type dropper struct {
	report func(Drop)
	once   Once[Drop]
}

func (d *dropper) add(x Drop) {
	if d == nil || !d.once.First(x) {
		return
	}
	if d.report != nil {
		d.report(x)
	}
}
