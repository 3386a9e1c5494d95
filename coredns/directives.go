package main

import (
	"fmt"
	"slices"
)

// infradnsDirectives are our data plugins, in the order they see a query.
var infradnsDirectives = []string{"apiint", "appswildcard"}

// anchors are the stock directives ours must sit between: after cache, so our
// answers are cached; before template, hosts and forward, so a user's own
// overrides and the upstream only see what the cluster zone does not own.
var (
	after  = "cache"
	before = []string{"template", "hosts", "forward"}
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
