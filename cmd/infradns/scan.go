package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/nodecfg"
	"github.com/infradns/infradns/internal/vrrp"
)

type addrList []netip.Addr

func (a *addrList) String() string { return fmt.Sprint(*a) }
func (a *addrList) Set(s string) error {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return err
	}
	*a = append(*a, ip.Unmap())
	return nil
}

// scan listens for VRRP adverts and reports every router seen and every
// clash with the cluster's IDs and VIPs: run it before installing a cluster
// on a shared L2 network. It exits non-zero when it finds a conflict. The
// instances it checks are the renderer's: the same names and router IDs
// as the keepalived.conf lbconfig writes.
func scan(ctx context.Context, args []string, out io.Writer) error {
	fs := flags("vrrp-scan", "-interface IF (-f CLUSTER.yaml | -cluster NAME [-api-vip ADDR]... [-ingress-vip ADDR]...) [-duration 3s]")
	ifname := fs.String("interface", "", "interface to listen on")
	file := fs.String("f", "", "cluster file: name, VIPs and router IDs")
	name := fs.String("cluster", "", "cluster name (its router IDs are checked)")
	duration := fs.Duration("duration", 3*time.Second, "how long to listen")
	var api, ingress addrList
	fs.Var(&api, "api-vip", "API VIP (repeat per family)")
	fs.Var(&ingress, "ingress-vip", "ingress VIP (repeat per VIP)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ifname == "" || (*name == "") == (*file == "") {
		fs.Usage()
		return fmt.Errorf("vrrp-scan needs -interface and one of -f and -cluster")
	}
	ifaces, err := nodeInterfaces()
	if err != nil {
		return err
	}
	if _, ok := ifaces[*ifname]; !ok {
		return fmt.Errorf("vrrp-scan: -interface %s", nodecfg.NoInterface(*ifname, ifaces))
	}
	var groups []cluster.Group
	clusterName := *name
	if *file != "" {
		m, err := readModel(*file)
		if err != nil {
			return err
		}
		groups, clusterName = m.Groups(), m.Name()
	} else {
		// Without VIPs given, any use of our IDs is a clash worth knowing:
		// the groups are laid out without addresses.
		if err := cluster.CheckClusterName(*name); err != nil {
			return err
		}
		var err error
		if groups, err = cluster.Layout(*name, api, ingress, 1, cluster.RouterIDs{}); err != nil {
			return err
		}
	}
	ours := lb.Instances(clusterName, groups)

	// Bounded whatever the link sends: one line per router and ID (at
	// most maxScanRouters), each advert trimmed as lbconfig's guard keeps it.
	const maxScanRouters = 1024
	var mu sync.Mutex
	adverts, dropped := 0, 0
	routers := map[string]vrrp.Observation{}
	r := &vrrp.Reader{Interface: *ifname, Handle: func(o vrrp.Observation) {
		o = vrrp.Trim(o, ours)
		key := fmt.Sprintf("%s %d %d", o.Source, o.Advert.VRID, o.Advert.Version)
		mu.Lock()
		defer mu.Unlock()
		adverts++
		if _, ok := routers[key]; ok || len(routers) < maxScanRouters {
			routers[key] = o
		} else {
			dropped++
		}
	}}
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	if err := r.Run(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	seen := make([]vrrp.Observation, 0, len(routers))
	lines := make([]string, 0, len(routers))
	for _, o := range routers {
		seen = append(seen, o)
		more := ""
		if o.Omitted > 0 {
			more = fmt.Sprintf(" (+%d more)", o.Omitted)
		}
		lines = append(lines, fmt.Sprintf("router %s vrid %d v%d priority %d addresses %v%s", o.Source, o.Advert.VRID, o.Advert.Version, o.Advert.Priority, o.Advert.Addresses, more))
	}
	slices.Sort(lines)
	var ids []string
	for _, g := range groups {
		ids = append(ids, fmt.Sprintf("%s %d", g.Name, g.RouterID))
	}
	fmt.Fprintf(out, "%d adverts in %s on %s; cluster %s uses %s\n", adverts, *duration, *ifname, clusterName, strings.Join(ids, ", "))
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	if dropped > 0 {
		fmt.Fprintf(out, "%d adverts from more than %d routers not listed\n", dropped, maxScanRouters)
	}
	conflicts := vrrp.Detect(ours, nil, nil, seen)
	for _, c := range conflicts {
		fmt.Fprintln(out, "CONFLICT", c)
	}
	if len(conflicts) > 0 {
		return fmt.Errorf("%d conflicts: %s", len(conflicts), strings.ToLower(conflicts[0].Kind.String()))
	}
	return nil
}
