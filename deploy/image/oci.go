package image

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
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

// Layer is a layer tar already written to a file.
type Layer struct {
	File    string
	Comment string // history
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
// skopeo read) holding one image named name: layers in order, f's user,
// entrypoint, command, labels and environment.
func WriteLayout(w io.Writer, name string, f Final, layers []Layer, created time.Time) error {
	cfg := v1.Image{
		Created:  &created,
		Platform: v1.Platform{Architecture: runtime.GOARCH, OS: "linux"},
		Config: v1.ImageConfig{
			User: f.User, Entrypoint: f.Entrypoint, Cmd: f.Cmd, Labels: f.Labels,
			Env: append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, f.Env...),
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	type blob struct {
		desc v1.Descriptor
		file string
		data []byte
	}
	var blobs []blob
	var layerDescs []v1.Descriptor
	for _, l := range layers {
		d, size, err := fileDigest(l.File)
		if err != nil {
			return err
		}
		desc := v1.Descriptor{MediaType: v1.MediaTypeImageLayer, Digest: d, Size: size}
		layerDescs = append(layerDescs, desc)
		// Uncompressed layers: their digest is their diff ID.
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, d)
		cfg.History = append(cfg.History, v1.History{Created: &created, CreatedBy: l.Comment})
		blobs = append(blobs, blob{desc: desc, file: l.File})
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cfgDesc := v1.Descriptor{MediaType: v1.MediaTypeImageConfig, Digest: digest.FromBytes(cfgJSON), Size: int64(len(cfgJSON))}
	blobs = append(blobs, blob{desc: cfgDesc, data: cfgJSON})
	man := v1.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: v1.MediaTypeImageManifest,
		Config: cfgDesc, Layers: layerDescs, Annotations: map[string]string{v1.AnnotationCreated: created.UTC().Format(time.RFC3339)}}
	manJSON, err := json.Marshal(man)
	if err != nil {
		return err
	}
	full := ImageName(name)
	manDesc := v1.Descriptor{MediaType: v1.MediaTypeImageManifest, Digest: digest.FromBytes(manJSON), Size: int64(len(manJSON)),
		Platform: &cfg.Platform,
		Annotations: map[string]string{
			// containerd names the image from this; others read the ref name.
			"io.containerd.image.name": full,
			v1.AnnotationRefName:       full[strings.LastIndex(full, ":")+1:],
		}}
	blobs = append(blobs, blob{desc: manDesc, data: manJSON})
	index := v1.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: v1.MediaTypeImageIndex, Manifests: []v1.Descriptor{manDesc}}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}
	layoutJSON, _ := json.Marshal(v1.ImageLayout{Version: v1.ImageLayoutVersion})

	tw := tar.NewWriter(w)
	put := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: created}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: created}); err != nil {
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
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: b.desc.Size, ModTime: created}); err != nil {
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
