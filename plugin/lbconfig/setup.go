package lbconfig

import (
	"errors"
	"fmt"
	"strings"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/directive"
	"github.com/infradns/infradns/internal/lb"
)

const pluginName = "lbconfig"

var log = clog.NewWithPlugin(pluginName)

func init() { plugin.Register(pluginName, setup) }

func setup(c *caddy.Controller) error {
	l, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	// It acts only once caddy adopts this instance, and a failed reload's
	// instance is stopped, though caddy runs no OnShutdown for it
	// (lifecycle.go).
	l.inCaddy = true
	c.Set(instanceKey{}, l)
	registerAdoptHook()
	c.OnStartup(func() error {
		if err := l.Start(); err != nil {
			return plugin.Error(pluginName, err)
		}
		return nil
	})
	c.OnRestartFailed(func() error {
		discardNewer(l)
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

// usedIn is the instance storage key that remembers the server block
// lbconfig was set up in: one per Corefile, since two would write and
// reload the same keepalived and haproxy.
type usedIn struct{}

type blockPos struct {
	index int
	file  string
	line  int
}

// parsing is one lbconfig block being read: the Spec it fills and where
// each option was given, for errors found after the block.
type parsing struct {
	c    *caddy.Controller
	l    *LBConfig
	spec cluster.Spec
	once directive.Once // first line per option (perArg ones per first argument)
	line int            // the directive's own line
	opt  string         // the option being read: shared parsers name it in errors
	// given is the line each option was last given on, by name alone: an
	// error from the model about bgp-peers is about the peers together,
	// and once has them only per address.
	given map[string]int
}

func parse(c *caddy.Controller) (*LBConfig, error) {
	p := &parsing{c: c, l: New(), given: map[string]int{}}
	uses := 0
	for c.Next() {
		if uses++; uses > 1 {
			return nil, c.Errf("%s: used more than once in this server block (first on line %d)", pluginName, p.line)
		}
		p.line = c.Line()
		if prev, ok := c.Get(usedIn{}).(blockPos); ok && prev.index != c.ServerBlockIndex {
			return nil, c.Errf("%s: already used in another server block (%s:%d); one lbconfig per Corefile, as the files it writes are per node", pluginName, prev.file, prev.line)
		}
		c.Set(usedIn{}, blockPos{index: c.ServerBlockIndex, file: c.File(), line: c.Line()})
		if len(c.RemainingArgs()) != 0 {
			return nil, c.ArgErr()
		}
		for c.NextBlock() {
			if err := p.option(); err != nil {
				return nil, err
			}
		}
	}
	return p.finish()
}

// finish runs the checks that span options, then the cluster model's.
func (p *parsing) finish() (*LBConfig, error) {
	l, s := p.l, p.spec
	switch {
	case s.Name == "":
		return nil, p.errAt(p.line, "the 'cluster NAME' option is required")
	case len(s.APIVIPs) == 0:
		return nil, p.errAt(p.line, "the 'api-vip ADDRESS...' option is required")
	case s.Mode == cluster.ModeBGP && l.outputs[lb.Keepalived].path != "":
		return nil, p.errAt(p.once.Line("keepalived"), "vip-mode bgp announces the VIPs over BGP; keepalived would hold them with VRRP: a VIP is one or the other (drop 'keepalived' or 'vip-mode bgp')")
	case s.Mode != cluster.ModeBGP && l.outputs[lb.Keepalived].path == "" && l.outputs[lb.HAProxyCfg].path == "":
		return nil, p.errAt(p.line, "at least one of 'keepalived OUTPUT' and 'haproxy OUTPUT' is required")
	}
	for _, o := range options {
		if line := p.given[o.name]; o.bgpOnly && line != 0 && s.Mode != cluster.ModeBGP {
			return nil, p.errAt(line, "%s is a setting of vip-mode bgp, and this block has no 'vip-mode bgp'", o.name)
		}
	}
	if l.servicesHealth != "" && l.services == nil {
		return nil, p.errAt(p.once.Line("health-check services"), "health-check services gates the Services' addresses, and this block has no 'services'")
	}
	if line := p.given["services"]; line != 0 && l.kubeconfig == "" {
		return nil, p.errAt(line, "services needs 'kubeconfig PATH': the Services and their endpoints come from the API")
	}
	ka, ha := l.outputs[lb.Keepalived], l.outputs[lb.HAProxyCfg]
	if ka.path != "" && ka.path == ha.path {
		return nil, p.errAt(p.once.Line("haproxy"), "keepalived and haproxy both write %s", ka.path)
	}
	if l.reload[lb.Keepalived].method == "pidfile" && l.reload[lb.Keepalived].path == l.reload[lb.HAProxyCfg].path {
		return nil, p.errAt(p.once.Line("reload haproxy"), "keepalived and haproxy are both reloaded through %s", l.reload[lb.Keepalived].path)
	}
	m, err := cluster.New(s)
	if err != nil {
		var e *cluster.Error
		if !errors.As(err, &e) {
			return nil, p.errAt(p.line, "%v", err)
		}
		// Point at the option given last of those at fault: the one that
		// broke a rule the others had kept.
		opts := make([]string, len(e.Keys))
		line := 0
		for i, k := range e.Keys {
			opts[i] = optionOf(k)
			line = max(line, p.given[opts[i]])
		}
		if line == 0 { // defaults broke the rule: point at the block
			line = p.line
		}
		return nil, p.errAt(line, "%s: %s", strings.Join(opts, ", "), e.Msg)
	}
	l.model = m
	return l, nil
}

// errAt is caddy's error format (FILE:LINE - Error during parsing: ...)
// for a line other than the current token's.
func (p *parsing) errAt(line int, format string, a ...any) error {
	return fmt.Errorf("%s:%d - Error during parsing: %s", p.c.File(), line, fmt.Sprintf(format, a...))
}
