package bind

import (
	"fmt"
	"net/netip"
	"slices"
)

// Directive is one bind line: addresses or interface names, and what its
// except block leaves out.
type Directive struct {
	Args, Except []string
}

// Addr is one address of an interface as the kernel reports it.
type Addr struct {
	IP netip.Addr
	// Usable is false while the address cannot be bound: IPv6 duplicate
	// address detection has not finished (tentative) or has failed.
	Usable bool
}

// Hosts returns the hosts the directives ask for, given the interfaces'
// addresses now (by name): an interface's usable addresses (IPv6 link-local
// ones with the interface as zone), and literal addresses as given, whether
// or not the host has them yet. An argument that is neither an address nor
// the name of an interface is an error, as with CoreDNS's own bind.
func Hosts(dirs []Directive, ifaces map[string][]Addr) ([]string, error) {
	var out []string
	for _, d := range dirs {
		in, err := expand(d.Args, ifaces)
		if err != nil {
			return nil, err
		}
		except, err := expand(d.Except, ifaces)
		if err != nil {
			return nil, err
		}
		for _, h := range in {
			if !slices.Contains(except, h) && !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out, nil
}

func expand(args []string, ifaces map[string][]Addr) ([]string, error) {
	var out []string
	for _, a := range args {
		if addrs, ok := ifaces[a]; ok {
			for _, ad := range addrs {
				if ad.Usable {
					out = append(out, host(ad.IP, a))
				}
			}
			continue
		}
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return nil, fmt.Errorf("not a valid IP address or interface name: %q", a)
		}
		out = append(out, ip.String())
	}
	return out, nil
}

func host(ip netip.Addr, iface string) string {
	if ip.Is6() && !ip.Is4In6() && (ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()) {
		return ip.WithZone(iface).String()
	}
	return ip.Unmap().String()
}
