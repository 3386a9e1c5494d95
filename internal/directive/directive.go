// Package directive holds the Corefile option parsing shared by the infradns
// plugins, so every plugin rejects bad input with the same words and position.
package directive

import (
	"strconv"
	"strings"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"

	"github.com/infradns/infradns/internal/dnsname"

	"github.com/miekg/dns"
)

// DefaultTTL is the TTL of answers when the Corefile does not set one.
const DefaultTTL = 30

// MaxTTL bounds the ttl option, as the kubernetes and k8s_external plugins do.
const MaxTTL = 3600

// TTL parses "ttl SECONDS" after the option name has been read.
func TTL(c *caddy.Controller) (uint32, error) {
	args := c.RemainingArgs()
	if len(args) != 1 {
		return 0, c.ArgErr()
	}
	t, err := strconv.Atoi(args[0])
	if err != nil {
		return 0, c.Errf("ttl must be a whole number of seconds: %q", args[0])
	}
	if t < 0 || t > MaxTTL {
		return 0, c.Errf("ttl must be in range [0, %d]: %d", MaxTTL, t)
	}
	return uint32(t), nil
}

// Zone parses "zone DOMAIN": one host-style domain (see dnsname.CheckDomain), returned
// fully qualified and lower-case, that must lie within the server block's
// zones, or no query would ever reach it.
func Zone(c *caddy.Controller) (string, error) {
	args := c.RemainingArgs()
	if len(args) != 1 {
		return "", c.ArgErr()
	}
	if err := dnsname.CheckDomain(args[0]); err != nil {
		return "", c.Errf("invalid zone %q: %v", args[0], err)
	}
	z := dns.Fqdn(strings.ToLower(args[0]))
	if blocks := ServerZones(c); plugin.Zones(blocks).Matches(z) == "" {
		return "", c.Errf("zone %q is outside the server block's zones %v", args[0], blocks)
	}
	return z, nil
}

// ServerZones returns the server block's zones, normalized.
func ServerZones(c *caddy.Controller) []string {
	return plugin.OriginsFromArgsOrServerBlock(nil, c.ServerBlockKeys)
}

// DefaultZones returns the server block's zones for a plugin whose zone option
// was not given, refusing the root zone: a node resolver's "." block would
// otherwise claim every name on the Internet.
func DefaultZones(c *caddy.Controller, directive string) ([]string, error) {
	zs := ServerZones(c)
	for _, z := range zs {
		if z == "." {
			return nil, c.Errf("%s in a root ('.') server block needs the 'zone DOMAIN' option (the cluster domain)", directive)
		}
	}
	return zs, nil
}
