package lb

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/infradns/infradns/internal/cluster"
)

// ErrUnsafe: a plan holds a value that is not what its field may hold. Every
// value is checked where it enters (the cluster model, the API watch); this
// is the last line before text that root runs, so a value that slipped past
// refuses the whole snapshot instead of reaching the file.
var ErrUnsafe = errors.New("unsafe value in the plan")

// word is what a name in keepalived.conf or haproxy.cfg may be: no space,
// quote, brace, '#', newline or anything else a parser would act on.
var word = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,253}$`)

// maxAdvertAddrs is how many addresses of a family one instance's adverts
// may carry. keepalived 2.2.7 (vrrp_complete_instance) fits its
// virtual_ipaddress into one advert: past min(255, (MTU - Ethernet, IP
// and VRRP headers) / address size) it moves the rest to the excluded
// list and reports a configuration error (keepalived -t fails). At the
// smallest MTU of an IPv6 link, 1280, that is 76 IPv6 addresses, and 255
// IPv4 ones (the advert's 8-bit count). Desired puts one address in each
// instance's adverts; this bounds a plan made otherwise.
// virtual_ipaddress_excluded has no bound in keepalived, and Excluded none
// here.
func maxAdvertAddrs(v6 bool) int {
	if v6 {
		return (1280 - 14 - 40 - 8) / 16
	}
	return min(255, (1280-14-20-8-8)/4)
}

// check holds every field of the plan to its whitelist.
func (p Plan) check() error {
	bad := func(what, v string) error { return fmt.Errorf("%w: %s %q", ErrUnsafe, what, v) }
	for what, v := range map[string]string{"cluster": p.Cluster, "node": p.NodeName, "interface": p.Interface,
		"advert interval": p.AdvertInt, "haproxy section": p.HAProxy.Name} {
		if !word.MatchString(v) {
			return bad(what, v)
		}
	}
	for _, t := range p.TrackFiles {
		if !word.MatchString(t.Name) {
			return bad("track file name", t.Name)
		}
		if cluster.CheckPath(t.Path) != nil {
			return bad("track file path", t.Path)
		}
	}
	for _, in := range p.Instances {
		if !word.MatchString(in.Name) || !word.MatchString(in.Track) || !word.MatchString(in.Split) || !word.MatchString(in.Boost) {
			return bad("instance", in.Name+" "+in.Track+" "+in.Split+" "+in.Boost)
		}
		if in.AuthPass != "" && !word.MatchString(in.AuthPass) {
			return bad("auth_pass", in.AuthPass)
		}
		for _, v := range slices.Concat(in.VIPs, in.Excluded) {
			if pfx, err := netip.ParsePrefix(v); err != nil || cluster.CheckUnicast(pfx.Addr()) != nil {
				return bad("VIP", v)
			}
		}
		if len(in.VIPs) > 0 {
			v6 := strings.Contains(in.VIPs[0], ":")
			if most := maxAdvertAddrs(v6); len(in.VIPs) > most {
				return fmt.Errorf("%w: instance %s: %d addresses in its adverts, at most %d fit one (the others belong in Excluded)", ErrUnsafe, in.Name, len(in.VIPs), most)
			}
		}
		if in.SrcIP == "" && len(in.Peers) == 0 {
			continue // multicast
		}
		for _, a := range append([]string{in.SrcIP}, in.Peers...) {
			if ip, err := netip.ParseAddr(a); err != nil || cluster.CheckUnicast(ip) != nil {
				return bad("unicast address", a)
			}
		}
	}
	for _, b := range p.HAProxy.Backends {
		if !word.MatchString(b.Name) {
			return bad("server name", b.Name)
		}
		if ap, err := netip.ParseAddrPort(b.Address); err != nil || cluster.CheckUnicast(ap.Addr()) != nil || ap.Port() == 0 {
			return bad("server address", b.Address)
		}
	}
	return nil
}
