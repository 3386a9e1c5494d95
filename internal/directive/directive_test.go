package directive

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/caddy/caddyfile"
)

func TestZone(t *testing.T) {
	tests := []struct {
		keys    []string
		input   string
		want    string
		errText string
	}{
		{keys: []string{"."}, input: "x {\n zone OCP4.example.com\n}", want: "ocp4.example.com."},
		{keys: []string{"example.com."}, input: "x {\n zone ocp4.example.com.\n}", want: "ocp4.example.com."},
		{keys: []string{"example.com."}, input: "x {\n zone example.com\n}", want: "example.com."},

		{keys: []string{"."}, input: "x {\n zone $(id).example.com\n}", errText: `Testfile:2 - Error during parsing: invalid zone "$(id).example.com": label "$(id)" has '$'`},
		{keys: []string{"."}, input: "x {\n zone .\n}", errText: `invalid zone ".": no labels`},
		{keys: []string{"."}, input: "x {\n zone 10.0.0.0/8\n}", errText: `invalid zone "10.0.0.0/8"`},
		{keys: []string{"example.org."}, input: "x {\n zone ocp4.example.com\n}", errText: "outside the server block's zones [example.org.]"},
		{keys: []string{"."}, input: "x {\n zone\n}", errText: "Wrong argument count"},
	}
	for _, tc := range tests {
		c := caddy.NewTestController("dns", tc.input)
		c.ServerBlockKeys = tc.keys
		c.Next()
		c.NextBlock()
		got, err := Zone(c)
		if tc.errText == "" {
			if err != nil || got != tc.want {
				t.Errorf("%q: got %q, %v; want %q", tc.input, got, err, tc.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.errText) {
			t.Errorf("%q: got %q, %v; want an error containing %q", tc.input, got, err, tc.errText)
		}
	}
}

// parseBlocks runs a plugin-shaped parse loop over input: one Once per block,
// every option checked. It returns the first error.
func parseBlocks(input string) error {
	return parseController(caddy.NewTestController("dns", input))
}

func parseController(c *caddy.Controller) error {
	for c.Next() {
		c.RemainingArgs()
		var once Once
		for c.NextBlock() {
			if err := once.Use(c); err != nil {
				return err
			}
			c.RemainingArgs()
		}
	}
	return nil
}

func TestOnce(t *testing.T) {
	tests := []struct {
		name  string
		input string
		err   string // the whole error, "" for none
	}{
		{name: "each option once", input: "x {\n zone a.example.com\n ttl 5\n fallthrough\n}"},
		{name: "same option in two blocks", input: "x {\n zone a.example.com\n}\nx {\n zone b.example.com\n}"},
		{name: "repeated", input: "x {\n zone a.example.com\n ttl 5\n zone b.example.com\n}",
			err: "Testfile:4 - Error during parsing: zone: used more than once (first on line 2)"},
		{name: "repeated without arguments", input: "x {\n\n fallthrough\n fallthrough\n}",
			err: "Testfile:4 - Error during parsing: fallthrough: used more than once (first on line 3)"},
		{name: "repeated with other arguments", input: "x {\n fallthrough a.example.com\n ttl 5\n\n fallthrough b.example.com\n}",
			err: "Testfile:5 - Error during parsing: fallthrough: used more than once (first on line 2)"},
		{name: "third use reports the first", input: "x {\n ttl 1\n}\nx {\n ttl 1\n zone a.example.com\n ttl 2\n ttl 3\n}",
			err: "Testfile:7 - Error during parsing: ttl: used more than once (first on line 5)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := parseBlocks(tc.input)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("Unexpected error: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.err {
				t.Fatalf("Error %v, want %q", err, tc.err)
			}
		})
	}
}

// An option first given in an imported file is reported with that file's name.
func TestOnceAcrossImport(t *testing.T) {
	dir := t.TempDir()
	snippet := filepath.Join(dir, "zone.conf")
	if err := os.WriteFile(snippet, []byte("\n zone a.example.com\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	corefile := filepath.Join(dir, "Corefile")
	body := ". {\n x {\n  import " + snippet + "\n  zone b.example.com\n }\n}\n"
	blocks, err := caddyfile.Parse(corefile, strings.NewReader(body), []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	c := caddy.NewTestController("dns", "")
	c.Dispenser = caddyfile.NewDispenserTokens(corefile, blocks[0].Tokens["x"])
	want := corefile + ":4 - Error during parsing: zone: used more than once (first on " + snippet + ":2)"
	if err := parseController(c); err == nil || err.Error() != want {
		t.Fatalf("Error %v, want %q", err, want)
	}
}
