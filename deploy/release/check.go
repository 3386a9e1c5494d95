package release

import (
	"archive/tar"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/infradns/infradns/deploy/image"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// Check checks a release directory: SHA256SUMS lists every file with its
// digest; the SBOM is SPDX 2.3 whose relationships name its packages; every
// binary of linux_ARCH/ is in it with its SHA-256 and a STATIC_LINK to each
// Go module of its build information (version and go.sum hash); the image
// index and each architecture's manifest in the image archive are the
// SBOM's, each with its platform and Debian packages of its architecture.
func Check(dir, version string) error {
	sums, err := CheckSums(dir)
	if err != nil {
		return err
	}
	for _, f := range []string{ImageFile(version), SBOMFile(version)} {
		if _, ok := sums[f]; !ok {
			return fmt.Errorf("%s: no %s", dir, f)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, SBOMFile(version)))
	if err != nil {
		return err
	}
	var doc SPDX
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", SBOMFile(version), err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.SPDXID != "SPDXRef-DOCUMENT" || doc.DocumentNamespace == "" || doc.CreationInfo.Created == "" {
		return fmt.Errorf("%s: not an SPDX 2.3 document: %s %s", SBOMFile(version), doc.SPDXVersion, doc.SPDXID)
	}
	pkgs := map[string]SPDXPackage{}
	for _, p := range doc.Packages {
		if _, dup := pkgs[p.SPDXID]; dup {
			return fmt.Errorf("SBOM: SPDX ID %s twice", p.SPDXID)
		}
		pkgs[p.SPDXID] = p
	}
	children := map[string]map[string][]SPDXPackage{} // id → relationship → packages
	for _, r := range doc.Relationships {
		b, ok := pkgs[r.RelatedSPDXElement]
		if _, a := pkgs[r.SPDXElementID]; !ok || (!a && r.SPDXElementID != doc.SPDXID) {
			return fmt.Errorf("SBOM: relationship %s %s %s names an unknown element", r.SPDXElementID, r.RelationshipType, r.RelatedSPDXElement)
		}
		if children[r.SPDXElementID] == nil {
			children[r.SPDXElementID] = map[string][]SPDXPackage{}
		}
		children[r.SPDXElementID][r.RelationshipType] = append(children[r.SPDXElementID][r.RelationshipType], b)
	}
	sum := func(p SPDXPackage) string {
		for _, c := range p.Checksums {
			if c.Algorithm == "SHA256" {
				return c.ChecksumValue
			}
		}
		return ""
	}

	index, mans, err := readImageIndex(filepath.Join(dir, ImageFile(version)))
	if err != nil {
		return err
	}
	described := children[doc.SPDXID]["DESCRIBES"]
	var img *SPDXPackage
	for i, p := range described {
		if p.PrimaryPackagePurpose == "CONTAINER" {
			img = &described[i]
		}
	}
	if img == nil || "sha256:"+sum(*img) != index {
		return fmt.Errorf("SBOM: no image package with the index's digest %s", index)
	}
	archImages := children[img.SPDXID]["CONTAINS"]
	if len(archImages) != len(mans) {
		return fmt.Errorf("SBOM: %d images in the index, %d in the SBOM", len(mans), len(archImages))
	}
	binaries := map[string]bool{}
	for _, m := range mans {
		arch := m.Platform.Architecture
		var ai *SPDXPackage
		for i, p := range archImages {
			if "sha256:"+sum(p) == m.Digest.String() {
				ai = &archImages[i]
			}
		}
		if ai == nil {
			return fmt.Errorf("SBOM: no image package for the %s manifest %s", image.PlatformString(*m.Platform), m.Digest)
		}
		_, debArch, err := image.Platform(arch)
		if err != nil {
			return err
		}
		want, _, _ := image.Platform(arch)
		if image.PlatformString(want) != image.PlatformString(*m.Platform) {
			return fmt.Errorf("image index: platform %s, want %s", image.PlatformString(*m.Platform), image.PlatformString(want))
		}
		var debs, bins int
		for _, p := range children[ai.SPDXID]["CONTAINS"] {
			switch p.PrimaryPackagePurpose {
			case "APPLICATION":
				bins++
				file := filepath.Join(dir, "linux_"+arch, p.Name)
				if sums[path.Join("linux_"+arch, p.Name)] != sum(p) || sum(p) == "" {
					return fmt.Errorf("SBOM: %s's SHA-256 %q is not SHA256SUMS's", file, sum(p))
				}
				binaries[path.Join("linux_"+arch, p.Name)] = true
				if err := checkModules(file, children[p.SPDXID]["STATIC_LINK"], sum); err != nil {
					return err
				}
			default:
				debs++
				ok := false
				for _, r := range p.ExternalRefs {
					ok = ok || (r.ReferenceType == "purl" && strings.HasPrefix(r.ReferenceLocator, "pkg:deb/debian/"+p.Name+"@") &&
						(strings.Contains(r.ReferenceLocator, "arch="+debArch) || strings.Contains(r.ReferenceLocator, "arch=all")))
				}
				if !ok || p.VersionInfo == "" {
					return fmt.Errorf("SBOM: %s's Debian package %s %s has no Debian purl of architecture %s or all", arch, p.Name, p.VersionInfo, debArch)
				}
			}
		}
		if debs == 0 || bins == 0 {
			return fmt.Errorf("SBOM: the %s image has %d Debian packages and %d binaries", arch, debs, bins)
		}
	}
	for f := range sums {
		if strings.HasPrefix(f, "linux_") && !binaries[f] {
			return fmt.Errorf("SBOM: %s is not in it", f)
		}
	}
	return nil
}

// checkModules: every module of file's build information is linked, with
// its version and go.sum hash.
func checkModules(file string, linked []SPDXPackage, sum func(SPDXPackage) string) error {
	bi, err := readBuildInfo(file)
	if err != nil {
		return err
	}
	have := map[string]SPDXPackage{}
	for _, p := range linked {
		have[p.Name+"@"+p.VersionInfo] = p
	}
	for _, m := range append([]*debug.Module{{Path: "stdlib", Version: bi.GoVersion}}, bi.Deps...) {
		if m.Replace != nil {
			m = m.Replace
		}
		p, ok := have[m.Path+"@"+m.Version]
		if !ok {
			return fmt.Errorf("SBOM: %s links %s %s, which the SBOM does not list for it", file, m.Path, m.Version)
		}
		if h, ok := strings.CutPrefix(m.Sum, "h1:"); ok {
			raw, _ := base64.StdEncoding.DecodeString(h)
			if sum(p) != hex.EncodeToString(raw) {
				return fmt.Errorf("SBOM: %s %s: SHA-256 %s, go.sum's %s", m.Path, m.Version, sum(p), m.Sum)
			}
		}
	}
	return nil
}

// readImageIndex reads an OCI image layout tar whose index.json names one
// image index, and returns that index's digest and its manifests.
func readImageIndex(file string) (string, []v1.Descriptor, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	blobs := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", file, err)
		}
		if h.Size < 1<<20 { // the JSON documents, not the layers
			if blobs[h.Name], err = io.ReadAll(tr); err != nil {
				return "", nil, err
			}
		}
	}
	var top v1.Index
	if err := json.Unmarshal(blobs["index.json"], &top); err != nil || len(top.Manifests) != 1 || top.Manifests[0].MediaType != v1.MediaTypeImageIndex {
		return "", nil, fmt.Errorf("%s: index.json does not name one image index: %v %s", file, err, blobs["index.json"])
	}
	d := top.Manifests[0].Digest
	var idx v1.Index
	if err := json.Unmarshal(blobs["blobs/sha256/"+d.Encoded()], &idx); err != nil {
		return "", nil, fmt.Errorf("%s: image index %s: %w", file, d, err)
	}
	for _, m := range idx.Manifests {
		if m.Platform == nil || m.MediaType != v1.MediaTypeImageManifest {
			return "", nil, fmt.Errorf("%s: index entry %s: not an image manifest with a platform", file, m.Digest)
		}
	}
	return d.String(), idx.Manifests, nil
}
