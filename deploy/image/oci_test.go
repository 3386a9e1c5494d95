package image

import (
	"archive/tar"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	digest "github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"
)

// TestReadFinal: what the OCI build takes from the real Dockerfile is what
// the Dockerfile says (the packages, make build's binaries, the file
// capability, the labels with VERSION, user, entrypoint and command).
func TestReadFinal(t *testing.T) {
	f, err := ReadFinal(readDockerfile(t), map[string]string{"VERSION": "v9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	if f.Base != "debian:bookworm-slim" {
		t.Errorf("base %q", f.Base)
	}
	if !slices.Equal(f.Packages, wantPackages) {
		t.Errorf("packages %v, want %v", f.Packages, wantPackages)
	}
	if bins := makeBinaries(t); !slices.Equal(slices.Sorted(slices.Values(f.Binaries)), slices.Sorted(slices.Values(bins))) || f.BinDir != "/usr/bin" {
		t.Errorf("binaries %v in %s, want make build's %v in /usr/bin", f.Binaries, f.BinDir, bins)
	}
	if len(f.FileCaps) != 1 || f.FileCaps["/usr/bin/coredns"] != "cap_net_bind_service=+ep" {
		t.Errorf("file capabilities %v", f.FileCaps)
	}
	if f.Labels["org.opencontainers.image.version"] != "v9.9.9" || f.Labels["org.opencontainers.image.licenses"] != "Apache-2.0" {
		t.Errorf("labels %v", f.Labels)
	}
	for k := range wantLabels {
		if f.Labels[k] == "" {
			t.Errorf("label %s missing: %v", k, f.Labels)
		}
	}
	if f.User != "65532:65532" || !slices.Equal(f.Entrypoint, []string{"/usr/bin/coredns"}) ||
		!slices.Equal(f.Cmd, []string{"-conf", "/etc/infradns/Corefile"}) {
		t.Errorf("user %q entrypoint %q cmd %q", f.User, f.Entrypoint, f.Cmd)
	}
	// Without the build argument, the ARG's default.
	f, err = ReadFinal(readDockerfile(t), nil)
	if err != nil || f.Labels["org.opencontainers.image.version"] != "dev" {
		t.Errorf("default VERSION: label %q, %v", f.Labels["org.opencontainers.image.version"], err)
	}
}

// TestReadFinalRefuses: a final-stage step the OCI build would not
// reproduce is an error, not silently left out of the image.
func TestReadFinalRefuses(t *testing.T) {
	good := string(readDockerfile(t))
	tests := []struct{ name, old, new, want string }{
		{"another RUN step", "RUN setcap", "RUN useradd x && setcap", `RUN step "useradd x"`},
		{"COPY from the context", "COPY --from=build", "COPY", "not --from=build"},
		{"shell-form entrypoint", `ENTRYPOINT ["/usr/bin/coredns"]`, "ENTRYPOINT /usr/bin/coredns", "ENTRYPOINT in shell form"},
		{"WORKDIR", "USER 65532:65532", "WORKDIR /x\nUSER 65532:65532", "workdir in the final stage"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(good, tc.old) {
				t.Fatalf("the Dockerfile no longer contains %q", tc.old)
			}
			_, err := ReadFinal([]byte(strings.Replace(good, tc.old, tc.new, 1)), nil)
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.want)) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCapabilityXattr(t *testing.T) {
	tests := []struct {
		text, hex string // hex: what setcap writes (getfattr -e hex -n security.capability)
		err       bool
	}{
		{text: "cap_net_bind_service=+ep", hex: "0100000200040000000000000000000000000000"},
		{text: "cap_net_admin,cap_net_raw=ep", hex: "0100000200300000000000000000000000000000"},
		{text: "cap_net_raw=p", hex: "0000000200200000000000000000000000000000"},
		{text: "cap_net_raw=+i", hex: "0000000200000000002000000000000000000000"},
		{text: "cap_bogus=+ep", err: true},
		{text: "cap_net_raw", err: true},
		{text: "cap_net_raw=+e", err: true},
		{text: "cap_net_raw=+x", err: true},
	}
	for _, tc := range tests {
		b, err := CapabilityXattr(tc.text)
		if tc.err {
			if err == nil {
				t.Errorf("%q: no error", tc.text)
			}
			continue
		}
		if err != nil || hex.EncodeToString(b) != tc.hex {
			t.Errorf("%q: %x, %v; want %s", tc.text, b, err, tc.hex)
		}
	}
}

// TestCapabilityXattrMatchesSetcap: libcap's own setcap writes the same
// bytes (needs root, as make test runs: CAP_SETFCAP).
func TestCapabilityXattrMatchesSetcap(t *testing.T) {
	setcap, err := exec.LookPath("setcap")
	if err != nil {
		setcap = "/usr/sbin/setcap"
	}
	for _, text := range []string{"cap_net_bind_service=+ep", "cap_net_admin,cap_net_raw=ep", "cap_ipc_lock=p"} {
		file := filepath.Join(t.TempDir(), "bin")
		if err := os.WriteFile(file, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(setcap, text, file).CombinedOutput(); err != nil {
			t.Fatalf("setcap %s (libcap2-bin, as root): %v\n%s", text, err, out)
		}
		got := make([]byte, 64)
		n, err := unix.Getxattr(file, "security.capability", got)
		if err != nil {
			t.Fatal(err)
		}
		want, err := CapabilityXattr(text)
		if err != nil || !bytes.Equal(got[:n], want) {
			t.Errorf("%s: setcap wrote %x, CapabilityXattr %x (%v)", text, got[:n], want, err)
		}
	}
}

func TestImageName(t *testing.T) {
	for in, want := range map[string]string{
		"infradns:dev":                     "docker.io/library/infradns:dev",
		"infradns":                         "docker.io/library/infradns:latest",
		"me/infradns:v1":                   "docker.io/me/infradns:v1",
		"quay.io/infradns/infradns:v0.1.0": "quay.io/infradns/infradns:v0.1.0",
		"localhost/x:y":                    "localhost/x:y",
		"registry:5000/x":                  "registry:5000/x:latest",
		"registry.k8s.io/pause:3.10":       "registry.k8s.io/pause:3.10",
	} {
		if got := ImageName(in); got != want {
			t.Errorf("ImageName(%q) = %q, want %q", in, got, want)
		}
	}
}

// writeTar writes entries (name → content, "" for a directory when the name
// ends in /) plus one character device, as mmdebstrap's output has.
func writeTar(t *testing.T, file string, entries []string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e))}
		if strings.HasSuffix(e, "/") {
			h.Typeflag, h.Size, h.Mode = tar.TypeDir, 0, 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(e))
		}
	}
	tw.WriteHeader(&tar.Header{Name: "./dev/null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3, Mode: 0o666})
	tw.Close()
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readTar returns a tar's headers by name and contents.
func readTar(t *testing.T, r io.Reader) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	hs, data := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hs, data
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		hs[h.Name], data[h.Name] = h, b
	}
}

// TestWriteLayout builds a two-layer image from a small root file system and
// a binary with a file capability, and reads it back as a runtime would:
// index → manifest → config and layers, every digest checked.
func TestWriteLayout(t *testing.T) {
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs.tar")
	writeTar(t, rootfs, []string{"./", "./dev/", "./etc/", "./etc/os-release"})
	base := filepath.Join(dir, "base.tar")
	r, _ := os.Open(rootfs)
	if err := writeFile(base, func(w *os.File) error { return CopyBaseLayer(w, r) }); err != nil {
		t.Fatal(err)
	}
	r.Close()
	bin := filepath.Join(dir, "coredns")
	os.WriteFile(bin, []byte("\x7fELF binary"), 0o755)
	files := filepath.Join(dir, "files.tar")
	if err := writeFile(files, func(w *os.File) error {
		return WriteFilesLayer(w, []File{{Path: "/usr/bin/coredns", Mode: 0o755, Src: bin, Caps: "cap_net_bind_service=+ep"}})
	}); err != nil {
		t.Fatal(err)
	}
	f := Final{User: "65532:65532", Entrypoint: []string{"/usr/bin/coredns"}, Cmd: []string{"-conf", "/c"},
		Labels: map[string]string{"org.opencontainers.image.version": "v1"}}
	var out bytes.Buffer
	if err := WriteLayout(&out, "quay.io/infradns/infradns:v1", f, []Layer{{File: base}, {File: files}}, time.Unix(1e9, 0)); err != nil {
		t.Fatal(err)
	}
	_, blobs := readTar(t, &out)
	var layout v1.ImageLayout
	if err := json.Unmarshal(blobs["oci-layout"], &layout); err != nil || layout.Version != v1.ImageLayoutVersion {
		t.Fatalf("oci-layout %s: %v", blobs["oci-layout"], err)
	}
	blob := func(d v1.Descriptor) []byte {
		t.Helper()
		b, ok := blobs["blobs/sha256/"+d.Digest.Encoded()]
		if !ok || int64(len(b)) != d.Size || digest.FromBytes(b) != d.Digest {
			t.Fatalf("blob %s (%d bytes): missing or not matching its descriptor", d.Digest, d.Size)
		}
		return b
	}
	var index v1.Index
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json %s: %v", blobs["index.json"], err)
	}
	md := index.Manifests[0]
	if md.Annotations["io.containerd.image.name"] != "quay.io/infradns/infradns:v1" || md.Annotations[v1.AnnotationRefName] != "v1" {
		t.Errorf("manifest annotations %v", md.Annotations)
	}
	var man v1.Manifest
	if err := json.Unmarshal(blob(md), &man); err != nil || len(man.Layers) != 2 {
		t.Fatalf("manifest: %v %+v", err, man)
	}
	var cfg v1.Image
	if err := json.Unmarshal(blob(man.Config), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != f.User || !slices.Equal(cfg.Config.Entrypoint, f.Entrypoint) || !slices.Equal(cfg.Config.Cmd, f.Cmd) ||
		cfg.Config.Labels["org.opencontainers.image.version"] != "v1" || cfg.OS != "linux" {
		t.Errorf("config %+v", cfg)
	}
	if len(cfg.RootFS.DiffIDs) != 2 {
		t.Fatalf("diff IDs %v", cfg.RootFS.DiffIDs)
	}
	for i, l := range man.Layers {
		if l.MediaType != v1.MediaTypeImageLayer || cfg.RootFS.DiffIDs[i] != l.Digest {
			t.Errorf("layer %d: %s %s, diff ID %s (uncompressed: they must be equal)", i, l.MediaType, l.Digest, cfg.RootFS.DiffIDs[i])
		}
	}
	hs, _ := readTar(t, bytes.NewReader(blob(man.Layers[0])))
	if _, ok := hs["etc/os-release"]; !ok || hs["dev/"] == nil || hs["dev/null"] != nil || hs["./"] != nil {
		t.Errorf("base layer entries %v: want etc/os-release and dev/ without ./ or device nodes", keys(hs))
	}
	hs, data := readTar(t, bytes.NewReader(blob(man.Layers[1])))
	h := hs["usr/bin/coredns"]
	if h == nil || hs["usr/"] == nil || hs["usr/bin/"] == nil || string(data["usr/bin/coredns"]) != "\x7fELF binary" || h.Mode != 0o755 {
		t.Fatalf("files layer %v", keys(hs))
	}
	want, _ := CapabilityXattr("cap_net_bind_service=+ep")
	if h.PAXRecords["SCHILY.xattr.security.capability"] != string(want) {
		t.Errorf("coredns's capability record %q, want %q", h.PAXRecords["SCHILY.xattr.security.capability"], want)
	}
}

func keys[V any](m map[string]V) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
}
