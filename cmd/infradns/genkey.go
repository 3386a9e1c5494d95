package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/infradns/infradns/internal/atomicfile"
	"github.com/infradns/infradns/internal/mdns"
)

// keyGroup is the publisher's gid (deploy/static-pods/mdns-publisher.yaml.tmpl):
// the key file is root:65532 0640 (mdns.KeyOwnership).
const keyGroup = 65532

// genKey writes the mDNS key file and steps a rotation through it. Every
// key of the file verifies and the last signs (mdns.LoadKeys), so a rotation
// without a name lost is three files, each on every node before the next:
// -stage (new key first: verified, not used), -promote (new key last: it
// signs, the old one still verifies), -retire (the new key alone).
func genKey(_ context.Context, args []string, out io.Writer) error {
	fs := flags("gen-key", "-o FILE [-stage | -promote | -retire]")
	path := fs.String("o", "", "the key file (on a node: /etc/infradns/mdns.key, the cluster file's mdnsKey)")
	stage := fs.Bool("stage", false, "add a new key before the current one: every node accepts it, none signs with it yet")
	promote := fs.Bool("promote", false, "the staged key signs from now on (moved last); the old one still verifies")
	retire := fs.Bool("retire", false, "keep only the key that signs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	n := 0
	for _, b := range []bool{*stage, *promote, *retire} {
		if b {
			n++
		}
	}
	if *path == "" || fs.NArg() > 0 || n > 1 {
		fs.Usage()
		return errors.New("gen-key needs -o FILE and at most one of -stage, -promote, -retire")
	}
	var keys []string
	if n > 0 {
		k, err := mdns.LoadKeys(*path, nil)
		if err != nil {
			return fmt.Errorf("gen-key: %w", err)
		}
		for _, x := range k {
			keys = append(keys, string(x))
		}
	} else if _, err := os.Stat(*path); err == nil {
		return fmt.Errorf("gen-key: %s exists: rotate it with -stage, -promote and -retire", *path)
	}
	switch {
	case *stage:
		if len(keys) != 1 {
			return fmt.Errorf("gen-key -stage: %s holds %d keys, want 1 (a rotation is under way: -promote or -retire)", *path, len(keys))
		}
		k, err := newKey()
		if err != nil {
			return err
		}
		keys = []string{k, keys[0]}
	case *promote:
		if len(keys) != 2 {
			return fmt.Errorf("gen-key -promote: %s holds %d keys, want 2 (the staged one first)", *path, len(keys))
		}
		keys = []string{keys[1], keys[0]}
	case *retire:
		keys = keys[len(keys)-1:]
	default:
		k, err := newKey()
		if err != nil {
			return err
		}
		keys = []string{k}
	}
	if _, err := atomicfile.WriteIfChanged(*path, []byte(strings.Join(keys, "\n")+"\n"), 0o640); err != nil {
		return fmt.Errorf("gen-key: %w", err)
	}
	if err := ownKey(*path); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "%s: %d key(s), the last signs; copy it to every node's mdnsKey path (root:%d, 0640) and restart the publisher and CoreDNS pods there\n", *path, len(keys), keyGroup)
	return err
}

// newKey is 32 random bytes, base64url: 43 characters of one line.
func newKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// ownKey gives the file the owner and mode the publisher (uid and gid
// 65532) and CoreDNS need; only root may give it the group.
func ownKey(path string) error {
	if err := os.Chmod(path, 0o640); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		fmt.Fprintf(os.Stderr, "gen-key: not root: run 'chown root:%d %s' where the file is installed\n", keyGroup, path)
		return nil
	}
	if err := os.Chown(path, 0, keyGroup); err != nil {
		return fmt.Errorf("gen-key: %w", err)
	}
	return nil
}
