package lbconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coredns/caddy"
)

// TestBGPPasswordFile: a peer's TCP MD5 password comes from a root-only
// file, read at setup; the Corefile holds its path, never the password.
// Every file the peers could not use is refused with the file and line of
// the option and the reason, never the password: before, U+00A0, \v and \f
// passed render-node inline and broke this parse (a crash loop).
func TestBGPPasswordFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, perm os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, perm); err != nil {
			t.Fatal(err)
		}
		return p
	}
	block := func(peer string) string {
		return "lbconfig {\n    cluster ocp4\n    api-vip 192.0.2.5\n    haproxy /etc/haproxy/haproxy.cfg\n    vip-mode bgp\n    bgp-asn 64513\n    " +
			peer + "\n}"
	}
	good := write("tor.password", "S3cr#t{x}\n", 0o600)
	l, err := parse(caddy.NewTestController("dns", block("bgp-peer 192.0.2.1 64512 password-file "+good+" bfd off")))
	if err != nil {
		t.Fatal(err)
	}
	if p := l.model.Spec().BGP.Peers[0]; p.Password != "S3cr#t{x}" || p.PasswordFile != good || !p.BFD.Off {
		t.Errorf("peer = %+v", p)
	}

	const at = "Testfile:7 - Error during parsing: bgp-peer 192.0.2.1: "
	for _, tc := range []struct {
		name, peer, want string
	}{
		{"inline", "bgp-peer 192.0.2.1 64512 password S3cr3t", at + "an inline password is refused: a Corefile is readable by everyone who reads the configuration; put the password in a file only root can read (0600) and give password-file PATH"},
		{"no-break space", "bgp-peer 192.0.2.1 64512 password-file " + write("nbsp", "S3\u00a0cr3t\n", 0o600), at + "password-file: " + dir + "/nbsp: the password holds a space (U+00A0) at byte 2: use visible characters only"},
		{"vertical tab", "bgp-peer 192.0.2.1 64512 password-file " + write("vt", "S3\vcr3t", 0o600), at + "password-file: " + dir + "/vt: the password holds a space (U+000B) at byte 2: use visible characters only"},
		{"form feed", "bgp-peer 192.0.2.1 64512 password-file " + write("ff", "S3\fcr3t", 0o600), at + "password-file: " + dir + "/ff: the password holds a space (U+000C) at byte 2: use visible characters only"},
		{"trailing space", "bgp-peer 192.0.2.1 64512 password-file " + write("trailing", "S3cr3t \n", 0o600), at + "password-file: " + dir + "/trailing: the password holds a space (U+0020) at byte 6: use visible characters only"},
		{"zero-width space", "bgp-peer 192.0.2.1 64512 password-file " + write("zwsp", "S3\u200bcr3t", 0o600), at + "password-file: " + dir + "/zwsp: the password holds an invisible or control character (U+200B) at byte 2: use visible characters only"},
		{"two lines", "bgp-peer 192.0.2.1 64512 password-file " + write("lines", "S3cr3t\nS3cr3t\n", 0o600), at + "password-file: " + dir + "/lines: the password file holds more than one line"},
		{"empty", "bgp-peer 192.0.2.1 64512 password-file " + write("empty", "", 0o600), at + "password-file: " + dir + "/empty: the password is empty"},
		{"too long", "bgp-peer 192.0.2.1 64512 password-file " + write("long", strings.Repeat("S", 81)+"\n", 0o600), at + "password-file: " + dir + "/long: the password is 81 bytes: a TCP MD5 password is at most 80"},
		{"world-readable", "bgp-peer 192.0.2.1 64512 password-file " + write("world", "S3cr3t\n", 0o644), at + "password-file: " + dir + "/world is open to group or others (0644): it holds a secret: chmod 0600 " + dir + "/world (and change the secret if others could read it)"},
		{"missing", "bgp-peer 192.0.2.1 64512 password-file " + dir + "/missing", at + "password-file: open " + dir + "/missing: no such file or directory"},
		{"relative", "bgp-peer 192.0.2.1 64512 password-file tor.password", at + "password-file: \"tor.password\" must be a clean absolute path of letters, digits and ._/+@-"},
		{"no path", "bgp-peer 192.0.2.1 64512 password-file", at + "password-file needs a value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(caddy.NewTestController("dns", block(tc.peer)))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err =\n  %v\nwant\n  %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "cr3t") {
				t.Errorf("the error quotes the password: %v", err)
			}
		})
	}
}
