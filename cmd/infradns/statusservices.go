package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/lbpool"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// serviceRow is one Service of type LoadBalancer as `infradns status
// -services` prints it: its addresses and the names every node's lbservices
// answers for it (lbServiceNames).
type serviceRow struct {
	Service   string   `json:"service"`
	Addresses []string `json:"addresses,omitempty"`
	// Names are fully qualified; none while the Service is pending.
	Names []string `json:"names,omitempty"`
	// Refused is the hostname annotation not served, and why.
	Refused string `json:"refusedHostname,omitempty"`
	// Pending is why lbpools gives the Service no address (or not all);
	// Orphaned the addresses it keeps that no pool of its namespace holds.
	Pending  string   `json:"pending,omitempty"`
	Orphaned []string `json:"orphaned,omitempty"`
	// AnnouncedBy says which nodes announce its addresses over BGP (the
	// cluster file's lbPools in vipMode bgp): "every node" for the policy
	// Cluster, the nodes with a ready endpoint for Local; nil: not
	// announced by infradns (another class, or VRRP mode).
	AnnouncedBy []string `json:"announcedBy,omitempty"`
}

// announcers fills in AnnouncedBy as every node's lbconfig decides it
// (kube.LBServices over the same objects): list's Services of our class
// (and with isDefault those with no class), their EndpointSlices in
// slicesIn.
func announcers(rows []serviceRow, list []corev1.Service, slicesIn []discoveryv1.EndpointSlice, isDefault bool) {
	svcs := make([]any, len(list))
	for i := range list {
		svcs[i] = &list[i]
	}
	sls := make([]any, len(slicesIn))
	for i := range slicesIn {
		sls[i] = &slicesIn[i]
	}
	by := map[string][]string{}
	for _, s := range kube.LBServices(svcs, sls, kube.DefaultClass, isDefault, func(kube.Drop) {}) {
		by[s.Key()] = s.Announcers()
		if by[s.Key()] == nil {
			by[s.Key()] = []string{"no node: no ready endpoint (Local)"}
		}
	}
	for i := range rows {
		rows[i].AnnouncedBy = by[rows[i].Service]
	}
}

// poolRow is one pool and family as `infradns status -services` prints it.
type poolRow struct {
	Pool   string  `json:"pool"`
	Family string  `json:"family"`
	Used   int     `json:"used"`
	Size   float64 `json:"size"`
}

// allocation is what lbpools decides for list from the pools cm holds, as
// the allocating node computes it (the same function, the same input): the
// pending reasons and orphans of its Services, by namespace/name, and each
// pool's use.
func allocation(list []corev1.Service, cm *corev1.ConfigMap, isDefault bool) (map[string]lbpool.Result, []poolRow, error) {
	cfg, err := lbpool.Parse([]byte(cm.Data[kube.PoolsKey]))
	if err != nil {
		return nil, nil, fmt.Errorf("ConfigMap %s/%s key %s:%v", cm.Namespace, cm.Name, kube.PoolsKey, err)
	}
	svcs := make([]*corev1.Service, len(list))
	for i := range list {
		svcs[i] = &list[i]
	}
	ours, claims := kube.Claims(svcs, kube.DefaultClass, isDefault)
	res := lbpool.Allocate(cfg, claims)[:len(ours)]
	out := make(map[string]lbpool.Result, len(ours))
	for i, s := range ours {
		out[s.Namespace+"/"+s.Name] = res[i]
	}
	var pools []poolRow
	for _, u := range lbpool.Usages(cfg, res) {
		pools = append(pools, poolRow(u))
	}
	return out, pools, nil
}

// annotate adds the allocation's reasons to rows.
func annotate(rows []serviceRow, alloc map[string]lbpool.Result) {
	for i := range rows {
		r, ok := alloc[rows[i].Service]
		if !ok {
			continue
		}
		rows[i].Pending = r.Pending
		for _, a := range r.Orphaned {
			rows[i].Orphaned = append(rows[i].Orphaned, a.String())
		}
	}
}

// serviceRows are the Services of type LoadBalancer of list, sorted by
// namespace and name, with the names of cluster.ServiceNames below
// label.domain; a Service without an address is listed without names
// (pending).
func serviceRows(list []corev1.Service, label, domain string) []serviceRow {
	var named []cluster.Service
	rows := []serviceRow{} // the header even with none
	for i := range list {
		s := &list[i]
		if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		if svc, ok := kube.ToService(s, func(kube.Drop) {}); ok {
			named = append(named, svc)
			continue
		}
		rows = append(rows, serviceRow{Service: s.Namespace + "/" + s.Name})
	}
	slices.SortFunc(named, func(a, b cluster.Service) int { return strings.Compare(a.Key(), b.Key()) })
	names, refused := cluster.ServiceNames(named)
	suffix := "." + strings.TrimSuffix(label+"."+domain, ".")
	byService := make([]serviceRow, len(named))
	for i, s := range named {
		byService[i].Service = s.Key()
		for _, a := range s.Addrs {
			byService[i].Addresses = append(byService[i].Addresses, a.String())
		}
	}
	for _, n := range names {
		byService[n.Service].Names = append(byService[n.Service].Names, n.Rel+suffix)
	}
	at := make(map[string]int, len(named))
	for i, s := range named {
		at[s.Key()] = i
	}
	for _, r := range refused {
		byService[at[r.Service]].Refused = fmt.Sprintf("%s: %s", r.Hostname, r.Reason)
	}
	rows = append(rows, byService...)
	slices.SortFunc(rows, func(a, b serviceRow) int { return strings.Compare(a.Service, b.Service) })
	return rows
}

func printServices(out io.Writer, rows []serviceRow) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	announced := slices.ContainsFunc(rows, func(r serviceRow) bool { return r.AnnouncedBy != nil })
	if announced {
		fmt.Fprintln(tw, "SERVICE\tADDRESSES\tANNOUNCED BY\tNAMES")
	} else {
		fmt.Fprintln(tw, "SERVICE\tADDRESSES\tNAMES")
	}
	for _, r := range rows {
		addrs, names := strings.Join(r.Addresses, ","), strings.Join(r.Names, ",")
		if len(r.Addresses) == 0 {
			addrs, names = "<pending>", "-"
		}
		if r.Pending != "" {
			names += " (pending: " + r.Pending + ")"
		}
		if len(r.Orphaned) > 0 {
			names += " (no pool holds " + strings.Join(r.Orphaned, ",") + " any more: kept)"
		}
		if r.Refused != "" {
			names += " (hostname " + r.Refused + ")"
		}
		if announced {
			by := strings.Join(r.AnnouncedBy, ",")
			if len(r.Addresses) == 0 || by == "" {
				by = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Service, addrs, by, names)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Service, addrs, names)
	}
	return tw.Flush()
}

func printPools(out io.Writer, rows []poolRow) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tFAMILY\tUSED\tSIZE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", r.Pool, r.Family, r.Used, strconv.FormatFloat(r.Size, 'f', -1, 64))
	}
	return tw.Flush()
}
