package mdns

import (
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheckKeyMode(t *testing.T) {
	tests := []struct {
		mode    fs.FileMode
		warn    bool
		wantErr bool
	}{
		{0o600, false, false},
		{0o640, false, false},
		{0o400, false, false},
		{0o440, false, false},
		{0o644, true, false},
		{0o604, true, false},
		{0o660, false, true},
		{0o602, false, true},
		{0o620, false, true},
		{0o666, false, true},
		{0o777, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.mode.String(), func(t *testing.T) {
			warn, err := checkKeyMode("/etc/infradns/mdns.key", tc.mode)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Error %v, want error %v", err, tc.wantErr)
			}
			if (warn != "") != tc.warn {
				t.Fatalf("Warning %q, want warning %v", warn, tc.warn)
			}
			msg := warn
			if err != nil {
				msg = err.Error()
			}
			// Whoever reads it must learn what to do: owner, group and mode.
			if msg != "" && !strings.Contains(msg, "chown root:65532 /etc/infradns/mdns.key && chmod 0640 /etc/infradns/mdns.key") {
				t.Errorf("Message %q does not say the owner and mode to use", msg)
			}
		})
	}
}

func TestLoadKeyMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mdns.key")
	if err := os.WriteFile(path, []byte("0123456789abcdef-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		mode    fs.FileMode
		warn    bool
		wantErr bool
	}{
		{0o600, false, false},
		{0o644, true, false},
		{0o664, false, true},
		{0o646, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.mode.String(), func(t *testing.T) {
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			var warnings []string
			k, err := LoadKey(path, func(s string) { warnings = append(warnings, s) })
			if (err != nil) != tc.wantErr {
				t.Fatalf("LoadKey: %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && string(k) != "0123456789abcdef-key" {
				t.Errorf("Key %q", k)
			}
			if (len(warnings) > 0) != tc.warn {
				t.Errorf("Warnings %q, want a warning %v", warnings, tc.warn)
			}
		})
	}
	if _, err := LoadKey(filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Error("LoadKey of a missing file: no error")
	}
}

// TestLoadKeys: one key per line, comments and blank lines ignored, the
// last key signs; the file says what is wrong with the line.
func TestLoadKeys(t *testing.T) {
	const old, next = "old-key-0123456789abcdef", "new-key-0123456789abcdef"
	tests := []struct {
		name, text string
		keys       []string // every key, in order; the last signs
		err        string
	}{
		{"one", old + "\n", []string{old}, ""},
		{"echo without newline", "  " + old, []string{old}, ""},
		{"staged: new verifies, old still signs", "# staged 2026-11-24\n" + next + "\n\n" + old + "\n", []string{next, old}, ""},
		{"promoted", old + "\n" + next + "\n", []string{old, next}, ""},
		{"short line", old + "\nshort\n", nil, "key on line 2 of"},
		{"empty", "# nothing\n\n", nil, "no key in"},
		{"too many", strings.Repeat(old+"\n", MaxKeys+1), nil, "at most 4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mdns.key")
			if err := os.WriteFile(path, []byte(tc.text), 0o640); err != nil {
				t.Fatal(err)
			}
			keys, err := LoadKeys(path, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("LoadKeys: %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, k := range keys {
				got = append(got, string(k))
			}
			if strings.Join(got, ",") != strings.Join(tc.keys, ",") {
				t.Errorf("keys %v, want %v", got, tc.keys)
			}
			k, err := LoadKey(path, nil)
			if err != nil || string(k) != tc.keys[len(tc.keys)-1] {
				t.Errorf("signing key %q (%v), want the last, %q", k, err, tc.keys[len(tc.keys)-1])
			}
		})
	}
}

// TestVerifierRotation: while a rotation is under way, announcements signed
// with either key are accepted, and no other.
func TestVerifierRotation(t *testing.T) {
	old, next, other := []byte("old-key-0123456789abcdef"), []byte("new-key-0123456789abcdef"), []byte("not-our-key-0123456789ab")
	v := NewVerifier(next, old)
	now := time.Now()
	for i, tc := range []struct {
		key  []byte
		want error
	}{{old, nil}, {next, nil}, {other, ErrBadSig}} {
		s := Signed{Cluster: "ocp4", Host: "master-0.local.", Addrs: []netip.Addr{netip.MustParseAddr("198.51.100.11")}, TS: now.UnixMilli() + int64(i), Nonce: fmt.Sprint("n", i)}
		fields := map[string]string{txtSig: Sign(tc.key, s), txtTime: fmt.Sprint(s.TS), txtNonce: s.Nonce}
		if err := v.Check(now, s, fields); err != tc.want {
			t.Errorf("signed with key %q: %v, want %v", tc.key, err, tc.want)
		}
	}
}
