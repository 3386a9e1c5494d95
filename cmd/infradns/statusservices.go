package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"

	corev1 "k8s.io/api/core/v1"
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
	fmt.Fprintln(tw, "SERVICE\tADDRESSES\tNAMES")
	for _, r := range rows {
		addrs, names := strings.Join(r.Addresses, ","), strings.Join(r.Names, ",")
		if len(r.Addresses) == 0 {
			addrs, names = "<pending>", "-"
		}
		if r.Refused != "" {
			names += " (hostname " + r.Refused + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Service, addrs, names)
	}
	return tw.Flush()
}
