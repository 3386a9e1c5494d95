package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/nodecfg"

	"github.com/miekg/dns"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// Lease states in the STATE column.
const (
	stateHeld  = "HELD"  // renewed within the Lease's duration
	stateStale = "STALE" // the holder stopped renewing: dead, cut off, or it let go
	stateNone  = "NONE"  // the cluster file has this VIP, no node ever wrote its Lease
)

// vipRow is one VIP as `infradns status` prints it.
type vipRow struct {
	Cluster string    `json:"cluster"`
	Group   string    `json:"group"`
	Family  string    `json:"family"`
	VIP     string    `json:"vip"`
	Holder  string    `json:"holder,omitempty"`
	State   string    `json:"state"`
	Since   time.Time `json:"since,omitzero"`
	Renewed time.Time `json:"renewed,omitzero"`
	// Transitions counts the holder changes the Lease has seen.
	Transitions int32  `json:"transitions"`
	Lease       string `json:"lease,omitempty"`
}

// status prints who holds each VIP, from the status Leases every holder's
// lbconfig renews every 10 s (30 s duration): a holder that stopped renewing
// is STALE, whatever the Lease still names.
func status(ctx context.Context, args []string, out io.Writer) error {
	fs := flags("status", "[-kubeconfig PATH] [-n NAMESPACE] [-f CLUSTER.yaml | -cluster NAME] [-nodes] [-services [-domain DOMAIN]] [-o table|json|yaml]")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default as kubectl: $KUBECONFIG, then ~/.kube/config)")
	ns := fs.String("n", "infradns", "namespace of the status Leases (the cluster file's statusLeaseNamespace)")
	file := fs.String("f", "", "cluster file: list every VIP it defines, held or not (NONE)")
	name := fs.String("cluster", "", "only this cluster's VIPs (default: the cluster file's, else every cluster's)")
	format := fs.String("o", "table", "output: table, json or yaml")
	nodes := fs.Bool("nodes", false, "also ask every Node's metrics endpoints (the cluster file's metricsAddress must let them be reached)")
	lbPort := fs.Int("lb-metrics-port", 9155, "the lbconfig pod's metrics port")
	dnsPort := fs.Int("dns-metrics-port", 9153, "the DNS pod's metrics port")
	services := fs.Bool("services", false, "also list the Services of type LoadBalancer: their addresses, the names lbservices answers (lbServiceNames) and, with the pools of ConfigMap infradns/lb-pools (lbPools), why a Service is pending and what each pool has left, and in vipMode bgp which nodes announce it")
	domain := fs.String("domain", "", "with -services: the cluster domain the names are below (default: the cluster file's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("status: unexpected argument %q", fs.Arg(0))
	}
	if !slices.Contains([]string{"table", "json", "yaml"}, *format) {
		return fmt.Errorf("status: -o %q: want table, json or yaml", *format)
	}
	if err := cluster.CheckNamespace(*ns); err != nil {
		return fmt.Errorf("status: -n: %w", err)
	}
	var model *cluster.Model
	if *file != "" {
		m, err := readModel(*file)
		if err != nil {
			return err
		}
		model = m
		if *name == "" {
			*name = m.Name()
		}
	}
	if *name != "" {
		if err := cluster.CheckClusterName(*name); err != nil {
			return fmt.Errorf("status: -cluster: %w", err)
		}
	}
	// Without the cluster file, lbpools is taken to serve its class only,
	// and the Services not to be announced by infradns.
	lbDefault, announced := false, false
	if *services && *file != "" {
		f, err := readClusterFile(*file)
		if err != nil {
			return err
		}
		if *domain == "" {
			*domain = f.Domain
		}
		lbDefault = f.LBPools == "default"
		announced = f.VIPMode == cluster.ModeBGP && (f.LBPools == "class" || f.LBPools == "default")
	}
	if *services && *domain == "" {
		return errors.New("status: -services needs the cluster domain: -f CLUSTER.yaml or -domain DOMAIN")
	}
	if *services {
		if err := cluster.CheckDomain(*domain); err != nil {
			return fmt.Errorf("status: -domain: %w", err)
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("status: kubeconfig: %w", err)
	}
	cfg.UserAgent = "infradns-status"
	client, err := kube.NewForConfig(cfg)
	if err != nil {
		return err
	}
	selector := kube.LabelManagedBy + "=" + kube.ManagedByLBConfig
	if *name != "" {
		selector += "," + kube.LabelCluster + "=" + *name
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	list, err := client.Leases(*ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return fmt.Errorf("status: Leases in %s: %w", *ns, err)
	}
	rows := vipRows(list.Items, model, time.Now())
	var nodeRows []nodeRow
	if *nodes {
		nl, err := cache.ToListerWithContext(client.Nodes(kube.AllNodes)).ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return fmt.Errorf("status: Nodes: %w", err)
		}
		items, _ := meta.ExtractList(nl)
		var targets []nodeTarget
		for _, o := range items {
			if n, ok := o.(*corev1.Node); ok {
				node := kube.ToNode(n)
				if len(node.Addresses) > 0 {
					targets = append(targets, nodeTarget{Name: node.Name, Addr: node.Addresses[0]})
				}
			}
		}
		nodeRows = scrapeNodes(ctx, targets, *lbPort, *dnsPort, time.Now())
	}
	var svcRows []serviceRow
	var poolRows []poolRow
	if *services {
		sl, err := cache.ToListerWithContext(client.Services()).ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return fmt.Errorf("status: Services: %w", err)
		}
		list, ok := sl.(*corev1.ServiceList)
		if !ok {
			return fmt.Errorf("status: Services: unexpected %T", sl)
		}
		svcRows = serviceRows(list.Items, cluster.ServiceNamesLabel, dns.Fqdn(strings.ToLower(*domain)))
		// The pools, when lbpools has some: why a Service is pending,
		// what each pool has left. No ConfigMap (or no right to read
		// it): the Services as they are.
		cl, err := cache.ToListerWithContext(client.ConfigMap(nodecfg.DefaultStatusLeaseNamespace, kube.PoolsConfigMap)).ListWithContext(ctx, metav1.ListOptions{})
		if cms, ok := cl.(*corev1.ConfigMapList); err == nil && ok && len(cms.Items) == 1 {
			alloc, pools, err := allocation(list.Items, &cms.Items[0], lbDefault)
			if err != nil {
				return fmt.Errorf("status: %w", err)
			}
			annotate(svcRows, alloc)
			poolRows = pools
		}
		if announced {
			el, err := cache.ToListerWithContext(client.EndpointSlices(metav1.NamespaceAll, "")).ListWithContext(ctx, metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				return fmt.Errorf("status: EndpointSlices (who announces the Local Services): %w", err)
			}
			sls, ok := el.(*discoveryv1.EndpointSliceList)
			if !ok {
				return fmt.Errorf("status: EndpointSlices: unexpected %T", el)
			}
			announcers(svcRows, list.Items, sls.Items, lbDefault)
		}
	}
	return printStatus(out, rows, nodeRows, svcRows, poolRows, *format, time.Now())
}

// vipRows turns the Leases (and, with a model, the VIPs it defines) into
// rows sorted by cluster, group, family.
func vipRows(leases []coordinationv1.Lease, model *cluster.Model, now time.Time) []vipRow {
	var rows []vipRow
	seen := map[string]bool{}
	for _, l := range leases {
		r := vipRow{
			Cluster: l.Labels[kube.LabelCluster], Group: l.Labels[kube.LabelGroup], Family: l.Labels[kube.LabelFamily],
			VIP: l.Annotations[kube.AnnotationVIP], Lease: l.Name, State: stateStale,
		}
		if l.Spec.HolderIdentity != nil {
			r.Holder = *l.Spec.HolderIdentity
		}
		if l.Spec.AcquireTime != nil {
			r.Since = l.Spec.AcquireTime.Time
		}
		if l.Spec.LeaseTransitions != nil {
			r.Transitions = *l.Spec.LeaseTransitions
		}
		if l.Spec.RenewTime != nil {
			r.Renewed = l.Spec.RenewTime.Time
			d := time.Duration(0)
			if l.Spec.LeaseDurationSeconds != nil {
				d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
			}
			if now.Before(r.Renewed.Add(d)) {
				r.State = stateHeld
			}
		}
		seen[l.Name] = true
		rows = append(rows, r)
	}
	if model != nil {
		for _, g := range model.Groups() {
			for _, a := range g.VIPs {
				lease := cluster.StatusLeaseName(model.Name(), g.Name, a)
				if !seen[lease] {
					rows = append(rows, vipRow{Cluster: model.Name(), Group: g.Name, Family: cluster.Family(a), VIP: a.String(), State: stateNone})
				}
			}
		}
	}
	slices.SortFunc(rows, func(a, b vipRow) int {
		return strings.Compare(a.Cluster+"\x00"+groupKey(a.Group)+"\x00"+a.Family, b.Cluster+"\x00"+groupKey(b.Group)+"\x00"+b.Family)
	})
	return rows
}

// groupKey sorts api first, then ingress, ingress-2, ..., ingress-10.
func groupKey(g string) string {
	switch {
	case g == "api":
		return "0"
	case g == "ingress":
		return "1"
	case strings.HasPrefix(g, "ingress-"):
		return fmt.Sprintf("2%03s", strings.TrimPrefix(g, "ingress-"))
	}
	return "3" + g
}

func printRows(out io.Writer, rows []vipRow, format string, now time.Time) error {
	return printStatus(out, rows, nil, nil, nil, format, now)
}

func printStatus(out io.Writer, rows []vipRow, nodes []nodeRow, services []serviceRow, pools []poolRow, format string, now time.Time) error {
	doc := map[string]any{"vips": rows}
	if nodes != nil {
		doc["nodes"] = nodes
	}
	if services != nil {
		doc["services"] = services
	}
	if pools != nil {
		doc["pools"] = pools
	}
	switch format {
	case "json":
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(doc)
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tGROUP\tFAMILY\tVIP\tHOLDER\tSTATE\tSINCE\tRENEWED\tTRANSITIONS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", dash(r.Cluster), dash(r.Group), dash(r.Family), dash(r.VIP),
			dash(r.Holder), r.State, ago(r.Since, now), ago(r.Renewed, now), r.Transitions)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if nodes != nil {
		fmt.Fprintln(out)
		if err := printNodes(out, nodes, now); err != nil {
			return err
		}
	}
	if services != nil {
		fmt.Fprintln(out)
		if err := printServices(out, services); err != nil {
			return err
		}
	}
	if pools != nil {
		fmt.Fprintln(out)
		return printPools(out, pools)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ago is kubectl's style of age: "42s ago", "3m12s ago", "2h5m ago".
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "in " + (-d).Round(time.Second).String()
	case d < time.Hour:
		return d.Round(time.Second).String() + " ago"
	}
	return d.Round(time.Minute).String() + " ago"
}
