package main

import (
	"slices"
	"testing"

	"github.com/coredns/coredns/core/dnsserver"
)

func TestDirectiveOrder(t *testing.T) {
	d := dnsserver.Directives
	pos := func(name string) int {
		t.Helper()
		i := slices.Index(d, name)
		if i < 0 {
			t.Fatalf("Directive %q missing from %v", name, d)
		}
		if slices.Index(d[i+1:], name) >= 0 {
			t.Fatalf("Directive %q appears twice", name)
		}
		return i
	}
	prev := pos(after)
	for _, ours := range infradnsDirectives {
		i := pos(ours)
		if i <= prev {
			t.Errorf("Directive %q at %d must come after %q at %d", ours, i, d[prev], prev)
		}
		prev = i
	}
	for _, b := range before {
		if i := pos(b); i <= prev {
			t.Errorf("Directive %q at %d must come after ours (last at %d)", b, i, prev)
		}
	}
}

func TestWithInfradnsErrors(t *testing.T) {
	tests := []struct {
		name  string
		stock []string
	}{
		{"no loadbalance", []string{"errors", "cache", "template", "hosts", "forward"}},
		{"no cache", []string{"loadbalance", "template", "hosts", "forward"}},
		{"no forward", []string{"loadbalance", "cache", "template", "hosts"}},
		{"anchor before loadbalance", []string{"cache", "loadbalance", "template", "hosts", "forward"}},
		{"already registered", []string{"loadbalance", "apiint", "cache", "template", "hosts", "forward"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := withInfradns(tc.stock); err == nil {
				t.Fatalf("Expected an error, got %v", got)
			}
		})
	}
	got, err := withInfradns([]string{"log", "loadbalance", "acl", "cache", "minimal", "template", "hosts", "forward"})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Concat([]string{"log", "loadbalance", "acl"}, infradnsDirectives, []string{"cache", "minimal", "template", "hosts", "forward"})
	if !slices.Equal(got, want) {
		t.Errorf("Expected %v, got %v", want, got)
	}
}
