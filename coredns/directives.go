package main

import (
	"fmt"
	"slices"
)

// infradnsDirectives are our data plugins, in the order they see a query.
var infradnsDirectives = []string{"apiint", "appswildcard", "lbservices", "mdnsnodes"}

// anchors are the stock directives ours must sit between: after loadbalance
// (it shuffles our answers) and, with it, after acl and rewrite; before
// cache, because our answer costs less than a cache lookup (measured:
// docs/benchmarks.md) and is never stale: a node name asked before it was
// announced must not stay NXDOMAIN in the cache for 30 s; and before
// template, hosts and forward, so a user's own overrides and the upstream
// only see what the cluster zone does not own. cache still serves what
// forward answers.
var (
	after  = "loadbalance"
	before = []string{"cache", "template", "hosts", "forward"}
)

// withInfradns returns the directive list with ours inserted right before the
// first of the 'before' anchors, by name, never by index.
func withInfradns(stock []string) ([]string, error) {
	for _, d := range infradnsDirectives {
		if slices.Contains(stock, d) {
			return nil, fmt.Errorf("directive %q is already registered", d)
		}
	}
	ia := slices.Index(stock, after)
	if ia < 0 {
		return nil, fmt.Errorf("anchor directive %q not found", after)
	}
	at := -1
	for _, b := range before {
		ib := slices.Index(stock, b)
		if ib < 0 {
			return nil, fmt.Errorf("anchor directive %q not found", b)
		}
		if ib < ia {
			return nil, fmt.Errorf("anchor directive %q comes before %q", b, after)
		}
		if at < 0 || ib < at {
			at = ib
		}
	}
	return slices.Concat(stock[:at:at], infradnsDirectives, stock[at:]), nil
}

// companionDirectives serve no DNS (lbconfig writes keepalived and haproxy
// configuration); queries pass them untouched. They go right after
// companionAfter, away from the data plugins whose order matters.
var (
	companionDirectives = []string{"lbconfig", "lbpools"}
	companionAfter      = "ready"
)

// withCompanions returns the directive list with the companion directives
// inserted right after companionAfter, by name.
func withCompanions(stock []string) ([]string, error) {
	for _, d := range companionDirectives {
		if slices.Contains(stock, d) {
			return nil, fmt.Errorf("directive %q is already registered", d)
		}
	}
	i := slices.Index(stock, companionAfter)
	if i < 0 {
		return nil, fmt.Errorf("anchor directive %q not found", companionAfter)
	}
	return slices.Concat(stock[:i+1:i+1], companionDirectives, stock[i+1:]), nil
}
