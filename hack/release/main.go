// Command release finishes a release directory (make release VERSION=...):
// beside the cross-built binaries in DIR/linux_ARCH/ it writes the
// multi-arch OCI image (an image index, one image per architecture on that
// architecture's Debian packages), the SPDX SBOM and SHA256SUMS, every time
// stamp at $SOURCE_DATE_EPOCH (else the commit's time). -check DIR checks a
// release directory: its sums, and that the SBOM lists its binaries.
package main

import (
	"flag"
	"log"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/infradns/infradns/deploy/image"
	"github.com/infradns/infradns/deploy/release"
)

func main() {
	dir := flag.String("dir", "", "the release directory, with linux_ARCH/ from make build")
	version := flag.String("version", "", "the release's version (VERSION)")
	name := flag.String("name", "", "image name (default infradns:VERSION)")
	arches := flag.String("arches", strings.Join(release.Arches, " "), "architectures (Go's names)")
	dockerfile := flag.String("dockerfile", "Dockerfile", "the Dockerfile whose final stage is built")
	cache := flag.String("cache", image.DefaultCache(), "where the Debian root file systems are kept between builds")
	source := flag.String("source", "https://github.com/infradns/infradns", "the source repository, named in the SBOM")
	check := flag.Bool("check", false, "only check the release directory -dir")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("release: ")
	if *dir == "" || *version == "" {
		log.Fatal("-dir and -version are needed")
	}
	if *check {
		if err := release.Check(*dir, *version); err != nil {
			log.Fatal(err)
		}
		log.Printf("%s: SHA256SUMS and SBOM check out", *dir)
		return
	}
	if *name == "" {
		*name = "infradns:" + *version
	}
	created, err := sourceDateEpoch()
	if err != nil {
		log.Fatal(err)
	}
	index, err := release.Build(release.Options{Dir: *dir, Version: *version, Name: *name, Dockerfile: *dockerfile, Cache: *cache,
		Arches: strings.Fields(*arches), Created: created, Source: *source, Log: log.Default()})
	if err != nil {
		log.Fatal(err)
	}
	if err := release.Check(*dir, *version); err != nil {
		log.Fatal(err)
	}
	log.Printf("%s: image index %s, SOURCE_DATE_EPOCH %d", *dir, index, created.Unix())
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH, else the commit time of HEAD.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		out, err := exec.Command("git", "log", "-1", "--format=%ct").Output()
		if err != nil {
			return time.Time{}, err
		}
		s = strings.TrimSpace(string(out))
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(n, 0).UTC(), nil
}
