package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/infradns/infradns/internal/mdns"
)

// TestGenKeyRotation walks a key file through a rotation: at each step the
// keys every node accepts include the one every other node signs with, so
// nodes that already have the new file and nodes that still have the old one
// accept each other.
func TestGenKeyRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mdns.key")
	run1 := func(args ...string) error {
		return run(t.Context(), append([]string{"gen-key", "-o", path}, args...), &bytes.Buffer{})
	}
	load := func() (all []string, signs string) {
		t.Helper()
		keys, err := mdns.LoadKeys(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			all = append(all, string(k))
		}
		return all, all[len(all)-1]
	}
	if err := run1(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 {
		t.Errorf("mode %04o, want 0640", st.Mode().Perm())
	}
	if os.Geteuid() == 0 && st.Sys().(*syscall.Stat_t).Gid != keyGroup {
		t.Errorf("group %d, want %d (the publisher's)", st.Sys().(*syscall.Stat_t).Gid, keyGroup)
	}
	prev, old := load()
	if len(prev) != 1 || len(old) < mdns.MinKeyLen {
		t.Fatalf("new file: %v", prev)
	}
	if err := run1(); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a second gen-key over the file: %v, want a refusal", err)
	}
	for _, step := range []string{"-stage", "-promote", "-retire"} {
		if err := run1(step); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		all, signs := load()
		prevSigns := prev[len(prev)-1]
		// A node with this file accepts what a node with the previous one
		// signs, and the other way round.
		if !slices.Contains(all, prevSigns) || !slices.Contains(prev, signs) {
			t.Errorf("%s: keys %v (signs %s) and before %v (signed %s): the two cannot talk", step, all, signs, prev, prevSigns)
		}
		prev = all
	}
	if all, signs := load(); len(all) != 1 || signs == old {
		t.Errorf("after the rotation: %v, want one new key", all)
	}
	if err := run1("-promote"); err == nil {
		t.Error("-promote with one key: no error")
	}
	if err := run(t.Context(), []string{"gen-key", "-o", path, "-stage", "-retire"}, &bytes.Buffer{}); err == nil {
		t.Error("two steps at once: no error")
	}
}

// TestGenKeyStepsIdempotent: each rotation step run a second time (a
// retried script, a second operator) leaves the file as it is. -promote run
// twice used to swap the keys back: the old key signed again, and nodes
// that had the retired file (the new key alone) refused every node signing
// with it.
func TestGenKeyStepsIdempotent(t *testing.T) {
	const oldKey, newKey = "old-key-0123456789abcdef", "new-key-0123456789abcdef"
	steps := []string{"-stage", "-promote", "-retire"}
	for i, step := range steps {
		t.Run(step+" twice", func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mdns.key")
			gen := func(args ...string) error {
				return run(t.Context(), append([]string{"gen-key", "-o", path}, args...), &bytes.Buffer{})
			}
			if err := gen(); err != nil {
				t.Fatal(err)
			}
			for _, s := range steps[:i+1] {
				if err := gen(s); err != nil {
					t.Fatalf("%s: %v", s, err)
				}
			}
			once, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := gen(step); err != nil {
				t.Fatalf("%s again: %v", step, err)
			}
			twice, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(once, twice) {
				t.Errorf("%s again changed the file:\n%s\nto:\n%s", step, once, twice)
			}
		})
	}

	// The old key never signs again once the new one has, however often a
	// step is repeated; a file staged by an older gen-key (no mark) is
	// promoted as the guide orders it, new key first.
	for _, tc := range []struct {
		name  string
		file  string // "" : written by gen-key -o, then -stage
		steps []string
		signs string // "new", "old": which key signs at the end
		keys  int
	}{
		{name: "stage, promote twice, retire twice", steps: []string{"-promote", "-promote", "-retire", "-retire"}, signs: "new", keys: 1},
		{name: "stage twice, promote twice", steps: []string{"-stage", "-promote", "-promote"}, signs: "new", keys: 2},
		{name: "staged by an older gen-key, promoted twice", file: newKey + "\n" + oldKey + "\n", steps: []string{"-promote", "-promote"}, signs: "new", keys: 2},
		{name: "retire before promote calls the rotation off", steps: []string{"-retire", "-retire"}, signs: "old", keys: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mdns.key")
			gen := func(args ...string) error {
				return run(t.Context(), append([]string{"gen-key", "-o", path}, args...), &bytes.Buffer{})
			}
			var old string
			if tc.file != "" {
				if err := os.WriteFile(path, []byte(tc.file), 0o640); err != nil {
					t.Fatal(err)
				}
				old = oldKey
			} else {
				if err := gen(); err != nil {
					t.Fatal(err)
				}
				k, err := mdns.LoadKey(path, nil)
				if err != nil {
					t.Fatal(err)
				}
				old = string(k)
				if err := gen("-stage"); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range tc.steps {
				if err := gen(s); err != nil {
					t.Fatalf("%s: %v", s, err)
				}
			}
			keys, err := mdns.LoadKeys(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			signsOld := string(keys[len(keys)-1]) == old
			if len(keys) != tc.keys || signsOld != (tc.signs == "old") {
				t.Errorf("%d keys, the old one signs: %v; want %d keys, %s signing", len(keys), signsOld, tc.keys, tc.signs)
			}
		})
	}
}
