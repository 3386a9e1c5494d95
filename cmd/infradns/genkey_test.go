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
