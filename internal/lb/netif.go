package lb

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/vrrp"
)

// InterfaceFor finds the interface whose subnet holds vip (the interface
// and node-ip "auto" values) and returns its name and its addresses in that
// subnet. An interface that holds only vip itself as a host route (/32,
// /128, as keepalived adds it) does not count.
func InterfaceFor(vip netip.Addr) (string, []netip.Addr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", nil, fmt.Errorf("list interfaces: %w", err)
	}
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			continue
		}
		var own []netip.Addr
		for _, p := range vrrp.Prefixes(addrs) {
			if p.Addr() == vip || p.IsSingleIP() || !p.Contains(vip) {
				continue
			}
			own = append(own, p.Addr())
		}
		if len(own) > 0 {
			return ifi.Name, cluster.SortedAddrs(own), nil
		}
	}
	return "", nil, fmt.Errorf("no interface has a subnet holding %s", vip)
}

// OwnAddrs are the node's addresses on iface: global unicast addresses with
// a subnet prefix, not the host routes (/32, /128) keepalived adds for VIPs.
func OwnAddrs(iface string) ([]netip.Addr, error) {
	ps, err := vrrp.InterfacePrefixes(iface)
	if err != nil {
		return nil, err
	}
	var own []netip.Addr
	for _, p := range ps {
		if p.IsSingleIP() || !p.Addr().IsGlobalUnicast() {
			continue
		}
		own = append(own, p.Addr())
	}
	return cluster.SortedAddrs(own), nil
}
