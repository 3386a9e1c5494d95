package release

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/deploy/image"
)

var root = func() string { r, _ := filepath.Abs("../.."); return r }()

func TestDpkgStatus(t *testing.T) {
	status := `Package: base-files
Essential: yes
Status: install ok installed
Priority: required
Architecture: arm64
Version: 12.4+deb12u12
Description: Debian base system miscellaneous files
 This package contains the basic filesystem hierarchy
 .
 with a continuation: that looks like a field

Package: gone
Status: deinstall ok config-files
Architecture: arm64
Version: 1.0

Package: libcap2
Status: install ok installed
Architecture: arm64
Source: libcap2 (1:2.66-4)
Version: 1:2.66-4+deb12u1
`
	got, err := DpkgStatus(strings.NewReader(status))
	if err != nil {
		t.Fatal(err)
	}
	want := []DebPackage{
		{Name: "base-files", Version: "12.4+deb12u12", Architecture: "arm64"},
		{Name: "libcap2", Version: "1:2.66-4+deb12u1", Architecture: "arm64", Source: "libcap2 (1:2.66-4)"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("DpkgStatus:\n got %+v\nwant %+v", got, want)
	}
}

func TestSums(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "linux_arm64"), 0o755)
	os.WriteFile(filepath.Join(dir, "linux_arm64", "infradns"), []byte("binary"), 0o755)
	os.WriteFile(filepath.Join(dir, "a.json"), []byte("{}"), 0o644)
	if err := WriteSums(dir); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, SumsFile))
	want := "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a  a.json\n" +
		"9a3a45d01531a20e89ac6ae10b0b0beb0492acd7216a368aa062d1a5fecaf9cd  linux_arm64/infradns\n"
	if string(data) != want {
		t.Errorf("SHA256SUMS:\n%s\nwant (sha256sum's format, sorted):\n%s", data, want)
	}
	if _, err := CheckSums(dir); err != nil {
		t.Error(err)
	}
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sha256sum", "-c", "--quiet", SumsFile)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c: %v\n%s", err, out)
		}
	}
	os.WriteFile(filepath.Join(dir, "extra"), nil, 0o644)
	if _, err := CheckSums(dir); err == nil || !strings.Contains(err.Error(), "extra is not in SHA256SUMS") {
		t.Errorf("an unlisted file: %v", err)
	}
	os.Remove(filepath.Join(dir, "extra"))
	os.WriteFile(filepath.Join(dir, "a.json"), []byte("[]"), 0o644)
	if _, err := CheckSums(dir); err == nil || !strings.Contains(err.Error(), "a.json: SHA-256") {
		t.Errorf("a changed file: %v", err)
	}
}

// qemu is the emulator that runs Go's goarch here, "" for this machine's.
var qemu = map[string]string{"amd64": "qemu-x86_64-static", "arm64": "qemu-aarch64-static", "ppc64le": "qemu-ppc64le-static", "s390x": "qemu-s390x-static"}

// TestRelease cross-builds the real infradns for every release architecture
// as make release does (static, -trimpath, the version in the ldflags), runs
// `infradns -version` of each under qemu-user-static, then makes a release
// directory of them with the real Dockerfile and small Debian layers (a
// dpkg status of that architecture, put where the mmdebstrap cache keeps
// the real ones): the image index, SBOM and SHA256SUMS pass Check, a second
// build gives the same digests, and a changed binary or SBOM fails Check.
func TestRelease(t *testing.T) {
	const version = "v9.8.7-test"
	work := t.TempDir()
	bins := filepath.Join(work, "bins")
	start := time.Now()
	for _, arch := range Arches {
		out := filepath.Join(bins, arch, "infradns")
		for _, pkg := range []string{"./cmd/infradns", "./deploy/release/testdata/standin"} {
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version, "-o", filepath.Join(bins, arch, path.Base(pkg)), pkg)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("GOARCH=%s go build %s: %v\n%s", arch, pkg, err, b)
			}
		}
		run := []string{out, "-version"}
		if arch != runtime.GOARCH {
			q, err := exec.LookPath(qemu[arch])
			if err != nil {
				t.Fatalf("%s is needed to run the %s binary: install the Debian package qemu-user-static (make deps; hack/install-deps.sh): %v", qemu[arch], arch, err)
			}
			run = append([]string{q}, run...)
		}
		b, err := exec.Command(run[0], run[1:]...).CombinedOutput()
		if err != nil || strings.TrimSpace(string(b)) != version {
			t.Fatalf("%s: %q, %v; want %s", strings.Join(run, " "), b, err, version)
		}
		t.Logf("linux/%s: %s -version: %s", arch, filepath.Base(run[0]), strings.TrimSpace(string(b)))
	}
	t.Logf("4 cross-builds and runs: %.1f s", time.Since(start).Seconds())

	// The Debian layers, where BuildIndex finds them built.
	cache := filepath.Join(work, "cache")
	os.MkdirAll(cache, 0o755)
	dockerfile := filepath.Join(root, "Dockerfile")
	for _, arch := range Arches {
		layer, err := image.CachedDebianLayer(cache, dockerfile, arch)
		if err != nil {
			t.Fatal(err)
		}
		_, deb, _ := image.Platform(arch)
		writeLayer(t, layer, map[string]string{
			"usr/lib/os-release": "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nVERSION_ID=\"12\"\n",
			"var/lib/dpkg/status": "Package: base-files\nStatus: install ok installed\nArchitecture: " + deb + "\nVersion: 12.4+deb12u12\n\n" +
				"Package: ca-certificates\nStatus: install ok installed\nArchitecture: all\nVersion: 20230311+deb12u1\n",
		})
	}
	build := func(dir string) string {
		t.Helper()
		for _, arch := range Arches {
			d := filepath.Join(dir, "linux_"+arch)
			os.MkdirAll(d, 0o755)
			// A small Go program stands in for make build's binaries here:
			// cross-building CoreDNS four times would take minutes, and
			// compressing 50 MB binaries for eight images under -race as
			// long (the real infradns's SBOM is checked below).
			for b, src := range map[string]string{"coredns": "standin", "infradns": "standin", "mdns-publisher": "standin"} {
				data, err := os.ReadFile(filepath.Join(bins, arch, src))
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(d, b), data, 0o755)
			}
		}
		var logs bytes.Buffer
		index, err := Build(Options{Dir: dir, Version: version, Name: "infradns:" + version, Dockerfile: dockerfile, Cache: cache,
			Arches: Arches, Created: time.Unix(1.75e9, 0), Source: "https://github.com/infradns/infradns", Log: log.New(&logs, "", 0)})
		if err != nil {
			t.Fatalf("release: %v\n%s", err, logs.String())
		}
		if err := Check(dir, version); err != nil {
			t.Fatalf("Check: %v", err)
		}
		return index
	}
	dir1, dir2 := filepath.Join(work, "r1"), filepath.Join(work, "r2")
	start = time.Now()
	index := build(dir1)
	if again := build(dir2); again != index {
		t.Errorf("two builds: image index %s, then %s", index, again)
	}
	t.Logf("two release builds: %.1f s, image index %s", time.Since(start).Seconds(), index)
	s1, _ := os.ReadFile(filepath.Join(dir1, SumsFile))
	s2, _ := os.ReadFile(filepath.Join(dir2, SumsFile))
	if !bytes.Equal(s1, s2) {
		t.Errorf("two builds, two SHA256SUMS:\n%s\n%s", s1, s2)
	}
	for _, f := range []string{ImageFile(version), SBOMFile(version), SumsFile, "linux_s390x/infradns"} {
		if !strings.Contains(string(s1), "  "+f+"\n") && f != SumsFile {
			t.Errorf("SHA256SUMS has no %s:\n%s", f, s1)
		}
	}

	// What the SBOM says of one architecture.
	var doc SPDX
	data, _ := os.ReadFile(filepath.Join(dir1, SBOMFile(version)))
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	purls := map[string]bool{}
	for _, p := range doc.Packages {
		for _, r := range p.ExternalRefs {
			purls[r.ReferenceLocator] = true
		}
	}
	for _, want := range []string{
		"pkg:deb/debian/base-files@12.4+deb12u12?arch=ppc64el&distro=debian-12",
		"pkg:deb/debian/ca-certificates@20230311+deb12u1?arch=all&distro=debian-12",
		"pkg:golang/github.com/infradns/infradns/deploy/release/testdata/standin@" + version + "?goarch=arm64&goos=linux",
		"pkg:golang/stdlib@" + runtime.Version(),
		"pkg:oci/infradns@" + strings.Replace(index, ":", "%3A", 1) + "?tag=" + version,
	} {
		if !purls[want] {
			t.Errorf("SBOM has no package %s", want)
		}
	}

	// The real infradns of each architecture: every Go module it links is
	// in its SBOM with its version and go.sum hash.
	var archs []SBOMArch
	for _, arch := range Arches {
		archs = append(archs, SBOMArch{Arch: arch, Platform: "linux/" + arch, Manifest: index,
			Binaries: map[string]string{"infradns": filepath.Join(bins, arch, "infradns")}})
	}
	real, err := MakeSBOM(SBOMInput{Name: "infradns", Version: version, Index: index, Created: "2025-06-15T16:00:00Z",
		Source: "https://github.com/infradns/infradns", ToolName: "test", Arches: archs})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]SPDXPackage{}
	for _, p := range real.Packages {
		ids[p.SPDXID] = p
	}
	linked := map[string][]SPDXPackage{}
	for _, r := range real.Relationships {
		if r.RelationshipType == "STATIC_LINK" {
			linked[r.SPDXElementID] = append(linked[r.SPDXElementID], ids[r.RelatedSPDXElement])
		}
	}
	sha := func(p SPDXPackage) string {
		if len(p.Checksums) == 0 {
			return ""
		}
		return p.Checksums[0].ChecksumValue
	}
	for _, arch := range Arches {
		id := "SPDXRef-Binary-" + arch + "-infradns"
		if err := checkModules(filepath.Join(bins, arch, "infradns"), linked[id], sha); err != nil {
			t.Error(err)
		}
		withSum := 0
		for _, p := range linked[id] {
			if sha(p) != "" {
				withSum++
			}
		}
		if withSum < 10 {
			t.Errorf("%s: %d modules with a go.sum hash of %d linked: the real infradns has more", id, withSum, len(linked[id]))
		}
	}

	// Check fails on a changed binary (its sum, even rewritten, is not the SBOM's) and on an SBOM without a module.
	bin := filepath.Join(dir2, "linux_arm64", "mdns-publisher")
	os.WriteFile(bin, []byte("not the release's"), 0o755)
	if err := Check(dir2, version); err == nil || !strings.Contains(err.Error(), "linux_arm64/mdns-publisher: SHA-256") {
		t.Errorf("Check with a changed binary: %v", err)
	}
	WriteSums(dir2)
	if err := Check(dir2, version); err == nil || !strings.Contains(err.Error(), "mdns-publisher's SHA-256") {
		t.Errorf("Check with a changed binary and new sums: %v", err)
	}
	sbom := filepath.Join(dir1, SBOMFile(version))
	os.WriteFile(sbom, bytes.Replace(data, []byte(`"relationshipType": "STATIC_LINK"`), []byte(`"relationshipType": "OTHER"`), 1), 0o644)
	WriteSums(dir1)
	if err := Check(dir1, version); err == nil || !strings.Contains(err.Error(), "which the SBOM does not list") {
		t.Errorf("Check with a module missing from the SBOM: %v", err)
	}
}

func writeLayer(t *testing.T, file string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"usr/lib/os-release", "var/lib/dpkg/status"} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(files[name]))})
		io.WriteString(tw, files[name])
	}
	tw.Close()
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
