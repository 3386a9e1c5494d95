// Command genqueries writes the query file of the DNS benchmark (hack/bench.sh)
// and the name map of the onemap ceiling plugin, deterministically.
//
// The mix, by query count: 10 % api/api-int (A and AAAA), 80 % names below
// apps (a few thousand distinct, 80 % A and 20 % AAAA), 10 % names of the
// cluster domain that do not exist (NXDOMAIN). The file is shuffled with a fixed
// seed so every run and every server sees the same sequence.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

func main() {
	var (
		dir     = flag.String("dir", ".", "output directory")
		zone    = flag.String("zone", "ocp4.example.com", "cluster domain")
		lines   = flag.Int("queries", 20000, "number of query lines")
		apps    = flag.Int("apps", 3000, "distinct names below apps")
		apiV4   = flag.String("api-v4", "192.0.2.5", "API VIP, IPv4")
		apiV6   = flag.String("api-v6", "2001:db8::5", "API VIP, IPv6")
		ingV4   = flag.String("ingress-v4", "192.0.2.10", "ingress VIP, IPv4")
		ingV6   = flag.String("ingress-v6", "2001:db8::10", "ingress VIP, IPv6")
		summary = flag.Bool("summary", true, "print the expected response codes")
	)
	flag.Parse()
	if err := run(*dir, *zone, *lines, *apps, [4]string{*apiV4, *apiV6, *ingV4, *ingV6}, *summary); err != nil {
		fmt.Fprintln(os.Stderr, "genqueries:", err)
		os.Exit(1)
	}
}

func run(dir, zone string, lines, apps int, vips [4]string, summary bool) error {
	if lines < 10 || apps < 1 {
		return fmt.Errorf("need at least 10 queries and 1 apps name")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	appNames := make([]string, apps)
	for i := range appNames {
		appNames[i] = fmt.Sprintf("route-%04d-ns-%02d.apps.%s", i, i%50, zone)
	}
	api := []string{"api." + zone, "api-int." + zone}

	var qs []string
	nAPI, nNX := lines/10, lines/10
	nApps := lines - nAPI - nNX
	for i := range nAPI {
		qs = append(qs, api[i%2]+" "+[]string{"A", "AAAA"}[(i/2)%2])
	}
	for i := range nApps {
		t := "A"
		if rng.IntN(5) == 0 {
			t = "AAAA"
		}
		qs = append(qs, appNames[i%apps]+" "+t)
	}
	for i := range nNX {
		t := "A"
		if i%4 == 3 {
			t = "AAAA"
		}
		qs = append(qs, fmt.Sprintf("nosuch-%05d.%s %s", i, zone, t))
	}
	rng.Shuffle(len(qs), func(i, j int) { qs[i], qs[j] = qs[j], qs[i] })

	if err := writeLines(filepath.Join(dir, "queries.txt"), qs); err != nil {
		return err
	}
	var names []string
	for _, n := range api {
		names = append(names, n+" "+vips[0]+" "+vips[1])
	}
	for _, n := range appNames {
		names = append(names, n+" "+vips[2]+" "+vips[3])
	}
	if err := writeLines(filepath.Join(dir, "onemap.names"), names); err != nil {
		return err
	}
	if summary {
		fmt.Printf("queries=%d noerror=%d nxdomain=%d\n", len(qs), nAPI+nApps, nNX)
	}
	return nil
}

func writeLines(path string, lines []string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	w := bufio.NewWriter(f)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
