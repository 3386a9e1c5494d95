// Command standin is a small Go program that TestRelease puts in a release
// directory in place of coredns and mdns-publisher (cross-building CoreDNS
// for four architectures would take minutes): it has Go build information,
// which the SBOM reads, like the real binaries.
package main

import "fmt"

func main() { fmt.Println("standin") }
