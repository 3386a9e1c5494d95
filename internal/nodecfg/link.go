package nodecfg

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/infradns/infradns/internal/cluster"
)

// CheckLink checks the file against the node it is rendered for, on that
// node: the interface exists, and each VIP the node's role may hold is in
// a subnet of it, where keepalived can hold it and the neighbours reach
// it. ifaces are the node's interfaces and their addresses (the caller
// reads them; this only judges). The parse of the cluster file cannot
// know either: every node reads the same file.
//
// A control-plane or bootstrap node holds the API VIPs, a worker the
// ingress VIPs. A control-plane node that runs routers holds ingress VIPs
// too, but in a cluster whose workers are on another subnet they are not
// its: they are not checked there. In BGP mode the VIPs are host routes
// announced to the ToR, in no subnet: only the interface is checked.
func (f File) CheckLink(ifaces map[string][]netip.Prefix) error {
	addrs, ok := ifaces[f.Interface]
	if !ok {
		return f.errorf([]string{"interface"}, "%s", NoInterface(f.Interface, ifaces))
	}
	if f.VIPMode == cluster.ModeBGP {
		return nil
	}
	key, vips := "apiVIPs", f.APIVIPs
	if f.Role == Worker {
		key, vips = "ingressVIPs", f.IngressVIPs
	}
	for _, vip := range vips {
		if !OnLink(vip, addrs) {
			return f.errorf([]string{key, "interface"}, "%s is outside every subnet on %s (%s): keepalived would hold it where no neighbour looks for it", vip, f.Interface, subnets(addrs))
		}
	}
	return nil
}

// OnLink says whether vip is in a subnet of an interface with addresses
// addrs. A host route (/32, /128) is no subnet: keepalived adds each VIP as
// one, and lbconfig's interface auto ignores them the same way.
func OnLink(vip netip.Addr, addrs []netip.Prefix) bool {
	return slices.ContainsFunc(addrs, func(p netip.Prefix) bool {
		return p.Addr() != vip && !p.IsSingleIP() && p.Contains(vip)
	})
}

// NoInterface is the error for an interface the node does not have, with
// those it has.
func NoInterface(name string, ifaces map[string][]netip.Prefix) string {
	return fmt.Sprintf("%q: no such interface on this node (it has %s)", name, strings.Join(slices.Sorted(maps.Keys(ifaces)), ", "))
}

func subnets(addrs []netip.Prefix) string {
	var out []string
	for _, p := range addrs {
		if !p.IsSingleIP() {
			out = append(out, p.String())
		}
	}
	if len(out) == 0 {
		return "no subnet"
	}
	return strings.Join(out, ", ")
}
