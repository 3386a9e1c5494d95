// Package release makes a release directory (make release VERSION=...):
// make build's static binaries for every architecture (the Makefile
// cross-builds them into linux_ARCH/), one multi-arch OCI image (an image
// index over one image per architecture, each on that architecture's Debian
// packages; deploy/image builds it), an SPDX SBOM and SHA256SUMS. Every time
// stamp is SOURCE_DATE_EPOCH, so the same commit gives the same digests.
package release

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/infradns/infradns/deploy/image"
)

// Arches are the architectures a release is built for (Go's names).
var Arches = []string{"amd64", "arm64", "ppc64le", "s390x"}

// Options say what Build reads and writes.
type Options struct {
	Dir        string // the release directory: linux_ARCH/ holds make build's binaries
	Version    string
	Name       string // the image's name
	Dockerfile string
	Cache      string // the Debian layers' cache
	Arches     []string
	Created    time.Time // SOURCE_DATE_EPOCH
	Source     string    // the source repository's address, for the SBOM
	Log        *log.Logger
}

// Files of a release directory besides linux_ARCH/.
func ImageFile(version string) string { return "infradns-" + version + ".oci.tar" }
func SBOMFile(version string) string  { return "infradns-" + version + ".spdx.json" }

// Build writes the image, the SBOM and SHA256SUMS into o.Dir, beside the
// binaries already there, and returns the image index's digest.
func Build(o Options) (string, error) {
	bins := map[string]string{}
	for _, a := range o.Arches {
		bins[a] = filepath.Join(o.Dir, "linux_"+a)
	}
	index, images, err := image.BuildIndex(image.IndexOptions{Dockerfile: o.Dockerfile, Version: o.Version, Name: o.Name,
		Out: filepath.Join(o.Dir, ImageFile(o.Version)), Cache: o.Cache, Arches: o.Arches, Bins: bins, Created: o.Created, Log: o.Log})
	if err != nil {
		return "", err
	}
	in := SBOMInput{Name: o.Name, Version: o.Version, Index: index.Digest.String(), Created: o.Created.UTC().Format(time.RFC3339),
		Source: o.Source, ToolName: "infradns make release"}
	if i := strings.LastIndex(in.Name, ":"); i > strings.LastIndex(in.Name, "/") {
		in.Name = in.Name[:i]
	}
	for _, im := range images {
		debs, err := image.LayerFiles(im.DebianLayer, "var/lib/dpkg/status", "etc/os-release", "usr/lib/os-release")
		if err != nil {
			return "", err
		}
		pkgs, err := DpkgStatus(bytes.NewReader(debs["var/lib/dpkg/status"]))
		if err != nil {
			return "", fmt.Errorf("%s: %w", im.Arch, err)
		}
		if len(pkgs) == 0 {
			return "", fmt.Errorf("%s: the Debian layer's dpkg status lists no installed package", im.Arch)
		}
		a := SBOMArch{Arch: im.Arch, Platform: image.PlatformString(im.Platform), Manifest: im.Manifest.Digest.String(),
			Binaries: map[string]string{}, Debian: pkgs, DebianDist: osRelease(debs["etc/os-release"], debs["usr/lib/os-release"])}
		entries, err := os.ReadDir(bins[im.Arch])
		if err != nil {
			return "", err
		}
		for _, e := range entries {
			a.Binaries[e.Name()] = filepath.Join(bins[im.Arch], e.Name())
		}
		in.Arches = append(in.Arches, a)
	}
	doc, err := MakeSBOM(in)
	if err != nil {
		return "", err
	}
	js, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(o.Dir, SBOMFile(o.Version)), append(js, '\n'), 0o644); err != nil {
		return "", err
	}
	return index.Digest.String(), WriteSums(o.Dir)
}

// osRelease is debian-VERSION_ID of an os-release file, as package URLs
// name a Debian release ("" if unknown).
func osRelease(files ...[]byte) string {
	for _, f := range files {
		for _, line := range strings.Split(string(f), "\n") {
			if v, ok := strings.CutPrefix(line, "VERSION_ID="); ok {
				return "debian-" + strings.Trim(v, `"`)
			}
		}
	}
	return ""
}
