// Command image-oci builds the Dockerfile's image without a container engine
// or a registry (make image-oci): the final stage's Debian packages come from
// the archive through mmdebstrap (cached: the same suite and packages are
// fetched once), make build's binaries and their file capabilities go in a
// second layer, and the result is an OCI image layout tar that
// `ctr -n k8s.io images import` loads under the name the manifests use.
package main

import (
	"flag"
	"log"

	"github.com/infradns/infradns/deploy/image"
)

func main() {
	dockerfile := flag.String("dockerfile", "Dockerfile", "the Dockerfile whose final stage is built")
	bin := flag.String("bin", "bin", "where make build wrote the binaries")
	version := flag.String("version", "dev", "the VERSION build argument")
	name := flag.String("name", "", "image name (default infradns:VERSION)")
	out := flag.String("o", "bin/infradns-image.oci.tar", "output: an OCI image layout tar")
	arch := flag.String("arch", "", "architecture (Go's name: amd64, arm64, ppc64le, s390x; default this machine's); -bin must hold its binaries")
	cache := flag.String("cache", image.DefaultCache(), "where the Debian root file system is kept between builds")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("image-oci: ")
	if *name == "" {
		*name = "infradns:" + *version
	}
	o := image.BuildOptions{Dockerfile: *dockerfile, Bin: *bin, Version: *version, Name: *name, Out: *out, Cache: *cache,
		Arch: *arch, Log: log.Default()}
	if err := image.Build(o); err != nil {
		log.Fatal(err)
	}
}
