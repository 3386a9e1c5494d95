package lab

import (
	"fmt"
	"net/netip"
)

// A routed lab (Config.Routed) puts node i in 10.91.(i+1).0/24 and
// fd00:91:(i+1)::/64, as .2 / ::2, and client k in 10.91.(200+k).0/24; the
// switch namespace is .1 / ::1 on every link and routes between them, as a
// ToR does. 10.91.100.0/24 is left for VIPs, which no link holds.
var (
	RoutedSubnet4 = netip.MustParsePrefix("10.91.0.0/16")
	RoutedSubnet6 = netip.MustParsePrefix("fd00:91::/32")
)

const firstRoutedClient = 200

func routedAddr4(sub, host int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 91, byte(sub), byte(host)})
}

func routedAddr6(sub, host int) netip.Addr {
	return netip.MustParseAddr(fmt.Sprintf("fd00:91:%x::%x", sub, host))
}

// setupRouted wires a node to the router: a veth of its own, a /24 and a
// /64 on it, default routes through the router.
func (n *Node) setupRouted() error {
	sw := n.lab.sw
	if err := ipCmd("netns", "add", n.NS); err != nil {
		return err
	}
	if err := nsSysctl(n.NS, false,
		"net.ipv6.conf.all.accept_dad=0",
		"net.ipv6.conf.default.accept_dad=0",
		"net.ipv6.conf.all.keep_addr_on_down=1",
		"net.ipv6.conf.default.keep_addr_on_down=1",
	); err != nil {
		return err
	}
	if err := ipBatch(sw,
		fmt.Sprintf("link add %s type veth peer name %s netns %s", n.port, Iface, n.NS),
		fmt.Sprintf("addr add %s/24 dev %s", n.Gateway4, n.port),
		fmt.Sprintf("addr add %s/64 dev %s nodad", n.Gateway6, n.port),
		fmt.Sprintf("link set %s up", n.port),
	); err != nil {
		return err
	}
	return ipBatch(n.NS,
		"link set lo up",
		fmt.Sprintf("link set %s address %s", Iface, n.MAC),
		fmt.Sprintf("addr add %s/24 dev %s", n.IPv4, Iface),
		fmt.Sprintf("addr add %s/64 dev %s nodad", n.IPv6, Iface),
		fmt.Sprintf("link set %s up", Iface),
		fmt.Sprintf("route add default via %s dev %s", n.Gateway4, Iface),
		fmt.Sprintf("route add default via %s dev %s", n.Gateway6, Iface),
	)
}

// nftTable is the table Blackhole adds in a node's namespace.
const nftTable = "labblackhole"

// Blackhole drops every packet in and out of the node's eth0 while its
// link stays up: a node that hangs or a cable cut beyond the switch, the
// failure only a liveness protocol (BFD, hold timers) notices.
func (n *Node) Blackhole() error {
	rules := fmt.Sprintf(`table inet %[1]s {
	chain in { type filter hook input priority -300; policy accept; iifname %[2]q drop; }
	chain out { type filter hook output priority -300; policy accept; oifname %[2]q drop; }
}
`, nftTable, Iface)
	return nsStdin(n.NS, rules, "nft", "-f", "-")
}

// Unblackhole undoes Blackhole.
func (n *Node) Unblackhole() error {
	return nsStdin(n.NS, "", "nft", "delete", "table", "inet", nftTable)
}
