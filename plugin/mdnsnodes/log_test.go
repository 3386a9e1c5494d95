package mdnsnodes

import clog "github.com/coredns/coredns/plugin/pkg/log"

func init() {
	clog.Discard()
	// The tests start many instances one after another; the spread that
	// keeps a cluster's nodes from listing together only slows them.
	startJitter = 0
}
