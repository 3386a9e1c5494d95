package main

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"

	"github.com/infradns/infradns/internal/cluster"
)

// TestReadme starts every `~~~ corefile` example of every infradns plugin README
// (as CoreDNS's own readme test does for its plugins) and checks the sections.
func TestReadme(t *testing.T) {
	readmes, err := filepath.Glob("../plugin/*/README.md")
	if err != nil || len(readmes) == 0 {
		t.Fatalf("No plugin READMEs found: %v", err)
	}
	// lbconfig's examples make its default track directory (it must exist
	// before keepalived reads its configuration): take it away again
	// when this test made it, so the host keeps nothing.
	if _, err := os.Stat(cluster.DefaultTrackDir); os.IsNotExist(err) {
		t.Cleanup(func() { _ = os.Remove(cluster.DefaultTrackDir) })
	}
	port := dnsserver.Port
	dnsserver.Port = "0"
	defer func() { dnsserver.Port = port }()

	for _, readme := range readmes {
		t.Run(filepath.Base(filepath.Dir(readme)), func(t *testing.T) {
			sections, examples := readReadme(t, readme)
			checkSections(t, sections)
			if len(examples) == 0 {
				t.Fatalf("%s has no corefile example", readme)
			}
			for _, ex := range examples {
				inst, err := caddy.Start(input{ex.body})
				if err != nil {
					t.Errorf("%s:%d: example fails to start: %v", readme, ex.line, err)
					continue
				}
				// Shutdown callbacks stop the plugins' background work
				// (mDNS sockets, Kubernetes watches) as a real shutdown does.
				for _, e := range inst.ShutdownCallbacks() {
					if e != nil {
						t.Errorf("%s:%d: shutdown: %v", readme, ex.line, e)
					}
				}
				inst.Stop()
			}
		})
	}
}

type example struct {
	line int
	body string
}

func readReadme(t *testing.T, path string) (sections []string, examples []example) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var cur *example
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && line == "~~~ corefile":
			cur = &example{line: n}
		case cur != nil && line == "~~~":
			examples = append(examples, *cur)
			cur = nil
		case cur != nil:
			cur.body += line + "\n"
		case strings.HasPrefix(line, "#"):
			sections = append(sections, line)
		}
	}
	return sections, examples
}

// checkSections enforces CoreDNS's README layout.
func checkSections(t *testing.T, sections []string) {
	t.Helper()
	if len(sections) == 0 || !strings.HasPrefix(sections[0], "# ") {
		t.Fatalf("Expected the README to start with '# name', got %v", sections)
	}
	order := []string{"## Name", "## Description", "## Syntax", "## Examples", "## See Also"}
	last := -1
	for _, want := range order {
		i := slices.Index(sections, want)
		if i < 0 {
			t.Errorf("Missing section %q", want)
			continue
		}
		if i < last {
			t.Errorf("Section %q out of order", want)
		}
		last = i
	}
	if slices.Contains(sections, "## Also See") {
		t.Error("Use '## See Also', not '## Also See'")
	}
}
