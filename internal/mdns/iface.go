package mdns

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
)

// FindInterface returns the interface named name, or when name is empty the
// one that holds bind.
func FindInterface(name string, bind netip.Addr) (*net.Interface, error) {
	if name != "" {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			return nil, fmt.Errorf("interface %s: %w", name, err)
		}
		return ifi, nil
	}
	if !bind.IsValid() {
		return nil, fmt.Errorf("neither an interface nor a bind address is given")
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	for i := range ifs {
		as, err := ifs[i].Addrs()
		if err != nil {
			continue
		}
		if slices.Contains(UsableAddrs(as, true), bind.Unmap()) {
			return &ifs[i], nil
		}
	}
	return nil, fmt.Errorf("no interface holds %s", bind)
}

// InterfaceAddrs returns the addresses a publisher announces for ifi.
func InterfaceAddrs(ifi *net.Interface, linkLocal bool) ([]netip.Addr, error) {
	as, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", ifi.Name, err)
	}
	return UsableAddrs(as, linkLocal), nil
}

// Without returns as without the addresses in drop (compared unmapped), as
// a new slice.
func Without(as, drop []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		if !slices.ContainsFunc(drop, func(d netip.Addr) bool { return d.Unmap() == a.Unmap() }) {
			out = append(out, a)
		}
	}
	return out
}

// UsableAddrs keeps the unicast addresses worth announcing, sorted: no
// loopback, multicast or unspecified, and link-local only when asked (they
// are useless to a resolver that is not on this very link).
func UsableAddrs(as []net.Addr, linkLocal bool) []netip.Addr {
	var out []netip.Addr
	for _, a := range as {
		var ip net.IP
		switch a := a.(type) {
		case *net.IPNet:
			ip = a.IP
		case *net.IPAddr:
			ip = a.IP
		default:
			continue
		}
		addr, ok := netip.AddrFromSlice(ip)
		if !ok {
			continue
		}
		addr = addr.Unmap()
		if addr.IsLoopback() || addr.IsMulticast() || addr.IsUnspecified() {
			continue
		}
		if addr.IsLinkLocalUnicast() && !linkLocal {
			continue
		}
		out = append(out, addr.WithZone(""))
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}
