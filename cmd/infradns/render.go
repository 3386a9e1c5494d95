package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"

	"github.com/infradns/infradns/internal/atomicfile"
	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/nodecfg"
)

// render prints (or writes) the keepalived and haproxy configuration that
// lbconfig writes on a control-plane or bootstrap node before the API lists
// anything: the API VIP over the cluster file's apiServers. The same model,
// checks and templates as lbconfig; for a look before installing, or for a
// node that runs keepalived and haproxy without CoreDNS.
func render(ctx context.Context, args []string, out io.Writer) error {
	fs := flags("render", "-f CLUSTER.yaml [-role ROLE] [-node NAME] [-node-ip ADDR]... [-keepalived FILE|-] [-haproxy FILE|-] [-validate]")
	load := nodeFlags(fs, "control-plane or bootstrap")
	var nodeIPs addrList
	fs.Var(&nodeIPs, "node-ip", "the node's address on the interface (repeat per family): its rank among apiServers gives its VRRP priority, as lbconfig's; default: this host's addresses when rendering for this host")
	kOut := fs.String("keepalived", "-", "write keepalived.conf to this regular file (- : stdout)")
	hOut := fs.String("haproxy", "-", "write haproxy.cfg to this regular file (- : stdout)")
	validate := fs.Bool("validate", false, "check with keepalived -t and haproxy -c before writing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return fmt.Errorf("render takes no arguments")
	}
	// Regular files only, checked before anything is written: renaming
	// over /dev/null (as root) replaces the device, and reading
	// /dev/stdout's pipe to compare blocks.
	for _, p := range []string{*kOut, *hOut} {
		if p == "" {
			return fmt.Errorf("render: an empty output path: name a file, or - for stdout")
		}
		if p == "-" {
			continue
		}
		if err := atomicfile.CheckTarget(p); err != nil {
			return fmt.Errorf("render: %w", err)
		}
	}
	f, err := load()
	if err != nil {
		return err
	}
	if f.Role == nodecfg.Worker {
		return fmt.Errorf("render: a worker renders nothing before the API lists its router endpoints (its keepalived follows lbconfig)")
	}
	// The same refusal as render-node's: haproxy starts with these.
	if err := f.CheckAPIServers(); err != nil {
		return err
	}
	h, err := os.Hostname()
	if err != nil {
		return err
	}
	h = strings.ToLower(h)
	local := f.Node == "" || f.Node == h
	if f.Node == "" {
		f.Node = h
	}
	m, err := f.Model()
	if err != nil {
		return err
	}
	if local {
		// For this host: its interface and subnets are here to check.
		if err := checkLocalLink(f); err != nil {
			return err
		}
	}
	ips := []netip.Addr(nodeIPs)
	if ips == nil {
		if local {
			// As lbconfig finds them when it starts on this node.
			if ips, err = lb.OwnAddrs(m.Spec().Interface); err != nil {
				return fmt.Errorf("render: interface %s: %w", m.Spec().Interface, err)
			}
		} else {
			fmt.Fprintf(os.Stderr, "infradns render: node %s is not this host and -node-ip is not given: rendered at rank 0 (priority %d); lbconfig ranks it by its address among apiServers\n", f.Node, lb.RankPriority(0))
		}
	}
	p, err := bootstrapPlan(m, ips)
	if err != nil {
		return err
	}
	for _, o := range []struct {
		kind lb.Kind
		path string
		fn   func(lb.Plan) ([]byte, error)
	}{{lb.Keepalived, *kOut, lb.RenderKeepalived}, {lb.HAProxyCfg, *hOut, lb.RenderHAProxy}} {
		data, err := o.fn(p)
		if err != nil {
			return err
		}
		if *validate {
			if err := (lb.Tools{}).Validate(ctx, o.kind, data); err != nil {
				return err
			}
		}
		if o.path == "-" {
			if _, err := out.Write(data); err != nil {
				return err
			}
			continue
		}
		if _, err := lb.Install(ctx, noValidation{}, o.kind, o.path, data); err != nil {
			return err
		}
	}
	return nil
}

// bootstrapPlan is what lbconfig writes on a node with addresses ips before
// the API lists anything: the model with the node's addresses, so its rank
// among the static backends gives its VRRP priority (cluster.Assign,
// lb.RankPriority), then lb.Desired of an empty snapshot, as lbconfig.
func bootstrapPlan(m *cluster.Model, ips []netip.Addr) (lb.Plan, error) {
	spec := m.Spec()
	m, err := m.WithNode(spec.Node, spec.Interface, ips)
	if err != nil {
		return lb.Plan{}, fmt.Errorf("render: the node's addresses %v (-node-ip, or this host's): %w", ips, err)
	}
	return lb.Desired(cluster.Snapshot{}, m)
}

type noValidation struct{}

func (noValidation) Validate(context.Context, lb.Kind, []byte) error { return nil }
