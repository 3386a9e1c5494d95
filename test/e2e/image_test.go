//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/infradns/infradns/deploy/image"
	"github.com/infradns/infradns/internal/nodecfg"
	"github.com/infradns/infradns/test/e2e/lab"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// ociImage is an image layout tar read back: its config and the files of
// its layers merged in order (later layers win).
type ociImage struct {
	config  v1.Image
	headers map[string]*tar.Header
	files   map[string][]byte // only the ones asked for
}

func readOCI(t *testing.T, file string, want func(name string) bool) ociImage {
	t.Helper()
	blobs := map[string][]byte{}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Blobs are small except the layers, which are read again below.
	var layerFiles = map[string]bool{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Size < 1<<20 {
			b, _ := io.ReadAll(tr)
			blobs[h.Name] = b
		} else {
			layerFiles[h.Name] = true
		}
	}
	var index v1.Index
	var man v1.Manifest
	img := ociImage{headers: map[string]*tar.Header{}, files: map[string][]byte{}}
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v", err)
	}
	if err := json.Unmarshal(blobs["blobs/sha256/"+index.Manifests[0].Digest.Encoded()], &man); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(blobs["blobs/sha256/"+man.Config.Digest.Encoded()], &img.config); err != nil {
		t.Fatal(err)
	}
	for _, l := range man.Layers {
		name := "blobs/sha256/" + l.Digest.Encoded()
		var r io.Reader
		if b, ok := blobs[name]; ok {
			r = bytes.NewReader(b)
		} else if layerFiles[name] {
			f.Seek(0, io.SeekStart)
			outer := tar.NewReader(f)
			for {
				h, err := outer.Next()
				if err != nil {
					t.Fatalf("layer %s: %v", name, err)
				}
				if h.Name == name {
					r = outer
					break
				}
			}
		} else {
			t.Fatalf("layer %s is not in the archive", name)
		}
		lr := tar.NewReader(r)
		for {
			h, err := lr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			n := "/" + strings.TrimSuffix(h.Name, "/")
			img.headers[n] = h
			if want(n) {
				b, _ := io.ReadAll(lr)
				img.files[n] = b
			}
		}
	}
	return img
}

// resolve follows symbolic links (the /bin → usr/bin of a merged /usr) in
// the image's tree.
func (img ociImage) resolve(p string) (*tar.Header, string) {
	for range 10 {
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		cur := ""
		changed := false
		for i, part := range parts {
			cur += "/" + part
			h := img.headers[cur]
			if h == nil {
				return nil, p
			}
			if h.Typeflag == tar.TypeSymlink {
				target := h.Linkname
				if !path.IsAbs(target) {
					target = path.Join(path.Dir(cur), target)
				}
				p = path.Join(append([]string{target}, parts[i+1:]...)...)
				changed = true
				break
			}
		}
		if !changed {
			return img.headers[p], p
		}
	}
	return nil, p
}

// TestImageOCIMatchesDockerfile: the image make image-oci builds holds what
// the Dockerfile's final stage says: its Debian packages installed, make
// build's binaries byte for byte with coredns's file capability, every
// command the rendered static pods run, and the Dockerfile's user,
// entrypoint, command and labels.
func TestImageOCIMatchesDockerfile(t *testing.T) {
	root, err := lab.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	archive, _ := klImages(t, klPause)
	final, err := image.ReadFinal(mustRead(t, filepath.Join(root, "Dockerfile")), map[string]string{"VERSION": "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	img := readOCI(t, archive, func(n string) bool {
		return n == "/var/lib/dpkg/status" || strings.HasPrefix(n, final.BinDir+"/") && slices.Contains(final.Binaries, path.Base(n))
	})

	c := img.config.Config
	if c.User != final.User || !slices.Equal(c.Entrypoint, final.Entrypoint) || !slices.Equal(c.Cmd, final.Cmd) {
		t.Errorf("config user %q entrypoint %q cmd %q, Dockerfile %q %q %q", c.User, c.Entrypoint, c.Cmd, final.User, final.Entrypoint, final.Cmd)
	}
	for k, v := range final.Labels {
		if c.Labels[k] != v {
			t.Errorf("label %s=%q, Dockerfile %q", k, c.Labels[k], v)
		}
	}
	if len(c.Labels) != len(final.Labels) || c.Labels["org.opencontainers.image.version"] != "e2e" {
		t.Errorf("labels %v, Dockerfile %v", c.Labels, final.Labels)
	}

	status := string(img.files["/var/lib/dpkg/status"])
	for _, p := range final.Packages {
		if !regexp.MustCompile(`(?m)^Package: ` + regexp.QuoteMeta(p) + `\nStatus: install ok installed$`).MatchString(status) {
			t.Errorf("package %s is not installed in the image", p)
		}
	}
	for _, b := range final.Binaries {
		p := final.BinDir + "/" + b
		want := mustRead(t, filepath.Join(root, "bin", b))
		if !bytes.Equal(img.files[p], want) {
			t.Errorf("%s: %d bytes in the image, bin/%s has %d", p, len(img.files[p]), b, len(want))
		}
		h := img.headers[p]
		wantCap := ""
		if text, ok := final.FileCaps[p]; ok {
			x, err := image.CapabilityXattr(text)
			if err != nil {
				t.Fatal(err)
			}
			wantCap = string(x)
		}
		if h == nil || h.PAXRecords["SCHILY.xattr.security.capability"] != wantCap || h.Mode&0o111 == 0 {
			t.Errorf("%s: header %+v, want mode +x and capability %q", p, h, final.FileCaps[p])
		}
	}

	// Every command a rendered static pod runs is in the image.
	infradns := lab.Binary(t, "infradns")
	out := t.TempDir()
	cf := filepath.Join(t.TempDir(), "cluster.yaml")
	writeFile(t, cf, "cluster: c\ndomain: c.example.com\napiVIPs: [192.0.2.10]\ningressVIPs: [192.0.2.11]\ninterface: eth0\n"+
		"image: "+klImage+"\nkubeconfig: /etc/kubernetes/infradns/kubeconfig\napiServers: [192.0.2.1:6443]\n")
	if b, err := exec.Command(infradns, "render-node", "-f", cf, "-role", nodecfg.ControlPlane, "-node", "n0", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("render-node: %v\n%s", err, b)
	}
	var cmds []string
	for name, pod := range readManifests(t, out) {
		for _, ctr := range pod.Spec.Containers {
			cmds = append(cmds, ctr.Command[0])
			if ctr.Command[0] == "/bin/sh" {
				for _, m := range regexp.MustCompile(`exec (/\S+)`).FindAllStringSubmatch(strings.Join(ctr.Command, " "), -1) {
					cmds = append(cmds, m[1])
				}
			}
			if ctr.Image != klImage {
				t.Errorf("%s: image %s", name, ctr.Image)
			}
		}
	}
	slices.Sort(cmds)
	cmds = slices.Compact(cmds)
	for _, cmd := range cmds {
		h, resolved := img.resolve(cmd)
		if h == nil || h.Typeflag != tar.TypeReg || h.Mode&0o111 == 0 {
			t.Errorf("a static pod runs %s: not an executable file in the image (resolved %s)", cmd, resolved)
		}
	}
	t.Logf("image %s: %d packages, %d binaries, the pods' commands %v", klImage, len(final.Packages), len(final.Binaries), cmds)
}
