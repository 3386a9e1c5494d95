package mdns

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
