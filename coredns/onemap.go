//go:build benchmap

package main

import (
	// pprof lets a benchmark profile the server (pprof localhost:PORT in a
	// Corefile); onemap is the benchmark's ceiling plugin. Only
	// bin/coredns-bench (make bench) has them.
	_ "github.com/coredns/coredns/plugin/pprof"

	_ "github.com/infradns/infradns/test/bench/onemap"
)

// A package-level initializer, not init(): it runs before every init(), after
// infradnsDirectives itself, so main's init() inserts onemap with ours.
var _ = func() bool {
	infradnsDirectives = append(infradnsDirectives, "onemap")
	return true
}()
