package release

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// SumsFile is the checksum list of a release directory, in sha256sum's
// format: `sha256sum -c SHA256SUMS` checks it.
const SumsFile = "SHA256SUMS"

// WriteSums writes dir/SHA256SUMS over every other regular file under dir,
// paths relative to dir with slashes, sorted.
func WriteSums(dir string) error {
	files, err := releaseFiles(dir)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	for _, f := range files {
		sum, err := fileSHA256(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, f)
	}
	return os.WriteFile(filepath.Join(dir, SumsFile), b.Bytes(), 0o644)
}

// CheckSums checks dir/SHA256SUMS: every line's file has that digest, and
// every file of dir is listed.
func CheckSums(dir string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, SumsFile))
	if err != nil {
		return nil, err
	}
	listed := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 || name == "" {
			return nil, fmt.Errorf("%s:%d: not \"SHA256  FILE\": %q", SumsFile, n, sc.Text())
		}
		if _, dup := listed[name]; dup {
			return nil, fmt.Errorf("%s:%d: %s listed twice", SumsFile, n, name)
		}
		got, err := fileSHA256(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", SumsFile, n, err)
		}
		if got != sum {
			return nil, fmt.Errorf("%s: SHA-256 %s, %s says %s", name, got, SumsFile, sum)
		}
		listed[name] = sum
	}
	files, err := releaseFiles(dir)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if _, ok := listed[f]; !ok {
			return nil, fmt.Errorf("%s is not in %s", f, SumsFile)
		}
	}
	return listed, nil
}

func releaseFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel != SumsFile {
			files = append(files, rel)
		}
		return nil
	})
	slices.Sort(files)
	return files, err
}

func fileSHA256(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
