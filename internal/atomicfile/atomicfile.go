// Package atomicfile replaces a file so that a reader (keepalived, haproxy, a
// person with cat) sees either the old content or the new, never a prefix, and
// so that an unchanged content leaves the file untouched.
package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteIfChanged writes data to path unless the file already holds exactly
// data, and reports whether it wrote. The new content goes to a temporary
// file in the same directory (so the rename cannot cross file systems), which
// is synced, given the mode, and renamed over path; then the directory is
// synced so the rename survives a crash. An existing file keeps its mode;
// mode is used for a new file. An error before the rename leaves path as it
// was (false); an error syncing the directory after it comes with true: the
// file did change, and a caller that reloads on a change must still do so
// (reporting "not written" would make the retry find equal bytes and never
// reload).
func WriteIfChanged(path string, data []byte, mode fs.FileMode) (bool, error) {
	old, err := os.ReadFile(path)
	switch {
	case err == nil:
		if bytes.Equal(old, data) {
			return false, nil
		}
		if fi, err := os.Stat(path); err == nil {
			mode = fi.Mode().Perm()
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	return replace(path, data, mode)
}

// rename and openDir are replaced by tests to fail at the last steps.
var (
	rename  = os.Rename
	openDir = os.Open
)

func replace(path string, data []byte, mode fs.FileMode) (changed bool, err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil && !changed {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	// CreateTemp makes 0600 files; chmod on the descriptor also escapes the umask.
	if err = tmp.Chmod(mode); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return false, fmt.Errorf("write %s: sync: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if err = rename(tmp.Name(), path); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	// The file is replaced; from here only its durability across a crash
	// is unsure.
	d, err := openDir(dir)
	if err != nil {
		return true, fmt.Errorf("write %s: replaced, but open directory to sync: %w", path, err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return true, fmt.Errorf("write %s: replaced, but sync directory: %w", path, err)
	}
	return true, nil
}
