// Package secret reads a file that holds a secret (a BGP password) the way
// ssh reads a private key: only a regular file that its owner alone can
// read, owned by root or by the user reading it. Anything else is refused
// with what to do, never with the content.
package secret

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ReadFile reads the secret file at path, at most max bytes. Refused: a
// file that is not regular (the open neither follows a symlink's last
// element nor waits for a pipe's writer), owned by another user than root
// or the reader, readable or writable by group or others (the secret is
// out already: change it, then chmod 0600), or longer than max.
func ReadFile(path string, max int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symlink: name the file itself", path)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := Check(path, fi, os.Geteuid()); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("%s is longer than %d bytes", path, max)
	}
	return b, nil
}

// Check judges a secret file's type, owner and mode (fi from its
// descriptor); euid is the reader's user.
func Check(path string, fi fs.FileInfo, euid int) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%v)", path, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 && int(st.Uid) != euid {
		return fmt.Errorf("%s is owned by uid %d: chown root %s", path, st.Uid, path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s is open to group or others (%04o): it holds a secret: chmod 0600 %s (and change the secret if others could read it)", path, perm, path)
	}
	return nil
}
