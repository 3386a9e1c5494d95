package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/nodecfg"
	"github.com/infradns/infradns/internal/vrrp"
)

// readClusterFile reads and parses the cluster file; its errors name the
// file and line.
func readClusterFile(path string) (nodecfg.File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nodecfg.File{}, err
	}
	return nodecfg.Parse(path, b)
}

// nodeFlags registers -f, -role and -node on fs; the returned func reads
// the cluster file with the overrides applied, once fs is parsed.
func nodeFlags(fs *flag.FlagSet, roles string) func() (nodecfg.File, error) {
	file := fs.String("f", "", "cluster file (YAML)")
	role := fs.String("role", "", "this node's role, overriding the file's ("+roles+"; master is control-plane)")
	node := fs.String("node", "", "this node's Node name, overriding the file's (default: the host name)")
	return func() (nodecfg.File, error) {
		if *file == "" {
			return nodecfg.File{}, errors.New("-f FILE is required")
		}
		f, err := readClusterFile(*file)
		if err != nil {
			return f, err
		}
		if *role != "" {
			f.Role = roleFlag(*role)
		}
		if *node != "" {
			f.Node = *node
		}
		return f, nil
	}
}

// roleFlag is the role -role names: master, OpenShift's word (its pool
// and node label), is the control-plane role.
func roleFlag(r string) string {
	if r == "master" {
		return nodecfg.ControlPlane
	}
	return r
}

// readModel reads a cluster file's cluster model.
func readModel(path string) (*cluster.Model, error) {
	f, err := readClusterFile(path)
	if err != nil {
		return nil, err
	}
	return f.Model()
}

// parseInterspersed parses flags that may come after the positional
// arguments (vr-ids ocp4 -ingress-vips 3), which flag.Parse stops at.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// nodeInterfaces reads this host's interfaces and their addresses, for
// the checks of what is rendered for it (nodecfg.File.CheckLink). A
// variable: tests stand in another host.
var nodeInterfaces = func() (map[string][]netip.Prefix, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	out := map[string][]netip.Prefix{}
	for _, ifi := range ifs {
		addrs, err := ifi.Addrs()
		if err != nil {
			return nil, fmt.Errorf("interface %s: %w", ifi.Name, err)
		}
		out[ifi.Name] = vrrp.Prefixes(addrs)
	}
	return out, nil
}

// checkLocalLink checks the file against this host's interfaces.
func checkLocalLink(f nodecfg.File) error {
	ifaces, err := nodeInterfaces()
	if err != nil {
		return err
	}
	return f.CheckLink(ifaces)
}
