package lb

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"

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
		for _, v := range in.VIPs {
			if pfx, err := netip.ParsePrefix(v); err != nil || cluster.CheckUnicast(pfx.Addr()) != nil {
				return bad("VIP", v)
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
