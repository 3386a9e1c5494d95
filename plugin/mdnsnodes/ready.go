package mdnsnodes

import "time"

// Ready implements the ready plugin's interface: true once a node name
// neither source has is NXDOMAIN rather than SERVFAIL (knowsAll): the
// API's first Node list is served, or the listener has heard its first
// full window and there is no API to wait for or it has not come within
// apiGrace. Ready means every name is answered: lbconfig holds the API VIP,
// every node's second nameserver, only once its node's resolver is ready
// (BGP mode), and a SERVFAIL there sent the node's own lookups on to the
// upstream server.
func (m *MDNSNodes) Ready() bool { return m.knowsAll() }

// apiGrace is how long a node name mDNS has not heard waits for the API's
// first Node list before it is NXDOMAIN. The list comes about a second after
// start (the watch's start jitter); a node's own publisher restarts beside
// its CoreDNS (an upgrade replaces every pod) and probes for ~0.75 s before
// it announces, so the link alone has not heard this very node yet: the
// rolling-upgrade lab's node got an NXDOMAIN for its own name in that gap.
const apiGrace = 5 * time.Second

// knowsAll reports whether a node name neither source has is truly unknown
// (NXDOMAIN) rather than not known yet (SERVFAIL, which no cache keeps
// long): the API's list is in, or the listener has heard a full window and
// there is no API to wait for, or it has not come within apiGrace of the
// start.
func (m *MDNSNodes) knowsAll() bool {
	if m.forceReady || m.apiSynced.Load() {
		return true
	}
	b := m.browser.Load()
	return knowsAll(b != nil && b.Ready(), m.watches(), time.Since(m.started))
}

func knowsAll(heard, api bool, since time.Duration) bool {
	return heard && (!api || since >= apiGrace)
}
