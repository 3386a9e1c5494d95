package release

import (
	"bufio"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"path"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
)

// The SBOM is SPDX 2.3 JSON: an ISO/IEC standard (5962), the format Red Hat
// publishes for OpenShift and Kubernetes' release tooling writes, read by the
// common scanners (grype, trivy); its relationships say what is where: the
// image index CONTAINS one image per architecture, an image CONTAINS its
// Debian packages and binaries, a binary STATIC_LINKs its Go modules.

// SPDX is the part of an SPDX 2.3 document the release writes.
type SPDX struct {
	SPDXVersion       string           `json:"spdxVersion"`
	DataLicense       string           `json:"dataLicense"`
	SPDXID            string           `json:"SPDXID"`
	Name              string           `json:"name"`
	DocumentNamespace string           `json:"documentNamespace"`
	CreationInfo      SPDXCreationInfo `json:"creationInfo"`
	DocumentDescribes []string         `json:"documentDescribes"`
	Packages          []SPDXPackage    `json:"packages"`
	Relationships     []SPDXRelation   `json:"relationships"`
}

type SPDXCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type SPDXPackage struct {
	SPDXID                string            `json:"SPDXID"`
	Name                  string            `json:"name"`
	VersionInfo           string            `json:"versionInfo,omitempty"`
	DownloadLocation      string            `json:"downloadLocation"`
	FilesAnalyzed         bool              `json:"filesAnalyzed"`
	Supplier              string            `json:"supplier,omitempty"`
	SourceInfo            string            `json:"sourceInfo,omitempty"`
	PrimaryPackagePurpose string            `json:"primaryPackagePurpose,omitempty"`
	Checksums             []SPDXChecksum    `json:"checksums,omitempty"`
	ExternalRefs          []SPDXExternalRef `json:"externalRefs,omitempty"`
	Comment               string            `json:"comment,omitempty"`
}

type SPDXChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type SPDXExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type SPDXRelation struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

// DebPackage is an installed package of a root file system's dpkg status.
type DebPackage struct {
	Name, Version, Architecture, Source, Maintainer string
}

// DpkgStatus reads the installed packages of a dpkg status file, in its order.
func DpkgStatus(r io.Reader) ([]DebPackage, error) {
	var pkgs []DebPackage
	var cur DebPackage
	var status string
	flush := func() {
		if cur.Name != "" && strings.HasSuffix(status, " installed") {
			pkgs = append(pkgs, cur)
		}
		cur, status = DebPackage{}, ""
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			flush()
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			continue // a continuation of the field before
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("dpkg status: %q is not FIELD: VALUE", line)
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Package":
			cur.Name = v
		case "Version":
			cur.Version = v
		case "Architecture":
			cur.Architecture = v
		case "Source":
			cur.Source = v
		case "Maintainer":
			cur.Maintainer = v
		case "Status":
			status = v
		}
	}
	flush()
	return pkgs, sc.Err()
}

// SBOMArch is what one architecture's image holds.
type SBOMArch struct {
	Arch       string            // Go's name
	Platform   string            // os/arch[/variant]
	Manifest   string            // the image manifest's digest, sha256:...
	Binaries   map[string]string // base name → file
	Debian     []DebPackage
	DebianDist string // e.g. debian-12 (bookworm), for the purls
}

// SBOMInput is what WriteSBOM describes.
type SBOMInput struct {
	Name     string // the image's name, e.g. infradns
	Version  string
	Index    string // the image index's digest, sha256:...
	Created  string // RFC 3339
	Arches   []SBOMArch
	Source   string // where the source is, e.g. https://github.com/infradns/infradns
	ToolName string
}

var spdxIDBad = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// MakeSBOM makes the SPDX document of a release: the image index and each
// architecture's image, the Debian packages in each (name, version,
// architecture), each binary (its SHA-256) and the Go modules linked into
// the binaries (from their build information: versions and go.sum hashes).
func MakeSBOM(in SBOMInput) (*SPDX, error) {
	doc := &SPDX{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              in.Name + "-" + in.Version,
		DocumentNamespace: strings.TrimSuffix(in.Source, "/") + "/spdx/" + url.PathEscape(in.Version) + "/" + strings.TrimPrefix(in.Index, "sha256:"),
		CreationInfo:      SPDXCreationInfo{Created: in.Created, Creators: []string{"Tool: " + in.ToolName}},
	}
	used := map[string]bool{}
	id := func(parts ...string) string {
		base := "SPDXRef-" + strings.Trim(spdxIDBad.ReplaceAllString(strings.Join(parts, "-"), "-"), "-")
		s := base
		for n := 2; used[s]; n++ {
			s = fmt.Sprintf("%s-%d", base, n)
		}
		used[s] = true
		return s
	}
	rel := func(a, typ, b string) {
		doc.Relationships = append(doc.Relationships, SPDXRelation{SPDXElementID: a, RelationshipType: typ, RelatedSPDXElement: b})
	}
	purl := func(p string) []SPDXExternalRef {
		return []SPDXExternalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: p}}
	}
	sha := func(d string) []SPDXChecksum {
		return []SPDXChecksum{{Algorithm: "SHA256", ChecksumValue: strings.TrimPrefix(d, "sha256:")}}
	}
	imageID := id("Image", in.Name)
	doc.Packages = append(doc.Packages, SPDXPackage{SPDXID: imageID, Name: in.Name, VersionInfo: in.Version,
		DownloadLocation: "NOASSERTION", PrimaryPackagePurpose: "CONTAINER", Checksums: sha(in.Index),
		ExternalRefs: purl(ociPURL(in.Name, in.Index, url.Values{"tag": {in.Version}})),
		Comment:      "the multi-arch image index (OCI image layout archive); its checksum is the index's digest"})
	rel(doc.SPDXID, "DESCRIBES", imageID)
	doc.DocumentDescribes = append(doc.DocumentDescribes, imageID)

	modules := map[string]string{} // path@version → SPDX ID
	for _, a := range in.Arches {
		archID := id("Image", in.Name, a.Arch)
		doc.Packages = append(doc.Packages, SPDXPackage{SPDXID: archID, Name: in.Name, VersionInfo: in.Version,
			DownloadLocation: "NOASSERTION", PrimaryPackagePurpose: "CONTAINER", Checksums: sha(a.Manifest),
			ExternalRefs: purl(ociPURL(in.Name, a.Manifest, url.Values{"arch": {a.Arch}})),
			Comment:      "the " + a.Platform + " image; its checksum is the image manifest's digest"})
		rel(imageID, "CONTAINS", archID)
		for _, p := range a.Debian {
			pid := id("Deb", a.Arch, p.Name, p.Version)
			q := url.Values{"arch": {p.Architecture}}
			if a.DebianDist != "" {
				q.Set("distro", a.DebianDist)
			}
			pkg := SPDXPackage{SPDXID: pid, Name: p.Name, VersionInfo: p.Version, DownloadLocation: "NOASSERTION",
				ExternalRefs: purl("pkg:deb/debian/" + url.PathEscape(p.Name) + "@" + url.PathEscape(p.Version) + "?" + q.Encode()),
				Comment:      "Debian package, architecture " + p.Architecture}
			if p.Source != "" {
				pkg.SourceInfo = "built from Debian source package " + p.Source
			}
			doc.Packages = append(doc.Packages, pkg)
			rel(archID, "CONTAINS", pid)
		}
		for _, b := range slices.Sorted(mapKeys(a.Binaries)) {
			file := a.Binaries[b]
			sum, err := fileSHA256(file)
			if err != nil {
				return nil, err
			}
			bi, err := readBuildInfo(file)
			if err != nil {
				return nil, err
			}
			bid := id("Binary", a.Arch, b)
			doc.Packages = append(doc.Packages, SPDXPackage{SPDXID: bid, Name: b, VersionInfo: in.Version,
				DownloadLocation: "NOASSERTION", PrimaryPackagePurpose: "APPLICATION", FilesAnalyzed: false,
				Checksums:    sha(sum),
				ExternalRefs: purl("pkg:golang/" + bi.Path + "@" + url.PathEscape(in.Version) + "?" + url.Values{"goos": {"linux"}, "goarch": {a.Arch}}.Encode()),
				Comment:      "linux_" + a.Arch + "/" + b + ", " + bi.GoVersion + ", main package " + bi.Path})
			rel(archID, "CONTAINS", bid)
			doc.DocumentDescribes = append(doc.DocumentDescribes, bid)
			rel(doc.SPDXID, "DESCRIBES", bid)
			deps := append([]*debug.Module{{Path: "stdlib", Version: bi.GoVersion}}, bi.Deps...)
			for _, m := range deps {
				if m.Replace != nil {
					m = m.Replace
				}
				key := m.Path + "@" + m.Version
				mid, ok := modules[key]
				if !ok {
					mid = id("Go", m.Path, m.Version)
					modules[key] = mid
					pkg := SPDXPackage{SPDXID: mid, Name: m.Path, VersionInfo: m.Version, DownloadLocation: "NOASSERTION",
						PrimaryPackagePurpose: "LIBRARY", ExternalRefs: purl("pkg:golang/" + m.Path + "@" + url.PathEscape(m.Version))}
					if m.Path == "stdlib" {
						pkg.Comment = "the Go standard library and runtime"
					}
					if h, ok := strings.CutPrefix(m.Sum, "h1:"); ok {
						raw, err := base64.StdEncoding.DecodeString(h)
						if err != nil || len(raw) != 32 {
							return nil, fmt.Errorf("%s: module %s: go.sum hash %q", file, key, m.Sum)
						}
						pkg.Checksums = sha(hex.EncodeToString(raw))
						pkg.Comment = "go.sum " + m.Sum + ": the SHA-256 is the module's dirhash (golang.org/x/mod/sumdb/dirhash Hash1), not of one file"
					}
					doc.Packages = append(doc.Packages, pkg)
				}
				rel(bid, "STATIC_LINK", mid)
			}
		}
	}
	return doc, nil
}

// ociPURL is the package URL of the image name (without its tag) at digest
// d: pkg:oci/NAME@sha256%3A...?repository_url=REGISTRY/PATH/NAME.
func ociPURL(name, d string, q url.Values) string {
	if strings.Contains(name, "/") {
		q.Set("repository_url", name)
	}
	return "pkg:oci/" + url.PathEscape(path.Base(name)) + "@" + strings.ReplaceAll(d, ":", "%3A") + "?" + q.Encode()
}

func readBuildInfo(file string) (*debug.BuildInfo, error) {
	bi, err := buildinfo.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: no Go build information: %w", file, err)
	}
	return bi, nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
