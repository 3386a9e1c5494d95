// Package atomicfile replaces a file so that a reader (keepalived, haproxy, a
// person with cat) sees either the old content or the new, never a prefix, and
// so that an unchanged content leaves the file untouched. It writes regular
// files only: an existing target that is anything else (a device, a pipe, a
// symlink such as /dev/stdout, a directory) is refused, never read and never
// renamed over.
package atomicfile

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrNotRegular is wrapped by the error for a target that exists and is
// not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// CheckTarget says whether path may be written: it does not exist, or it is
// a regular file. It only looks (lstat): opening a device can have effects
// of its own, and opening a pipe blocks until someone writes to it.
func CheckTarget(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return regular(path, fi)
}

func regular(path string, fi fs.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	// Renaming over a symlink would replace the link, not what it names;
	// renaming over a device node (/dev/null as root) would replace the
	// device for every other program.
	return fmt.Errorf("%s is %s, %w: name a file (or - for stdout where a command takes it)", path, kind(fi.Mode()), ErrNotRegular)
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// ReadRegular reads path if it is a regular file: an error wrapping
// fs.ErrNotExist when there is none, one wrapping ErrNotRegular when it is
// something else. The open neither follows a symlink nor waits for a pipe's
// writer, so a file swapped for one after the check is refused too.
func ReadRegular(path string) ([]byte, error) {
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func openRegular(path string) (*os.File, error) {
	if err := CheckTarget(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symlink, %w", path, ErrNotRegular)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = regular(path, fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// WriteIfChanged writes data to path unless the file already holds exactly
// data, and reports whether it wrote. The new content goes to a temporary
// file in the same directory (so the rename cannot cross file systems), which
// is synced, given the mode, and renamed over path; then the directory is
// synced so the rename survives a crash. An existing file keeps its mode;
// mode is used for a new file; an existing path that is not a regular file
// is refused (ErrNotRegular) and left as it is. An error before the rename leaves path as it
// was (false); an error syncing the directory after it comes with true: the
// file did change, and a caller that reloads on a change must still do so
// (reporting "not written" would make the retry find equal bytes and never
// reload).
func WriteIfChanged(path string, data []byte, mode fs.FileMode) (bool, error) {
	old, err := ReadRegular(path)
	mode, write, err := writeMode(path, err == nil && bytes.Equal(old, data), err, mode)
	if !write {
		return false, err
	}
	return replace(path, bytes.NewReader(data), mode)
}

// writeMode says, from the comparison of what is at path with the new
// content (same, or cmpErr when it could not be read), whether to write
// and with which mode: an existing file keeps its own.
func writeMode(path string, same bool, cmpErr error, mode fs.FileMode) (fs.FileMode, bool, error) {
	switch {
	case cmpErr == nil:
		if same {
			return mode, false, nil
		}
		if fi, err := os.Lstat(path); err == nil {
			mode = fi.Mode().Perm()
		}
	case errors.Is(cmpErr, fs.ErrNotExist):
	case errors.Is(cmpErr, ErrNotRegular):
		return mode, false, fmt.Errorf("write %w", cmpErr)
	default:
		return mode, false, fmt.Errorf("read %s: %w", path, cmpErr)
	}
	return mode, true, nil
}

// SameContent reports whether the regular files a and b hold the same
// bytes. It is for files too large to hold in memory twice (an executable
// of tens of MB): sizes differ, no byte is read; sizes agree, both are
// streamed through SHA-256. Either path not being a regular file is an
// error (ErrNotRegular, or one wrapping fs.ErrNotExist).
func SameContent(a, b string) (bool, error) {
	fa, err := openRegular(a)
	if err != nil {
		return false, err
	}
	defer fa.Close()
	fb, err := openRegular(b)
	if err != nil {
		return false, err
	}
	defer fb.Close()
	sa, err := fa.Stat()
	if err != nil {
		return false, err
	}
	sb, err := fb.Stat()
	if err != nil {
		return false, err
	}
	if sa.Size() != sb.Size() {
		return false, nil
	}
	ha, hb := sha256.New(), sha256.New()
	if _, err := io.Copy(ha, fa); err != nil {
		return false, fmt.Errorf("read %s: %w", a, err)
	}
	if _, err := io.Copy(hb, fb); err != nil {
		return false, fmt.Errorf("read %s: %w", b, err)
	}
	return bytes.Equal(ha.Sum(nil), hb.Sum(nil)), nil
}

// CopyIfChanged is WriteIfChanged with the content streamed from the
// regular file src rather than held in memory: path is left alone when it
// holds src's bytes already (SameContent), and otherwise replaced by a copy
// the same way, with the same guarantees and the same meaning of its
// results.
func CopyIfChanged(path, src string, mode fs.FileMode) (bool, error) {
	in, err := openRegular(src)
	if err != nil {
		return false, fmt.Errorf("copy %s: %w", src, err)
	}
	defer in.Close()
	same, err := SameContent(path, src)
	mode, write, err := writeMode(path, same, err, mode)
	if !write {
		return false, err
	}
	return replace(path, in, mode)
}

// rename and openDir are replaced by tests to fail at the last steps.
var (
	rename  = os.Rename
	openDir = os.Open
)

func replace(path string, data io.Reader, mode fs.FileMode) (changed bool, err error) {
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
	if _, err = io.Copy(tmp, data); err != nil {
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
