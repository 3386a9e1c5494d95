package image

import (
	"crypto/sha256"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// BuildOptions say what Build reads and writes.
type BuildOptions struct {
	Dockerfile string // its final stage is built
	Bin        string // where make build wrote the binaries
	Version    string // the VERSION build argument
	Name       string // image name, e.g. quay.io/infradns/infradns:v1
	Out        string // an OCI image layout tar
	Cache      string // where the Debian layer is kept between builds
	Log        *log.Logger
}

// Build writes the Dockerfile's image as an OCI image layout tar.
func Build(o BuildOptions) error {
	start := time.Now()
	df, err := os.ReadFile(o.Dockerfile)
	if err != nil {
		return err
	}
	f, err := ReadFinal(df, map[string]string{"VERSION": o.Version})
	if err != nil {
		return err
	}
	suite, ok := debianSuite(f.Base)
	if !ok {
		return fmt.Errorf("final stage FROM %s: only debian:SUITE[-slim] is built without a registry", f.Base)
	}
	base, err := DebianLayer(o.Log, o.Cache, suite, f.Packages)
	if err != nil {
		return err
	}
	var files []File
	for _, b := range f.Binaries {
		p := filepath.ToSlash(filepath.Join(f.BinDir, b))
		files = append(files, File{Path: p, Mode: 0o755, Src: filepath.Join(o.Bin, b), Caps: f.FileCaps[p]})
	}
	for p := range f.FileCaps {
		if !slices.ContainsFunc(files, func(x File) bool { return x.Path == p }) {
			return fmt.Errorf("setcap %s: not a file the final stage copies", p)
		}
	}
	tmp, err := os.MkdirTemp(filepath.Dir(o.Out), ".image-oci.")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	binLayer := filepath.Join(tmp, "binaries.tar")
	if err := writeFile(binLayer, func(w *os.File) error { return WriteFilesLayer(w, files) }); err != nil {
		return err
	}
	layers := []Layer{
		{File: base, Comment: fmt.Sprintf("mmdebstrap %s + %s", suite, strings.Join(f.Packages, " "))},
		{File: binLayer, Comment: "make build: " + strings.Join(f.Binaries, " ")},
	}
	part := filepath.Join(tmp, "image.tar")
	if err := writeFile(part, func(w *os.File) error { return WriteLayout(w, o.Name, f, layers, time.Now().UTC()) }); err != nil {
		return err
	}
	if err := os.Rename(part, o.Out); err != nil {
		return err
	}
	o.Log.Printf("%s: %s in %.1f s", o.Out, ImageName(o.Name), time.Since(start).Seconds())
	return nil
}

func debianSuite(base string) (string, bool) {
	repo, tag, ok := strings.Cut(base, ":")
	if !ok || (repo != "debian" && repo != "docker.io/library/debian") {
		return "", false
	}
	return strings.TrimSuffix(tag, "-slim"), true
}

// mmdebstrapArgs are what makes the root file system like Debian's slim
// images: no recommends, no manuals, documentation or translations.
var mmdebstrapArgs = []string{
	"--variant=minbase",
	"--format=tar",
	"--aptopt=Apt::Install-Recommends \"false\"",
	"--dpkgopt=path-exclude=/usr/share/man/*",
	"--dpkgopt=path-exclude=/usr/share/doc/*",
	"--dpkgopt=path-include=/usr/share/doc/*/copyright",
	"--dpkgopt=path-exclude=/usr/share/locale/*",
	"--dpkgopt=path-exclude=/usr/share/info/*",
}

// DefaultCache is $INFRADNS_IMAGE_CACHE, else infradns/image in the user's
// cache directory.
func DefaultCache() string {
	if d := os.Getenv("INFRADNS_IMAGE_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "infradns", "image")
}

// DebianLayer returns the cached Debian layer for suite and packages,
// building it with mmdebstrap the first time (a few minutes); a lock lets
// parallel builds share it.
func DebianLayer(logger *log.Logger, cache, suite string, packages []string) (string, error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	pk := slices.Sorted(slices.Values(packages))
	key := sha256.Sum256([]byte(strings.Join(append(append([]string{suite}, mmdebstrapArgs...), pk...), "\n")))
	layer := filepath.Join(cache, fmt.Sprintf("debian-%s-%x.tar", suite, key[:8]))
	lock, err := os.OpenFile(filepath.Join(cache, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(layer); err == nil {
		return layer, nil
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return "", fmt.Errorf("mmdebstrap is needed for the Debian layer (make deps installs it): %w", err)
	}
	start := time.Now()
	rootfs := layer + ".rootfs"
	args := append(slices.Clone(mmdebstrapArgs), "--include="+strings.Join(pk, ","), suite, rootfs)
	logger.Printf("building the Debian layer (%s: %s) with mmdebstrap, once", suite, strings.Join(pk, " "))
	cmd := exec.Command("mmdebstrap", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		os.Remove(rootfs)
		return "", fmt.Errorf("mmdebstrap %s: %w", strings.Join(args, " "), err)
	}
	defer os.Remove(rootfs)
	r, err := os.Open(rootfs)
	if err != nil {
		return "", err
	}
	defer r.Close()
	if err := writeFile(layer+".part", func(w *os.File) error { return CopyBaseLayer(w, r) }); err != nil {
		return "", err
	}
	if err := os.Rename(layer+".part", layer); err != nil {
		return "", err
	}
	logger.Printf("Debian layer %s in %.0f s", layer, time.Since(start).Seconds())
	return layer, nil
}

func writeFile(name string, fill func(*os.File) error) error {
	w, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := fill(w); err != nil {
		w.Close()
		os.Remove(name)
		return err
	}
	return w.Close()
}
