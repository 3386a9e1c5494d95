package image

import (
	"crypto/sha256"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// BuildOptions say what Build reads and writes.
type BuildOptions struct {
	Dockerfile string // its final stage is built
	Bin        string // where make build wrote the binaries
	Version    string // the VERSION build argument
	Name       string // image name, e.g. quay.io/infradns/infradns:v1
	Out        string // an OCI image layout tar
	Cache      string // where the Debian layer is kept between builds
	Arch       string // Go's name of the architecture; "" is this machine's
	Log        *log.Logger
}

// Build writes the Dockerfile's image as an OCI image layout tar.
func Build(o BuildOptions) error {
	start := time.Now()
	f, suite, err := readImage(o.Dockerfile, o.Version)
	if err != nil {
		return err
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	platform, debArch, err := Platform(o.Arch)
	if err != nil {
		return err
	}
	base, err := DebianLayer(o.Log, o.Cache, suite, debArch, f.Packages)
	if err != nil {
		return err
	}
	files, err := binaryFiles(f, o.Bin)
	if err != nil {
		return err
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
	im := Image{Platform: platform, Final: f, Layers: []Layer{
		{File: base, Comment: debianComment(suite, f)},
		{File: binLayer, Comment: binariesComment(f)},
	}}
	part := filepath.Join(tmp, "image.tar")
	if err := writeFile(part, func(w *os.File) error {
		md, blobs, err := imageBlobs(im, time.Now().UTC())
		if err != nil {
			return err
		}
		return writeLayoutTar(w, o.Name, md, blobs, time.Now().UTC())
	}); err != nil {
		return err
	}
	if err := os.Rename(part, o.Out); err != nil {
		return err
	}
	o.Log.Printf("%s: %s (%s) in %.1f s", o.Out, ImageName(o.Name), PlatformString(platform), time.Since(start).Seconds())
	return nil
}

// IndexOptions say what BuildIndex reads and writes.
type IndexOptions struct {
	Dockerfile string
	Version    string
	Name       string
	Out        string // an OCI image layout tar
	Cache      string
	Arches     []string          // Go's names, in the index's order
	Bins       map[string]string // architecture → where its binaries are
	Created    time.Time         // every time stamp the build writes (SOURCE_DATE_EPOCH)
	Log        *log.Logger
}

// ArchImage is one architecture's part of a multi-arch image.
type ArchImage struct {
	Arch        string
	Platform    v1.Platform
	Manifest    v1.Descriptor
	DebianLayer string // the cached uncompressed root file system layer (its dpkg status lists the packages)
}

// BuildIndex writes the Dockerfile's image for every architecture in
// o.Arches as one OCI image layout tar holding an image index: each
// architecture's Debian layer comes from that architecture's packages
// (mmdebstrap --architectures, cached), its binaries layer from o.Bins.
// Layers are gzip-compressed; every time stamp is o.Created, so the same
// inputs give the same digests.
func BuildIndex(o IndexOptions) (v1.Descriptor, []ArchImage, error) {
	start := time.Now()
	f, suite, err := readImage(o.Dockerfile, o.Version)
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(o.Out), ".image-oci.")
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	defer os.RemoveAll(tmp)
	var images []Image
	var res []ArchImage
	for _, arch := range o.Arches {
		platform, debArch, err := Platform(arch)
		if err != nil {
			return v1.Descriptor{}, nil, err
		}
		base, err := DebianLayer(o.Log, o.Cache, suite, debArch, f.Packages)
		if err != nil {
			return v1.Descriptor{}, nil, err
		}
		files, err := binaryFiles(f, o.Bins[arch])
		if err != nil {
			return v1.Descriptor{}, nil, fmt.Errorf("%s: %w", arch, err)
		}
		binLayer := filepath.Join(tmp, arch+"-binaries.tar")
		if err := writeFile(binLayer, func(w *os.File) error { return WriteFilesLayer(w, files) }); err != nil {
			return v1.Descriptor{}, nil, err
		}
		l1, err := GzipLayer(filepath.Join(tmp, arch+"-debian.tar.gz"), base, debianComment(suite, f))
		if err != nil {
			return v1.Descriptor{}, nil, err
		}
		l2, err := GzipLayer(filepath.Join(tmp, arch+"-binaries.tar.gz"), binLayer, binariesComment(f))
		if err != nil {
			return v1.Descriptor{}, nil, err
		}
		images = append(images, Image{Platform: platform, Final: f, Layers: []Layer{l1, l2}})
		res = append(res, ArchImage{Arch: arch, Platform: platform, DebianLayer: base})
	}
	var index v1.Descriptor
	var mans []v1.Descriptor
	part := filepath.Join(tmp, "image.tar")
	if err := writeFile(part, func(w *os.File) error {
		var err error
		index, mans, err = WriteIndexLayout(w, o.Name, images, o.Created)
		return err
	}); err != nil {
		return v1.Descriptor{}, nil, err
	}
	for i := range res {
		res[i].Manifest = mans[i]
	}
	if err := os.Rename(part, o.Out); err != nil {
		return v1.Descriptor{}, nil, err
	}
	o.Log.Printf("%s: %s, index %s (%s) in %.1f s", o.Out, ImageName(o.Name), index.Digest, strings.Join(o.Arches, " "), time.Since(start).Seconds())
	return index, res, nil
}

// readImage reads the Dockerfile's final stage and the Debian suite it
// starts from.
func readImage(dockerfile, version string) (Final, string, error) {
	df, err := os.ReadFile(dockerfile)
	if err != nil {
		return Final{}, "", err
	}
	f, err := ReadFinal(df, map[string]string{"VERSION": version})
	if err != nil {
		return Final{}, "", err
	}
	suite, ok := debianSuite(f.Base)
	if !ok {
		return Final{}, "", fmt.Errorf("final stage FROM %s: only debian:SUITE[-slim] is built without a registry", f.Base)
	}
	return f, suite, nil
}

// binaryFiles are the final stage's binaries, read from bin, with their
// file capabilities.
func binaryFiles(f Final, bin string) ([]File, error) {
	var files []File
	for _, b := range f.Binaries {
		p := filepath.ToSlash(filepath.Join(f.BinDir, b))
		files = append(files, File{Path: p, Mode: 0o755, Src: filepath.Join(bin, b), Caps: f.FileCaps[p]})
	}
	for p := range f.FileCaps {
		if !slices.ContainsFunc(files, func(x File) bool { return x.Path == p }) {
			return nil, fmt.Errorf("setcap %s: not a file the final stage copies", p)
		}
	}
	return files, nil
}

func debianComment(suite string, f Final) string {
	return fmt.Sprintf("mmdebstrap %s + %s", suite, strings.Join(f.Packages, " "))
}

func binariesComment(f Final) string { return "make build: " + strings.Join(f.Binaries, " ") }

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

// DebianLayer returns the cached Debian layer for suite, the Debian
// architecture arch (amd64, arm64, ppc64el, s390x) and packages, building it
// with mmdebstrap the first time (a few minutes; a foreign architecture's
// maintainer scripts run under qemu-user-static through binfmt_misc); a
// lock lets parallel builds share it. mmdebstrap clamps the time stamps to
// $SOURCE_DATE_EPOCH when it is set.
func DebianLayer(logger *log.Logger, cache, suite, arch string, packages []string) (string, error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	layer, args := debianLayerPath(cache, suite, arch, packages)
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
	if arch != debianArch() {
		if err := canRunForeign(arch); err != nil {
			return "", err
		}
	}
	pk := slices.Sorted(slices.Values(packages))
	args = append(args, "--include="+strings.Join(pk, ","), suite, rootfs)
	logger.Printf("building the Debian layer (%s %s: %s) with mmdebstrap, once", suite, arch, strings.Join(pk, " "))
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

// debianLayerPath is where DebianLayer keeps the layer of suite, arch and
// packages, and mmdebstrap's options for it but the packages and suite.
func debianLayerPath(cache, suite, arch string, packages []string) (string, []string) {
	pk := slices.Sorted(slices.Values(packages))
	args := append(slices.Clone(mmdebstrapArgs), "--architectures="+arch)
	key := sha256.Sum256([]byte(strings.Join(append(append([]string{suite}, args...), pk...), "\n")))
	return filepath.Join(cache, fmt.Sprintf("debian-%s-%s-%x.tar", suite, arch, key[:8])), args
}

// CachedDebianLayer is where DebianLayer keeps the layer of the Dockerfile's
// final stage for Go's architecture goarch (a test puts a small one there).
func CachedDebianLayer(cache, dockerfile, goarch string) (string, error) {
	f, suite, err := readImage(dockerfile, "")
	if err != nil {
		return "", err
	}
	_, deb, err := Platform(goarch)
	if err != nil {
		return "", err
	}
	p, _ := debianLayerPath(cache, suite, deb, f.Packages)
	return p, nil
}

// debianArch is this machine's Debian architecture.
func debianArch() string {
	_, a, err := Platform(runtime.GOARCH)
	if err != nil {
		return runtime.GOARCH
	}
	return a
}

// qemuPackages: Debian architecture → the emulator binfmt_misc runs its
// programs with.
var qemuBinfmt = map[string]string{"arm64": "qemu-aarch64", "ppc64el": "qemu-ppc64le", "s390x": "qemu-s390x", "amd64": "qemu-x86_64"}

// canRunForeign says whether mmdebstrap can run arch's maintainer scripts
// here: qemu-user-static registered with binfmt_misc.
func canRunForeign(arch string) error {
	q, ok := qemuBinfmt[arch]
	if !ok {
		return fmt.Errorf("no emulator known for Debian architecture %s", arch)
	}
	if _, err := os.Stat("/proc/sys/fs/binfmt_misc/" + q); err != nil {
		return fmt.Errorf("mmdebstrap --architectures=%s runs that architecture's maintainer scripts under %s-static, registered with binfmt_misc: "+
			"/proc/sys/fs/binfmt_misc/%s is missing (make deps installs qemu-user-static and binfmt-support and registers them): %w", arch, q, q, err)
	}
	return nil
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
