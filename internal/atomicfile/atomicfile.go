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
// mode is used for a new file. On any error path is left as it was.
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
	if err := replace(path, data, mode); err != nil {
		return false, err
	}
	return true, nil
}

// rename is replaced by tests to fail at the last step, after the temp file
// is complete.
var rename = os.Rename

func replace(path string, data []byte, mode fs.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// CreateTemp makes 0600 files; chmod on the descriptor also escapes the umask.
	if err = tmp.Chmod(mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: sync: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		// The file is replaced; only its durability across a crash is unsure.
		return fmt.Errorf("write %s: open directory to sync: %w", path, err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("write %s: sync directory: %w", path, err)
	}
	return nil
}
