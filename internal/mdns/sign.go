package mdns

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// TXT keys of an authenticated announcement. The signature covers the cluster,
// the host name, every address of the host in the same packet, the timestamp,
// the nonce and whether the packet is a goodbye, so none of them can be changed
// or moved to another packet.
const (
	txtCluster = "cluster"
	txtTime    = "ts"
	txtNonce   = "n"
	txtSig     = "sig"
)

// MinKeyLen is the shortest key accepted: shorter keys are guessable offline
// from one captured announcement.
const MinKeyLen = 16

// Errors of signature checks; Reason maps them to metric labels.
var (
	ErrUnsigned = errors.New("announcement is not signed")
	ErrBadSig   = errors.New("announcement signature does not verify")
	ErrStale    = errors.New("announcement timestamp is outside the accepted window")
	ErrReplay   = errors.New("announcement was already seen (replay)")
	// ErrDuplicate is not a rejection: the announcement was accepted a
	// moment ago, and this is another copy of it (see DuplicateWindow).
	ErrDuplicate = errors.New("announcement was just accepted: another copy of it")
	// ErrSuperseded is not a rejection either: the announcement is at most
	// DuplicateWindow older than one accepted from the same host, and
	// arrived after it.
	ErrSuperseded = errors.New("announcement is older than one just accepted from its host")
	ErrMalformed  = errors.New("announcement signature fields are malformed")
)

// KeyOwnership is how a key file is to be owned: the publisher runs as uid
// and gid 65532 (deploy/static-pods/mdns-publisher.yaml.tmpl) and CoreDNS as
// root, so root owns the file and the publisher's group may read it.
const KeyOwnership = "owned by root:65532 with mode 0640 (chown root:65532 %[1]s && chmod 0640 %[1]s)"

// checkKeyMode decides on the permissions of a key file. Writable by group or
// others is refused: whoever can write the key can make this host sign or
// accept what they like. Readable by others is a warning: any local user can
// then forge announcements, but a Kubernetes Secret volume (mode 0644 by
// default) looks like that too, and refusing it would take the node's names
// down on an upgrade.
func checkKeyMode(path string, mode fs.FileMode) (warning string, err error) {
	perm := mode.Perm()
	if perm&0o022 != 0 {
		return "", fmt.Errorf("key file %s is writable by group or others (mode %04o): it must be "+KeyOwnership, path, perm)
	}
	if perm&0o004 != 0 {
		return fmt.Sprintf("key file %s is readable by others (mode %04o): any local user can sign announcements; it should be "+KeyOwnership, path, perm), nil
	}
	return "", nil
}

// MaxKeys bounds the keys of one file: a rotation needs two.
const MaxKeys = 4

// LoadKeys reads a shared key file: one key per line (at least MinKeyLen
// bytes; surrounding white space, empty lines and lines starting with #
// ignored). Every key verifies; the last one signs. A rotation therefore
// goes: NEW placed before OLD on every node (verified, not yet used), then
// OLD before NEW (NEW signs), then NEW alone. A file that group or others
// may write is refused; warn, when not nil, receives what is merely unwise
// (readable by others).
func LoadKeys(path string, warn func(string)) ([][]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	w, err := checkKeyMode(path, st.Mode())
	if err != nil {
		return nil, err
	}
	if w != "" && warn != nil {
		warn(w)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	var keys [][]byte
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(line) < MinKeyLen {
			return nil, fmt.Errorf("key on line %d of %s is %d bytes, want at least %d", i+1, path, len(line), MinKeyLen)
		}
		keys = append(keys, []byte(line))
	}
	switch {
	case len(keys) == 0:
		return nil, fmt.Errorf("no key in %s", path)
	case len(keys) > MaxKeys:
		return nil, fmt.Errorf("%d keys in %s, at most %d (a rotation needs two)", len(keys), path, MaxKeys)
	}
	return keys, nil
}

// LoadKey is the key of path that signs: its last.
func LoadKey(path string, warn func(string)) ([]byte, error) {
	keys, err := LoadKeys(path, warn)
	if err != nil {
		return nil, err
	}
	return keys[len(keys)-1], nil
}

// Signed is what a signature covers.
type Signed struct {
	Cluster string
	Host    string // lower case, fully qualified
	Addrs   []netip.Addr
	TS      int64 // Unix milliseconds
	Nonce   string
	Goodbye bool
}

func (s Signed) message() []byte {
	addrs := slices.Clone(s.Addrs)
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	var b strings.Builder
	b.WriteString("infradns-mdns-v1\n")
	b.WriteString(s.Cluster)
	b.WriteByte('\n')
	b.WriteString(lower(s.Host))
	b.WriteByte('\n')
	for i, a := range addrs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(a.String())
	}
	b.WriteByte('\n')
	b.WriteString(strconv.FormatInt(s.TS, 10))
	b.WriteByte('\n')
	b.WriteString(s.Nonce)
	if s.Goodbye {
		b.WriteString("\nbye")
	}
	return []byte(b.String())
}

// Sign returns the signature of s under key.
func Sign(key []byte, s Signed) string {
	m := hmac.New(sha256.New, key)
	m.Write(s.message())
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// VerifySig reports whether sig is the signature of s under key.
func VerifySig(key []byte, s Signed, sig string) bool {
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, key)
	m.Write(s.message())
	return hmac.Equal(got, m.Sum(nil))
}

// Verifier checks signed announcements and remembers what it accepted, to
// refuse replays: a timestamp must be within Window of the local clock, a
// nonce is accepted once, and a host's timestamps never go back.
type Verifier struct {
	// Keys are tried in turn: during a rotation the nodes sign with
	// either of two.
	Keys   [][]byte
	Window time.Duration

	seen map[string]seenNonce
	last map[string]int64 // host → newest accepted timestamp
}

// seenNonce is what the Verifier remembers of an accepted announcement.
type seenNonce struct {
	forget time.Time // when it may be forgotten: its timestamp is stale then
	heard  time.Time // when it was accepted, on the local clock
	sig    string
}

// DuplicateWindow is how long after an announcement was accepted the same
// announcement (same nonce, same signature) is taken for another copy of it
// rather than a replay. A publisher sends every packet on both families, and
// a link with IPv6 (every Linux interface has a link-local address) delivers
// each signed announcement twice, milliseconds apart: one announcement, not
// a replay and not "unsigned", which made every healthy signed cluster raise
// InfradnsMDNSRejections. A copy changes nothing, so it is ignored; a replay
// inside this second could only repeat what the node itself just said. Past
// it the nonce gives a replay away, past the Window its timestamp.
const DuplicateWindow = time.Second

// DefaultWindow bounds clock skew between nodes plus delivery time; a replay
// older than this is refused on its timestamp alone.
const DefaultWindow = 30 * time.Second

// maxNonces bounds the replay memory; a flood of validly signed packets could
// only come from a key holder.
const maxNonces = 1 << 16

// NewVerifier returns a Verifier accepting any of keys.
func NewVerifier(keys ...[]byte) *Verifier {
	return &Verifier{Keys: keys, Window: DefaultWindow, seen: map[string]seenNonce{}, last: map[string]int64{}}
}

// Check verifies the signature fields of a TXT record (parsed into fields)
// for s (whose TS and Nonce it fills in) and records the nonce when accepted.
// ErrDuplicate says that the announcement was accepted within the last
// DuplicateWindow: the caller ignores it, as neither accepted nor rejected.
func (v *Verifier) Check(now time.Time, s Signed, fields map[string]string) error {
	sig, hasSig := fields[txtSig]
	tsText, hasTS := fields[txtTime]
	nonce, hasNonce := fields[txtNonce]
	if !hasSig && !hasTS && !hasNonce {
		return ErrUnsigned
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if !hasSig || err != nil || nonce == "" || len(nonce) > 64 {
		return ErrMalformed
	}
	s.TS, s.Nonce = ts, nonce
	if !slices.ContainsFunc(v.Keys, func(k []byte) bool { return VerifySig(k, s, sig) }) {
		return ErrBadSig
	}
	at := time.UnixMilli(ts)
	if at.Before(now.Add(-v.Window)) || at.After(now.Add(v.Window)) {
		return ErrStale
	}
	v.forget(now)
	if seen, ok := v.seen[nonce]; ok {
		if seen.sig == sig && now.Sub(seen.heard) <= DuplicateWindow {
			return ErrDuplicate
		}
		return ErrReplay
	}
	host := lower(s.Host)
	if ts < v.last[host] {
		if v.last[host]-ts > DuplicateWindow.Milliseconds() {
			return ErrReplay
		}
		// Reordered, not replayed: the two families' sockets are read
		// apart, and an unseen nonce cannot be forged. What it says is
		// older than what was accepted, so it changes nothing.
		v.seen[nonce] = seenNonce{forget: at.Add(v.Window), heard: now, sig: sig}
		return ErrSuperseded
	}
	if len(v.seen) >= maxNonces {
		return ErrReplay
	}
	v.seen[nonce] = seenNonce{forget: at.Add(v.Window), heard: now, sig: sig}
	v.last[host] = ts
	return nil
}

func (v *Verifier) forget(now time.Time) {
	for n, t := range v.seen {
		if now.After(t.forget) {
			delete(v.seen, n)
		}
	}
}
