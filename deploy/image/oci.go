package image

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"time"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// File is one file of the binaries' layer.
type File struct {
	Path string // absolute, in the image
	Mode int64
	Src  string // read from here
	Caps string // setcap text ("" for none), stored as security.capability
}

// capability numbers (linux/capability.h) of the names setcap may be given here.
var capNumbers = map[string]uint{
	"cap_net_bind_service": 10, "cap_net_broadcast": 11, "cap_net_admin": 12,
	"cap_net_raw": 13, "cap_ipc_lock": 14, "cap_kill": 5, "cap_sys_nice": 23,
}

// CapabilityXattr encodes setcap's text form (one clause, "name[,name]=+ep"
// or "=ep" style flags e, p, i) as the security.capability extended attribute
// (struct vfs_cap_data, revision 2), what setcap itself writes.
func CapabilityXattr(text string) ([]byte, error) {
	names, flags, ok := strings.Cut(strings.ToLower(text), "=")
	if !ok || names == "" {
		return nil, fmt.Errorf("capability %q: want NAME[,NAME]=FLAGS", text)
	}
	flags = strings.TrimPrefix(flags, "+")
	var set uint64
	for _, n := range strings.Split(names, ",") {
		bit, ok := capNumbers[n]
		if !ok {
			return nil, fmt.Errorf("capability %q: unknown name %q", text, n)
		}
		set |= 1 << bit
	}
	const (
		revision2 = 0x02000000
		effective = 0x000001
	)
	var permitted, inheritable uint64
	magic := uint32(revision2)
	for _, fl := range flags {
		switch fl {
		case 'e':
			magic |= effective
		case 'p':
			permitted = set
		case 'i':
			inheritable = set
		default:
			return nil, fmt.Errorf("capability %q: unknown flag %q", text, fl)
		}
	}
	if permitted == 0 && inheritable == 0 {
		return nil, fmt.Errorf("capability %q: neither permitted nor inheritable", text)
	}
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], magic)
	binary.LittleEndian.PutUint32(b[4:], uint32(permitted))
	binary.LittleEndian.PutUint32(b[8:], uint32(inheritable))
	binary.LittleEndian.PutUint32(b[12:], uint32(permitted>>32))
	binary.LittleEndian.PutUint32(b[16:], uint32(inheritable>>32))
	return b, nil
}

// WriteFilesLayer writes files as a layer tar to w, with the parent
// directories, root-owned, mtime at epoch (the same binaries give the same
// layer digest).
func WriteFilesLayer(w io.Writer, files []File) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	for _, f := range files {
		var parents []string
		for d := path.Dir(f.Path); d != "/" && !dirs[d]; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
			dirs[d] = true
		}
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/",
				Mode: 0o755, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}); err != nil {
				return err
			}
		}
		data, err := os.ReadFile(f.Src)
		if err != nil {
			return err
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.Path, "/"), Mode: f.Mode,
			Size: int64(len(data)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if f.Caps != "" {
			x, err := CapabilityXattr(f.Caps)
			if err != nil {
				return fmt.Errorf("%s: %w", f.Path, err)
			}
			h.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": string(x)}
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// CopyBaseLayer copies the root file system tar r (mmdebstrap's output) to w
// as an image layer: names without "./", no device nodes (the runtime makes
// /dev), nothing under /proc or /sys.
func CopyBaseLayer(w io.Writer, r io.Reader) error {
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("root file system: %w", err)
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if name == "" {
			continue
		}
		if h.Typeflag == tar.TypeChar || h.Typeflag == tar.TypeBlock || h.Typeflag == tar.TypeFifo {
			continue
		}
		if top, _, _ := strings.Cut(name, "/"); (top == "dev" || top == "proc" || top == "sys") && name != top {
			continue
		}
		if h.Typeflag == tar.TypeDir {
			name += "/"
		}
		h.Name = name
		if h.Typeflag == tar.TypeLink {
			h.Linkname = strings.TrimPrefix(path.Clean("/"+h.Linkname), "/")
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	return tw.Close()
}

// LayerFiles returns the contents of the regular files named (without a
// leading "/" or "./") that the layer tar holds.
func LayerFiles(layer string, names ...string) (map[string][]byte, error) {
	f, err := os.Open(layer)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", layer, err)
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if h.Typeflag == tar.TypeReg && slices.Contains(names, name) {
			if out[name], err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", layer, name, err)
			}
		}
	}
}

// Layer is a layer tar already written to a file.
type Layer struct {
	File    string
	Comment string        // history
	DiffID  digest.Digest // set when File is gzip-compressed: the digest of the tar inside
}

// ImageName is the full reference a container runtime gives name: a name
// without a registry is Docker Hub's, a single component library/'s.
func ImageName(name string) string {
	first, _, ok := strings.Cut(name, "/")
	switch {
	case !ok:
		name = "docker.io/library/" + name
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		name = "docker.io/" + name
	}
	if !strings.Contains(path.Base(name), ":") && !strings.Contains(name, "@") {
		name += ":latest"
	}
	return name
}

// WriteLayout writes an OCI image layout tar (what `ctr images import` and
// skopeo read) holding one image named name for this machine's architecture:
// layers in order, f's user, entrypoint, command, labels and environment.
// index.json names the image manifest itself.
func WriteLayout(w io.Writer, name string, f Final, layers []Layer, created time.Time) error {
	p, _, err := Platform(runtime.GOARCH)
	if err != nil {
		return err
	}
	img, blobs, err := imageBlobs(Image{Platform: p, Final: f, Layers: layers}, created)
	if err != nil {
		return err
	}
	return writeLayoutTar(w, name, img, blobs, created)
}

// Image is one architecture's image: its platform, what the Dockerfile's
// final stage says, and its layers.
type Image struct {
	Platform v1.Platform
	Final    Final
	Layers   []Layer
}

// WriteIndexLayout writes an OCI image layout tar holding one multi-arch
// image named name: index.json names an image index (a blob) that lists one
// image manifest per entry of images, each with its platform. Pushed, the
// index is the image's digest; `ctr images import` picks the node's platform.
// It returns the image index's descriptor and the manifests', in order.
func WriteIndexLayout(w io.Writer, name string, images []Image, created time.Time) (v1.Descriptor, []v1.Descriptor, error) {
	var all []blob
	var mans []v1.Descriptor
	for _, im := range images {
		for _, m := range mans {
			if PlatformString(*m.Platform) == PlatformString(im.Platform) {
				return v1.Descriptor{}, nil, fmt.Errorf("two images for %s", PlatformString(im.Platform))
			}
		}
		md, blobs, err := imageBlobs(im, created)
		if err != nil {
			return v1.Descriptor{}, nil, err
		}
		mans = append(mans, md)
		all = append(all, blobs...)
	}
	index := v1.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: v1.MediaTypeImageIndex, Manifests: mans,
		Annotations: map[string]string{v1.AnnotationCreated: created.UTC().Format(time.RFC3339)}}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	desc := v1.Descriptor{MediaType: v1.MediaTypeImageIndex, Digest: digest.FromBytes(indexJSON), Size: int64(len(indexJSON))}
	all = append(all, blob{desc: desc, data: indexJSON})
	return desc, mans, writeLayoutTar(w, name, desc, all, created)
}

type blob struct {
	desc v1.Descriptor
	file string // its content, or data
	data []byte
}

// imageBlobs makes the config and manifest of im and returns the manifest's
// descriptor (with the platform) and every blob the manifest refers to.
func imageBlobs(im Image, created time.Time) (v1.Descriptor, []blob, error) {
	f := im.Final
	cfg := v1.Image{
		Created:  &created,
		Platform: im.Platform,
		Config: v1.ImageConfig{
			User: f.User, Entrypoint: f.Entrypoint, Cmd: f.Cmd, Labels: f.Labels,
			Env: append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, f.Env...),
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	var blobs []blob
	var layerDescs []v1.Descriptor
	for _, l := range im.Layers {
		d, size, err := fileDigest(l.File)
		if err != nil {
			return v1.Descriptor{}, nil, err
		}
		desc := v1.Descriptor{MediaType: v1.MediaTypeImageLayer, Digest: d, Size: size}
		diffID := d // an uncompressed layer's digest is its diff ID
		if l.DiffID != "" {
			desc.MediaType, diffID = v1.MediaTypeImageLayerGzip, l.DiffID
		}
		layerDescs = append(layerDescs, desc)
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, diffID)
		cfg.History = append(cfg.History, v1.History{Created: &created, CreatedBy: l.Comment})
		blobs = append(blobs, blob{desc: desc, file: l.File})
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	cfgDesc := v1.Descriptor{MediaType: v1.MediaTypeImageConfig, Digest: digest.FromBytes(cfgJSON), Size: int64(len(cfgJSON))}
	blobs = append(blobs, blob{desc: cfgDesc, data: cfgJSON})
	man := v1.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: v1.MediaTypeImageManifest,
		Config: cfgDesc, Layers: layerDescs, Annotations: map[string]string{v1.AnnotationCreated: created.UTC().Format(time.RFC3339)}}
	manJSON, err := json.Marshal(man)
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	manDesc := v1.Descriptor{MediaType: v1.MediaTypeImageManifest, Digest: digest.FromBytes(manJSON), Size: int64(len(manJSON)),
		Platform: &cfg.Platform}
	blobs = append(blobs, blob{desc: manDesc, data: manJSON})
	return manDesc, blobs, nil
}

// writeLayoutTar writes the layout: the blobs (each once, in digest order),
// oci-layout, and index.json naming top, the image, as name. Every entry is
// root-owned with mtime created, so the same blobs give the same tar.
func writeLayoutTar(w io.Writer, name string, top v1.Descriptor, blobs []blob, created time.Time) error {
	full := ImageName(name)
	top.Annotations = map[string]string{
		// containerd names the image from this; others read the ref name.
		"io.containerd.image.name": full,
		v1.AnnotationRefName:       full[strings.LastIndex(full, ":")+1:],
	}
	index := v1.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: v1.MediaTypeImageIndex, Manifests: []v1.Descriptor{top}}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}
	layoutJSON, _ := json.Marshal(v1.ImageLayout{Version: v1.ImageLayoutVersion})
	blobs = slices.Clone(blobs)
	slices.SortStableFunc(blobs, func(a, b blob) int { return strings.Compare(string(a.desc.Digest), string(b.desc.Digest)) })
	blobs = slices.CompactFunc(blobs, func(a, b blob) bool { return a.desc.Digest == b.desc.Digest })

	tw := tar.NewWriter(w)
	header := func(name string, typ byte, mode, size int64) *tar.Header {
		return &tar.Header{Typeflag: typ, Name: name, Mode: mode, Size: size, ModTime: created, Format: tar.FormatPAX}
	}
	put := func(name string, data []byte) error {
		if err := tw.WriteHeader(header(name, tar.TypeReg, 0o644, int64(len(data)))); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(header(d, tar.TypeDir, 0o755, 0)); err != nil {
			return err
		}
	}
	for _, b := range blobs {
		name := "blobs/sha256/" + b.desc.Digest.Encoded()
		if b.file == "" {
			if err := put(name, b.data); err != nil {
				return err
			}
			continue
		}
		if err := tw.WriteHeader(header(name, tar.TypeReg, 0o644, b.desc.Size)); err != nil {
			return err
		}
		fh, err := os.Open(b.file)
		if err != nil {
			return err
		}
		n, err := io.Copy(tw, fh)
		fh.Close()
		if err != nil {
			return err
		}
		if n != b.desc.Size {
			return fmt.Errorf("%s changed while the image was written", b.file)
		}
	}
	if err := put(v1.ImageLayoutFile, layoutJSON); err != nil {
		return err
	}
	if err := put(v1.ImageIndexFile, indexJSON); err != nil {
		return err
	}
	return tw.Close()
}

// Platform is the OCI platform of Go's linux/goarch and the Debian
// architecture of the same machines. arm64 carries variant v8, as Docker's
// and Debian's own images do (containerd matches linux/arm64 to it).
func Platform(goarch string) (v1.Platform, string, error) {
	deb, ok := map[string]string{"amd64": "amd64", "arm64": "arm64", "ppc64le": "ppc64el", "s390x": "s390x"}[goarch]
	if !ok {
		return v1.Platform{}, "", fmt.Errorf("architecture %q: the image is built for amd64, arm64, ppc64le and s390x", goarch)
	}
	p := v1.Platform{OS: "linux", Architecture: goarch}
	if goarch == "arm64" {
		p.Variant = "v8"
	}
	return p, deb, nil
}

// PlatformString is p as os/arch[/variant], as ctr and docker write it.
func PlatformString(p v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// GzipLayer compresses the layer tar src into dst the same way every time
// (no name, no time in the gzip header) and returns the Layer for dst, its
// diff ID being src's digest.
func GzipLayer(dst, src, comment string) (Layer, error) {
	diffID, _, err := fileDigest(src)
	if err != nil {
		return Layer{}, err
	}
	r, err := os.Open(src)
	if err != nil {
		return Layer{}, err
	}
	defer r.Close()
	err = writeFile(dst, func(w *os.File) error {
		zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
		if err != nil {
			return err
		}
		if _, err := io.Copy(zw, r); err != nil {
			return err
		}
		return zw.Close()
	})
	return Layer{File: dst, Comment: comment, DiffID: diffID}, err
}

func fileDigest(file string) (digest.Digest, int64, error) {
	fh, err := os.Open(file)
	if err != nil {
		return "", 0, err
	}
	defer fh.Close()
	h := sha256.New()
	n, err := io.Copy(h, fh)
	if err != nil {
		return "", 0, err
	}
	return digest.NewDigestFromBytes(digest.SHA256, h.Sum(nil)), n, nil
}
