package image

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	digest "github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestPlatform(t *testing.T) {
	for _, tc := range []struct{ goarch, want, deb string }{
		{"amd64", "linux/amd64", "amd64"},
		{"arm64", "linux/arm64/v8", "arm64"},
		{"ppc64le", "linux/ppc64le", "ppc64el"},
		{"s390x", "linux/s390x", "s390x"},
	} {
		p, deb, err := Platform(tc.goarch)
		if err != nil || PlatformString(p) != tc.want || deb != tc.deb {
			t.Errorf("Platform(%s) = %s, %s, %v; want %s, %s", tc.goarch, PlatformString(p), deb, err, tc.want, tc.deb)
		}
	}
	if _, _, err := Platform("riscv64"); err == nil {
		t.Error("Platform(riscv64): no error")
	}
}

// TestWriteIndexLayout: a two-architecture image with gzip-compressed layers
// read back as a registry client would: index.json → the image index →
// one manifest per platform → config (its platform, the diff IDs of the
// uncompressed layers) and layers; the gzip headers carry no name or time;
// the same inputs give the same bytes.
func TestWriteIndexLayout(t *testing.T) {
	dir := t.TempDir()
	var images []Image
	layers := map[string][]byte{} // uncompressed, by arch
	for _, arch := range []string{"amd64", "arm64"} {
		rootfs := filepath.Join(dir, arch+"-rootfs.tar")
		writeTar(t, rootfs, []string{"./", "./etc/", "./etc/" + arch})
		base := filepath.Join(dir, arch+"-base.tar")
		r, _ := os.Open(rootfs)
		if err := writeFile(base, func(w *os.File) error { return CopyBaseLayer(w, r) }); err != nil {
			t.Fatal(err)
		}
		r.Close()
		layers[arch], _ = os.ReadFile(base)
		l, err := GzipLayer(base+".gz", base, "base "+arch)
		if err != nil {
			t.Fatal(err)
		}
		p, _, _ := Platform(arch)
		images = append(images, Image{Platform: p, Final: Final{User: "65532:65532"}, Layers: []Layer{l}})
	}
	write := func() []byte {
		var out bytes.Buffer
		if _, _, err := WriteIndexLayout(&out, "quay.io/infradns/infradns:v1", images, time.Unix(1.7e9, 0)); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	out := write()
	if !bytes.Equal(out, write()) {
		t.Error("two writes of the same image differ")
	}
	hs, blobs := readTar(t, bytes.NewReader(out))
	for name, h := range hs {
		if h.ModTime.Unix() != 1.7e9 || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mtime %v uid %d gid %d", name, h.ModTime, h.Uid, h.Gid)
		}
	}
	blob := func(d v1.Descriptor) []byte {
		t.Helper()
		b, ok := blobs["blobs/sha256/"+d.Digest.Encoded()]
		if !ok || int64(len(b)) != d.Size || digest.FromBytes(b) != d.Digest {
			t.Fatalf("blob %s (%d bytes): missing or not matching its descriptor", d.Digest, d.Size)
		}
		return b
	}
	var top v1.Index
	if err := json.Unmarshal(blobs["index.json"], &top); err != nil || len(top.Manifests) != 1 {
		t.Fatalf("index.json %s: %v", blobs["index.json"], err)
	}
	if d := top.Manifests[0]; d.MediaType != v1.MediaTypeImageIndex || d.Annotations["io.containerd.image.name"] != "quay.io/infradns/infradns:v1" ||
		d.Annotations[v1.AnnotationRefName] != "v1" || d.Platform != nil {
		t.Errorf("index.json's entry %+v: want the image index, named", d)
	}
	var idx v1.Index
	if err := json.Unmarshal(blob(top.Manifests[0]), &idx); err != nil || len(idx.Manifests) != 2 || idx.MediaType != v1.MediaTypeImageIndex {
		t.Fatalf("image index %+v: %v", idx, err)
	}
	for i, md := range idx.Manifests {
		arch := []string{"amd64", "arm64"}[i]
		want, _, _ := Platform(arch)
		if md.MediaType != v1.MediaTypeImageManifest || md.Platform == nil || PlatformString(*md.Platform) != PlatformString(want) {
			t.Fatalf("index entry %d: %+v, want a manifest for %s", i, md, PlatformString(want))
		}
		var man v1.Manifest
		if err := json.Unmarshal(blob(md), &man); err != nil || len(man.Layers) != 1 {
			t.Fatalf("%s manifest: %v %+v", arch, err, man)
		}
		var cfg v1.Image
		if err := json.Unmarshal(blob(man.Config), &cfg); err != nil {
			t.Fatal(err)
		}
		if PlatformString(cfg.Platform) != PlatformString(want) || cfg.Created.Unix() != 1.7e9 {
			t.Errorf("%s config: platform %s, created %v", arch, PlatformString(cfg.Platform), cfg.Created)
		}
		l := man.Layers[0]
		gz := blob(l)
		if l.MediaType != v1.MediaTypeImageLayerGzip || cfg.RootFS.DiffIDs[0] != digest.FromBytes(layers[arch]) {
			t.Errorf("%s layer %s, diff ID %s: want gzip of the tar whose digest is %s", arch, l.MediaType, cfg.RootFS.DiffIDs[0], digest.FromBytes(layers[arch]))
		}
		// RFC 1952: FLG (byte 3) without FNAME/FCOMMENT, MTIME (bytes 4-7) zero.
		if gz[3]&(0x08|0x10) != 0 || !bytes.Equal(gz[4:8], []byte{0, 0, 0, 0}) {
			t.Errorf("%s layer's gzip header % x: a name or a time", arch, gz[:10])
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatal(err)
		}
		tarData, _ := io.ReadAll(zr)
		if !bytes.Equal(tarData, layers[arch]) {
			t.Errorf("%s layer: gunzipped is not the layer tar", arch)
		}
		if lh, _ := readTar(t, bytes.NewReader(tarData)); lh["etc/"+arch] == nil {
			t.Errorf("%s layer holds %v", arch, keys(lh))
		}
	}
	images[1].Platform = images[0].Platform
	if _, _, err := WriteIndexLayout(io.Discard, "x", images, time.Unix(0, 0)); err == nil || !strings.Contains(err.Error(), "two images for linux/amd64") {
		t.Errorf("two images of one platform: %v", err)
	}
}

func TestLayerFiles(t *testing.T) {
	file := filepath.Join(t.TempDir(), "l.tar")
	writeTar(t, file, []string{"./", "./etc/", "./etc/os-release", "./etc/other"})
	got, err := LayerFiles(file, "etc/os-release", "var/lib/dpkg/status")
	if err != nil || len(got) != 1 || string(got["etc/os-release"]) != "./etc/os-release" {
		t.Errorf("LayerFiles: %q, %v", got, err)
	}
}
