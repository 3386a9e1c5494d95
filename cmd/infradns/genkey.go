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

// The rotation states a key file records in a comment line (mdns.LoadKeys
// skips comments), so that each step knows where the file is: two keys look
// the same staged (new first) and promoted (new last), and -promote run
// twice swapped them back, so the old key signed again, after nodes given
// the retired file had dropped it.
const (
	rotationMark = "# rotation: "
	stateStaged  = "staged"
	statePromote = "promoted"
)

// keyFileHead is the first line of every file gen-key writes.
const keyFileHead = "# infradns mDNS key file (infradns gen-key): every key verifies, the last signs."

// rotationNote is the comment line of a state: what it means, what comes next.
var rotationNote = map[string]string{
	stateStaged:  rotationMark + stateStaged + ": the first key is new, every node accepts it, none signs with it yet; next, once every node has this file: -promote",
	statePromote: rotationMark + statePromote + ": the last key is new and signs, the first still verifies; next, once every node has this file: -retire",
}

// rotationState is the state a key file records: "" for none (one key, or
// a file written by hand or by an older gen-key).
func rotationState(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("gen-key: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), rotationMark); ok {
			state, _, _ := strings.Cut(rest, ":")
			return state, nil
		}
	}
	return "", nil
}

// genKey writes the mDNS key file and steps a rotation through it. Every
// key of the file verifies and the last signs (mdns.LoadKeys), so a rotation
// without a name lost is three files, each on every node before the next:
// -stage (new key first: verified, not used), -promote (new key last: it
// signs, the old one still verifies), -retire (the new key alone). Each step
// is idempotent: run again (a second operator, a retried script) it leaves
// the file as it is.
func genKey(_ context.Context, args []string, out io.Writer) error {
	fs := flags("gen-key", "-o FILE [-stage | -promote | -retire]")
	path := fs.String("o", "", "the key file (on a node: /etc/infradns/mdns.key, the cluster file's mdnsKey)")
	stage := fs.Bool("stage", false, "add a new key before the current one: every node accepts it, none signs with it yet (again: nothing)")
	promote := fs.Bool("promote", false, "the staged key signs from now on (moved last); the old one still verifies (again: nothing)")
	retire := fs.Bool("retire", false, "keep only the key that signs (again: nothing)")
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
	var state string
	if n > 0 {
		k, err := mdns.LoadKeys(*path, nil)
		if err != nil {
			return fmt.Errorf("gen-key: %w", err)
		}
		for _, x := range k {
			keys = append(keys, string(x))
		}
		if state, err = rotationState(*path); err != nil {
			return err
		}
		// Two keys without a mark come from an older gen-key's -stage (or
		// from a hand): the order the guide gives, the new key first.
		if len(keys) == 2 && state == "" {
			state = stateStaged
		}
	} else if _, err := os.Stat(*path); err == nil {
		return fmt.Errorf("gen-key: %s exists: rotate it with -stage, -promote and -retire", *path)
	}
	next, already := state, ""
	switch {
	case *stage:
		switch {
		case len(keys) == 2 && state == stateStaged:
			already = "already staged"
		case len(keys) != 1:
			return fmt.Errorf("gen-key -stage: %s holds %d keys (%s), want 1: a rotation is under way, finish it with -promote and -retire", *path, len(keys), orNone(state))
		default:
			k, err := newKey()
			if err != nil {
				return err
			}
			keys, next = []string{k, keys[0]}, stateStaged
		}
	case *promote:
		switch {
		case len(keys) == 2 && state == statePromote:
			already = "already promoted"
		case len(keys) != 2 || state != stateStaged:
			return fmt.Errorf("gen-key -promote: %s holds %d keys (%s), want 2 staged ones (-stage first)", *path, len(keys), orNone(state))
		default:
			keys, next = []string{keys[1], keys[0]}, statePromote
		}
	case *retire:
		switch {
		case len(keys) == 1:
			already = "already retired"
		case state == stateStaged:
			// The last key signs: the old one. What goes is the staged key,
			// which no node signs with: the rotation is called off.
			fmt.Fprintf(os.Stderr, "gen-key -retire: %s was staged, not promoted: keeping the old key, the staged one goes (rotation called off)\n", *path)
		}
		keys, next = keys[len(keys)-1:], ""
	default:
		k, err := newKey()
		if err != nil {
			return err
		}
		keys = []string{k}
	}
	if already != "" {
		_, err := fmt.Fprintf(out, "%s: %s, left as it is: copy it to every node's mdnsKey path if not done yet\n", *path, already)
		return err
	}
	text := keyFileHead + "\n"
	if next != "" {
		text += rotationNote[next] + "\n"
	}
	text += strings.Join(keys, "\n") + "\n"
	if _, err := atomicfile.WriteIfChanged(*path, []byte(text), 0o640); err != nil {
		return fmt.Errorf("gen-key: %w", err)
	}
	if err := ownKey(*path); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "%s: %d key(s)%s, the last signs; copy it to every node's mdnsKey path (root:%d, 0640) and restart the publisher and CoreDNS pods there\n", *path, len(keys), orEmpty(next), keyGroup)
	return err
}

func orNone(state string) string {
	if state == "" {
		return "no rotation under way"
	}
	return state
}

func orEmpty(state string) string {
	if state == "" {
		return ""
	}
	return " (" + state + ")"
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
