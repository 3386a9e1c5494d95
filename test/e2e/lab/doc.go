// Package lab builds a multi-node layer-2 network out of Linux network
// namespaces, for end-to-end tests that run the real daemons (CoreDNS, the
// mDNS publisher, keepalived, haproxy) as separate "nodes" on one machine.
//
// Topology: a Linux bridge lives in its own "switch" namespace (STP off,
// multicast snooping off, bridge netfilter off), so the host firewall never sees
// lab frames and multicast reaches every port. Every node is a namespace with one
// veth, eth0, plugged into that bridge, a fixed MAC, an IPv4 address in
// 198.51.100.0/24 and an IPv6 address in 2001:db8:1::/64 (no DAD), a multicast
// route and no default route: nothing the lab sends can leave it. The root
// namespace is never changed.
//
//	node i    198.51.100.(11+i)   2001:db8:1::(11+i)   MAC 02:1d:00:00:00:(11+i)
//	client j  198.51.100.(201+j)  2001:db8:1::(201+j)  not a cluster node
//	VIPs      use hosts 100..199 (Host4/Host6) for addresses tests move around
//
// A test creates a lab with New, starts daemons with Node.Start (each in its own
// UTS namespace, so the node's hostname is its name), runs one-shot commands with
// Node.Run, and changes the network with Node.LinkDown, Node.Unplug,
// Node.AddAddr, Node.ReplaceAddr and Lab.AddNode. Everything is torn down by
// t.Cleanup, by Lab.Close, or on SIGINT/SIGTERM of the test binary; namespaces
// that a killed run left behind are found and deleted when the next lab with
// the same prefix starts.
//
// The lab needs root, iproute2 (ip), util-linux (unshare) and procps (sysctl);
// New fails the test, never skips it, when one is missing. Importing the package
// does nothing: signal handling starts with the first lab and stops with the last.
//
// Helpers that take a testing.TB call t.Fatal on failure, so call them from the
// test's goroutine; methods that return an error may be called from anywhere.
//
// A scenario in outline (test files in test/e2e carry //go:build e2e):
//
//	l := lab.New(t, lab.Config{Prefix: "mytest", Nodes: 3, Client: true})
//	for _, n := range l.Nodes() {
//		n.Start("coredns", []string{lab.Binary(t, "coredns"), "-conf", conf},
//			lab.WithEnv("INFRADNS_UPSTREAM=127.0.0.1:5399"))
//	}
//	lab.Eventually(t, 10*time.Second, 50*time.Millisecond, "ready", func() error {
//		_, err := l.Nodes()[0].HTTPGet(ctx, "http://198.51.100.11:18181/ready")
//		return err
//	})
//	res, err := l.Client().Dig(ctx, "@198.51.100.11", "api.ocp4.example.com", "A")
package lab
