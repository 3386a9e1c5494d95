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
		{"no cache", []string{"errors", "template", "hosts", "forward"}},
		{"no forward", []string{"cache", "template", "hosts"}},
		{"anchor before cache", []string{"template", "cache", "hosts", "forward"}},
		{"already registered", []string{"cache", "apiint", "template", "hosts", "forward"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := withInfradns(tc.stock); err == nil {
				t.Fatalf("Expected an error, got %v", got)
			}
		})
	}
	got, err := withInfradns([]string{"log", "cache", "minimal", "template", "hosts", "forward"})
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Concat([]string{"log", "cache", "minimal"}, infradnsDirectives, []string{"template", "hosts", "forward"})
	if !slices.Equal(got, want) {
		t.Errorf("Expected %v, got %v", want, got)
	}
}
