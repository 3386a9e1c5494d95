package bgp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Proto marks the routes infradns adds (rtm_protocol), so it lists and
// removes its own and never a route someone else added ("proto 199" in
// `ip route`).
const Proto = 199

// kernelRoutes keeps a set of host routes of one type in one table, marked
// with Proto.
type kernelRoutes struct {
	table int
	typ   int // unix.RTN_LOCAL or unix.RTN_UNICAST
	scope netlink.Scope
}

func (k kernelRoutes) list() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := netlink.RouteListFiltered(fam, &netlink.Route{Table: k.table, Protocol: Proto},
			netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
		if err != nil {
			return nil, fmt.Errorf("list table %d: %w", k.table, err)
		}
		for _, r := range rs {
			if r.Dst == nil || r.Type != k.typ {
				continue
			}
			a, ok := netip.AddrFromSlice(r.Dst.IP)
			ones, _ := r.Dst.Mask.Size()
			if ok {
				out = append(out, netip.PrefixFrom(a.Unmap(), ones))
			}
		}
	}
	return sortPrefixes(out), nil
}

func (k kernelRoutes) route(p netip.Prefix) (*netlink.Route, error) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return nil, err
	}
	return &netlink.Route{
		LinkIndex: lo.Index,
		Dst:       &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())},
		Table:     k.table,
		Type:      k.typ,
		Scope:     k.scope,
		Protocol:  Proto,
	}, nil
}

// set makes the table's routes of ours exactly want.
func (k kernelRoutes) set(want []netip.Prefix) error {
	have, err := k.list()
	if err != nil {
		return err
	}
	add, del := diff(have, sortPrefixes(append([]netip.Prefix(nil), want...)))
	var errs []error
	for _, p := range add {
		r, err := k.route(p)
		if err == nil {
			err = netlink.RouteReplace(r)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("add %s to table %d: %w", p, k.table, err))
		}
	}
	for _, p := range del {
		r, err := k.route(p)
		if err == nil {
			err = netlink.RouteDel(r)
		}
		if err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("remove %s from table %d: %w", p, k.table, err))
		}
	}
	return errors.Join(errs...)
}

// LocalRoutes holds VIPs as local routes on lo (`ip route add local VIP/32
// dev lo table local`), not as interface addresses: the node accepts
// traffic for them and haproxy can bind them, but they are no connected
// route, which would hide the hand-off table's route from FRR's zebra
// (distance 0 beats an imported table's 15: nothing is redistributed), and
// no address another node's ARP could find.
type LocalRoutes struct{}

// Hold implements LocalVIPs.
func (LocalRoutes) Hold(vips []netip.Prefix) error {
	return kernelRoutes{table: unix.RT_TABLE_LOCAL, typ: unix.RTN_LOCAL, scope: netlink.SCOPE_HOST}.set(vips)
}

// Table hands the routes to the site's own speaker: each announced VIP is a
// route in kernel table N (`VIP/32 dev lo table N proto 199`), which FRR
// imports (`ip import-table N` + `redistribute table N`) or bird exports
// (`protocol kernel { kernel table N; ... }`).
type Table struct {
	ID int
}

// Announce implements Speaker.
func (t Table) Announce(_ context.Context, routes []netip.Prefix) error {
	return kernelRoutes{table: t.ID, typ: unix.RTN_UNICAST, scope: netlink.SCOPE_LINK}.set(routes)
}

// Sessions implements Speaker: the site's speaker has them.
func (Table) Sessions() []Session { return nil }

// Close implements Speaker: the table is emptied of our routes.
func (t Table) Close(ctx context.Context) error { return t.Announce(ctx, nil) }
