package main

import (
	"context"
	"fmt"
	"io"
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
	fs := flags("render", "-f CLUSTER.yaml [-role ROLE] [-node NAME] [-keepalived FILE|-] [-haproxy FILE|-] [-validate]")
	load := nodeFlags(fs, "control-plane or bootstrap")
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
	if f.Node == "" {
		h, err := os.Hostname()
		if err != nil {
			return err
		}
		f.Node = strings.ToLower(h)
	}
	m, err := f.Model()
	if err != nil {
		return err
	}
	if len(m.Spec().StaticBackends) == 0 {
		return fmt.Errorf("%s: apiServers: render works without the API: list the apiservers haproxy starts with", f.Name)
	}
	p, err := lb.Desired(cluster.Snapshot{}, m)
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

type noValidation struct{}

func (noValidation) Validate(context.Context, lb.Kind, []byte) error { return nil }
