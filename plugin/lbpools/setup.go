package lbpools

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/directive"
	"github.com/infradns/infradns/internal/kube"
)

const pluginName = "lbpools"

var log = clog.NewWithPlugin(pluginName)

func init() { plugin.Register(pluginName, setup) }

// Defaults: the namespace deploy/rbac.yaml creates for infradns' own
// objects.
const (
	defaultPools         = "infradns/" + kube.PoolsConfigMap
	defaultLease         = "infradns/" + kube.AllocatorLease
	defaultLeaseDuration = 15 * time.Second
)

func setup(c *caddy.Controller) error {
	l, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	c.OnStartup(func() error {
		l.Start()
		return nil
	})
	c.OnShutdown(func() error {
		l.Stop()
		return nil
	})
	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		l.Next = next
		return l
	})
	return nil
}

func parse(c *caddy.Controller) (*LBPools, error) {
	l := &LBPools{class: kube.DefaultClass, leaseDuration: defaultLeaseDuration, retry: time.Second, debounce: 20 * time.Millisecond}
	pools, lease := defaultPools, defaultLease
	uses := 0
	for c.Next() {
		if uses++; uses > 1 {
			return nil, c.Err(plugin.ErrOnce.Error())
		}
		if len(c.RemainingArgs()) != 0 {
			return nil, c.ArgErr()
		}
		var once directive.Once
		for c.NextBlock() {
			if err := once.Use(c); err != nil {
				return nil, err
			}
			opt := c.Val()
			args := c.RemainingArgs()
			switch {
			case opt == "default":
				if len(args) != 0 {
					return nil, c.ArgErr()
				}
				l.isDefault = true
				continue
			case opt == "announce":
				if len(args) != 0 {
					return nil, c.ArgErr()
				}
				l.announce = true
				continue
			case opt == "lease" && len(args) == 2:
				d, err := time.ParseDuration(args[1])
				if err != nil || d < 3*time.Second || d > 5*time.Minute {
					return nil, c.Errf("lease duration %q: want a duration from 3s to 5m, e.g. 15s", args[1])
				}
				l.leaseDuration, args = d, args[:1]
			}
			if len(args) != 1 {
				return nil, c.ArgErr()
			}
			switch opt {
			case "kubeconfig":
				l.kubeconfig = args[0]
			case "pools":
				if err := cluster.CheckNamespacedName(args[0]); err != nil {
					return nil, c.Errf("pools: %v; want the ConfigMap as NAMESPACE/NAME", err)
				}
				pools = args[0]
			case "lease":
				if err := cluster.CheckNamespacedName(args[0]); err != nil {
					return nil, c.Errf("lease: %v; want the Lease as NAMESPACE/NAME [DURATION]", err)
				}
				lease = args[0]
			case "class":
				if err := checkClass(args[0]); err != nil {
					return nil, c.Errf("class: %v", err)
				}
				l.class = args[0]
			case "identity":
				if err := cluster.CheckNodeName(args[0]); err != nil {
					return nil, c.Errf("identity: %v", err)
				}
				l.identity = args[0]
			default:
				return nil, c.Errf("unknown property '%s'", opt)
			}
		}
		if l.kubeconfig == "" {
			return nil, c.Err("the 'kubeconfig FILE' option is required: the pools and the Services are read, and the addresses written, through the Kubernetes API")
		}
	}
	l.poolsNS, l.poolsName, _ = strings.Cut(pools, "/")
	l.leaseNS, l.leaseName, _ = strings.Cut(lease, "/")
	if l.identity == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("identity: no host name (%v): set 'identity NAME'", err)
		}
		// HOST_SUFFIX, as Kubernetes' own leader election names its
		// candidates: two instances on hosts of one name (or two Corefiles
		// on one host) would otherwise both take the Lease for theirs and
		// both write. render-node sets the node name, unique in a cluster.
		l.identity = fmt.Sprintf("%s_%08x", strings.ToLower(h), rand.Uint32())
	}
	return l, nil
}

// checkClass accepts a loadBalancerClass as the API does: a label-style
// key with a prefix, PREFIX/NAME.
func checkClass(s string) error {
	prefix, name, ok := strings.Cut(s, "/")
	if !ok || prefix == "" || name == "" || len(name) > 63 || cluster.CheckNodeName(prefix) != nil || strings.ContainsAny(name, "/ ") {
		return fmt.Errorf("%q is not a load-balancer class: want DOMAIN/NAME, e.g. %s", s, kube.DefaultClass)
	}
	return nil
}
