// Command infradns is the operator's tool for the infradns stack:
//
//	infradns install -f FILE              a node, in one command: render-node, resolver, sysctls, doctor
//	infradns render-node -f FILE -o DIR   a node's static pods, Corefile and resolver wiring
//	infradns render -f FILE               keepalived/haproxy configuration without an API
//	infradns vr-ids CLUSTER | -f FILE     the VRRP router IDs of a cluster
//	infradns vrrp-scan -interface IF ...  who else speaks VRRP on a link, and clashes with us
//	infradns status [-f FILE]             who holds each VIP, from the status Leases
//	infradns doctor -f FILE               on a node: kubeconfig, RBAC, key, resolver, answers
//	infradns identities -f FILE           the plugins' API identities, from a control-plane node
//	infradns uninstall -f FILE -o DIR     remove what render-node wrote
//	infradns gen-key -o FILE              the mDNS key file and its rotation steps
//	infradns version                      the version
//
// Every subcommand that takes a cluster file reads the same one
// (deploy/cluster.example.yaml) and checks it with the same rules as
// lbconfig's Corefile options (internal/cluster).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// version is set by the Makefile from git describe.
var version = "dev"

const usage = `usage: infradns COMMAND [flags]   (infradns COMMAND -h: its flags)

  install -f CLUSTER.yaml [-role ROLE] [-node NAME] [-root /] [-dry-run]
        a node in one command, safe to run again: render-node's files, the
        resolver wiring for this host (NetworkManager or systemd-resolved,
        kubelet's resolvConf included), the sysctls, the mDNS key's mode,
        then doctor; uninstall undoes it
  render-node -f CLUSTER.yaml -o ROOT [-role ROLE] [-node NAME] [-dry-run]
        a node's static pods, Corefile and resolver wiring, checked and
        written atomically under ROOT (/ on the node: its interface and
        subnets are checked too); safe to run again
  render -f CLUSTER.yaml [-role ROLE] [-node NAME] [-node-ip ADDR]... [-keepalived FILE|-] [-haproxy FILE|-] [-validate]
        the keepalived and haproxy configuration a control-plane or
        bootstrap node starts with, before the API lists anything (its
        VRRP priority from its address's rank among apiServers)
  (-role: control-plane, worker or bootstrap; master is control-plane)
  vr-ids CLUSTER [-ingress-vips N] | vr-ids -f CLUSTER.yaml
        the VRRP router IDs of a cluster (OpenShift's for api and ingress)
  vrrp-scan -interface IF (-f CLUSTER.yaml | -cluster NAME [-api-vip ADDR]... [-ingress-vip ADDR]...) [-duration 3s]
        listen for VRRP adverts and report clashes with the cluster's IDs and VIPs
  status [-kubeconfig PATH] [-n NAMESPACE] [-f CLUSTER.yaml | -cluster NAME] [-nodes] [-o table|json|yaml]
        who holds each VIP, since when, and whether its holder still renews
        (the status Leases; STALE: it stopped)
  doctor -f CLUSTER.yaml [-role ROLE] [-node NAME] [-root /] [-server ADDR:PORT] [-scan 3s]
        on a node: the kubeconfig (reachable, certificate, RBAC), the mDNS key,
        the resolver wiring, CoreDNS's answers, VRRP ID clashes; PASS/WARN/FAIL
  identities -f CLUSTER.yaml [-kubeconfig /etc/kubernetes/admin.conf] [-dry-run]
        on a control-plane node: deploy/rbac.yaml applied (the ingress
        namespace put in), the three identities issued by the cluster's CA
        (a year; renewed within 30 days of the end), the workers' and the
        DNS pods' published for install to fetch, this node's kubeconfigs
  uninstall -f CLUSTER.yaml -o ROOT [-dry-run]
        remove what render-node and install wrote (static pods first), put
        back what install changed (kubelet's flag, sysctls, units) and take
        the node out of resolv.conf; the mDNS key and the kubeconfig stay
  gen-key -o FILE [-stage | -promote | -retire]
        the mDNS key file (root:65532, 0640) and the three steps of a
        rotation that loses no name (every key verifies, the last signs)
  version (also -version, --version)
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

// commands are the subcommands, each with its own flags.
var commands = map[string]func(ctx context.Context, args []string, out io.Writer) error{
	"install":     install,
	"render-node": renderNode,
	"render":      render,
	"vr-ids":      vrIDs,
	"vrrp-scan":   scan,
	"status":      status,
	"gen-key":     genKey,
	"doctor":      doctor,
	"identities":  identities,
	"uninstall":   uninstall,
	"version":     printVersion,
}

// printVersion is `infradns version`: a subcommand like the others, so -h
// prints its usage and an unknown flag or an argument is refused rather
// than answered with the version.
func printVersion(_ context.Context, args []string, out io.Writer) error {
	fs := flags("version", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("version takes no argument, got %q", fs.Arg(0))
	}
	_, err := fmt.Fprintln(out, version)
	return err
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		_, err := fmt.Fprint(out, usage)
		return err
	case "-version", "--version":
		args[0] = "version" // as mdns-publisher -version
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
	err := cmd(ctx, args[1:], out)
	if errors.Is(err, flag.ErrHelp) {
		return nil // -h: the flags were printed
	}
	return err
}

// flags is a subcommand's flag set: its errors and -h go to stderr, and
// the caller reports a bad flag once.
func flags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), strings.TrimSpace("usage: infradns "+name+" "+synopsis))
		fs.PrintDefaults()
	}
	return fs
}
