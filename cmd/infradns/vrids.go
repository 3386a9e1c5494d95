package main

import (
	"context"
	"fmt"
	"io"

	"github.com/infradns/infradns/internal/cluster"
)

// vrIDs prints the IDs in the words of `runtimecfg vr-ids` (its two lines
// first), so scripts and people used to OpenShift's tool read them the same
// way; a cluster with several ingress VIPs gets a line per further group.
func vrIDs(_ context.Context, args []string, out io.Writer) error {
	fs := flags("vr-ids", "CLUSTER [-ingress-vips N] | -f CLUSTER.yaml")
	file := fs.String("f", "", "cluster file: its name, router ID overrides and ingress VIPs")
	n := fs.Int("ingress-vips", 1, "ingress VIPs per family (each has a router ID)")
	args, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	var groups []cluster.Group
	switch {
	case *file != "" && len(args) == 0:
		m, err := readModel(*file)
		if err != nil {
			return err
		}
		groups = m.Groups()
	case *file == "" && len(args) == 1:
		if *n < 1 || *n > cluster.MaxIngressGroups {
			return fmt.Errorf("vr-ids: -ingress-vips %d: want 1 to %d", *n, cluster.MaxIngressGroups)
		}
		if err := cluster.CheckClusterName(args[0]); err != nil {
			return fmt.Errorf("vr-ids: %w", err)
		}
		if groups, err = cluster.Layout(args[0], nil, nil, *n, cluster.RouterIDs{}); err != nil {
			return err
		}
	default:
		fs.Usage()
		return fmt.Errorf("vr-ids needs one CLUSTER name or -f FILE")
	}
	for _, g := range groups {
		fmt.Fprintf(out, "%sVirtualRouterID: %d\n", idWord(g), g.RouterID)
	}
	return nil
}

// idWord is runtimecfg's word for a group: API, Ingress, then Ingress2, ...
func idWord(g cluster.Group) string {
	switch {
	case g.Holders == cluster.ControlPlane:
		return "API"
	case g.Index == 0:
		return "Ingress"
	}
	return fmt.Sprintf("Ingress%d", g.Index+1)
}
