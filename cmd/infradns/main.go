// Command infradns is the operator's tool for the infradns stack:
//
//	infradns vr-ids CLUSTER            the VRRP router IDs of a cluster
//	infradns render -f FILE [flags]    keepalived/haproxy configuration without an API
//	infradns render-node -f FILE -o DIR  a node's static pods, Corefile and resolver wiring
//	infradns vrrp-scan [flags]         who else speaks VRRP on a link, and clashes with us
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/infradns/infradns/internal/atomicfile"
	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/nodecfg"
	"github.com/infradns/infradns/internal/vrrp"
)

// version is set by the Makefile from git describe.
var version = "dev"

const usage = `usage:
  infradns vr-ids CLUSTER
  infradns render -f CLUSTER.yaml [-keepalived FILE] [-haproxy FILE] [-validate]
  infradns render-node -f CLUSTER.yaml -o ROOT [-role control-plane|worker|bootstrap] [-node NAME]
  infradns vrrp-scan -interface IF -cluster NAME [-api-vip ADDR]... [-ingress-vip ADDR]... [-duration 3s]
  infradns version
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "infradns:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("see usage")

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "vr-ids":
		return vrIDs(args[1:], out)
	case "render":
		return render(ctx, args[1:], out)
	case "render-node":
		return renderNode(args[1:], out)
	case "vrrp-scan":
		return scan(ctx, args[1:], out)
	case "version":
		fmt.Fprintln(out, version)
		return nil
	}
	fmt.Fprint(os.Stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// vrIDs prints the IDs in the words of `runtimecfg vr-ids`, so scripts and
// people used to OpenShift's tool read them the same way.
func vrIDs(args []string, out io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("vr-ids needs one CLUSTER name")
	}
	ids, err := vrrp.ClusterIDs(args[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "APIVirtualRouterID: %d\nIngressVirtualRouterID: %d\n", ids.API, ids.Ingress)
	return nil
}

func render(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	file := fs.String("f", "", "cluster file (YAML)")
	kOut := fs.String("keepalived", "", "write keepalived.conf here (default: stdout)")
	hOut := fs.String("haproxy", "", "write haproxy.cfg here (default: stdout)")
	validate := fs.Bool("validate", false, "check with keepalived -t and haproxy -c before writing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" || fs.NArg() != 0 {
		return fmt.Errorf("render needs -f FILE and no arguments")
	}
	b, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	s, c, err := lb.ParseClusterFile(b)
	if err != nil {
		return err
	}
	p, err := lb.Desired(s, c)
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
		if o.path == "" {
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

// renderNode writes what one node installs under a root directory: "/" on
// the node itself, or a staging directory to copy from. Nothing is written
// unless every file renders and validates.
func renderNode(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("render-node", flag.ContinueOnError)
	file := fs.String("f", "", "cluster file (YAML)")
	root := fs.String("o", "", "root directory to write under (/ on the node)")
	role := fs.String("role", "", "this node's role, overriding the file's")
	node := fs.String("node", "", "this node's Node name, overriding the file's")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" || *root == "" || fs.NArg() != 0 {
		return fmt.Errorf("render-node needs -f FILE and -o ROOT")
	}
	b, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	f, err := nodecfg.Parse(b)
	if err != nil {
		return err
	}
	if *role != "" {
		f.Role = *role
	}
	if *node != "" {
		f.Node = *node
	}
	v, err := f.Values()
	if err != nil {
		return fmt.Errorf("%s: %w", *file, err)
	}
	outs, err := nodecfg.Render(v)
	if err != nil {
		return err
	}
	changed, err := nodecfg.WriteTree(*root, outs, atomicfile.WriteIfChanged)
	for _, o := range outs {
		state := "unchanged"
		if slices.Contains(changed, o.Path) {
			state = "written"
		}
		fmt.Fprintf(out, "%-9s %s\n", state, o.Path)
	}
	return err
}

type noValidation struct{}

func (noValidation) Validate(context.Context, lb.Kind, []byte) error { return nil }

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
// on a shared L2 network. It exits non-zero when it finds a conflict.
func scan(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("vrrp-scan", flag.ContinueOnError)
	ifname := fs.String("interface", "", "interface to listen on")
	cluster := fs.String("cluster", "", "cluster name (its router IDs are checked)")
	duration := fs.Duration("duration", 3*time.Second, "how long to listen")
	var api, ingress addrList
	fs.Var(&api, "api-vip", "API VIP (repeat per family)")
	fs.Var(&ingress, "ingress-vip", "ingress VIP (repeat per family)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ifname == "" || *cluster == "" {
		return fmt.Errorf("vrrp-scan needs -interface and -cluster")
	}
	ids, err := vrrp.ClusterIDs(*cluster)
	if err != nil {
		return err
	}
	var ours []vrrp.Instance
	for _, k := range []struct {
		kind string
		id   uint8
		vips []netip.Addr
	}{{"api", ids.API, api}, {"ingress", ids.Ingress, ingress}} {
		for _, v6 := range []bool{false, true} {
			in := vrrp.Instance{Name: fmt.Sprintf("%s_%s_v%d", *cluster, k.kind, map[bool]int{false: 4, true: 6}[v6]), VRID: k.id, V6: v6}
			for _, a := range k.vips {
				if a.Is6() == v6 {
					in.VIPs = append(in.VIPs, a)
				}
			}
			ours = append(ours, in)
		}
	}

	var mu sync.Mutex
	var seen []vrrp.Observation
	l := &vrrp.Listener{Interface: *ifname, Handle: func(o vrrp.Observation) {
		mu.Lock()
		seen = append(seen, o)
		mu.Unlock()
	}}
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	if err := l.Run(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	routers := map[string]bool{}
	for _, o := range seen {
		routers[fmt.Sprintf("router %s vrid %d v%d priority %d addresses %v", o.Source, o.Advert.VRID, o.Advert.Version, o.Advert.Priority, o.Advert.Addresses)] = true
	}
	lines := make([]string, 0, len(routers))
	for r := range routers {
		lines = append(lines, r)
	}
	slices.Sort(lines)
	fmt.Fprintf(out, "%d adverts in %s on %s; cluster %s uses api %d, ingress %d\n", len(seen), *duration, *ifname, *cluster, ids.API, ids.Ingress)
	for _, r := range lines {
		fmt.Fprintln(out, r)
	}
	conflicts := vrrp.Detect(ours, nil, nil, seen)
	for _, c := range conflicts {
		// Without VIPs given, any use of our IDs is a clash worth knowing.
		fmt.Fprintln(out, "CONFLICT", c)
	}
	if len(conflicts) > 0 {
		return fmt.Errorf("%d conflicts: %s", len(conflicts), strings.ToLower(conflicts[0].Kind.String()))
	}
	return nil
}
