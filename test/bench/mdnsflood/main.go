// Command mdnsflood announces many made-up nodes over mDNS from one process,
// for measuring mdnsnodes with a large cluster (test/e2e scale test). It is a
// test fixture, not part of the product: the nodes' addresses are invented and
// it answers no queries; it re-announces every -every so the hosts stay cached.
//
//	mdnsflood -interface eth0 -cluster ocp4 -n 500
//
// Node i is "<prefix><i>" (zero-padded to 3 digits) with IPv4 10.128.i/256.i%256
// and IPv6 fd00:128::i; it prints "announced N" after the first round.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/infradns/infradns/internal/mdns"
)

func main() {
	ifname := flag.String("interface", "eth0", "interface to announce on")
	cluster := flag.String("cluster", "ocp4", "cluster name in the TXT record")
	n := flag.Int("n", 500, "number of nodes")
	prefix := flag.String("prefix", "worker-", "node name prefix")
	every := flag.Duration("every", 30*time.Second, "re-announce period (host TTL is 120 s)")
	gap := flag.Duration("gap", 2*time.Millisecond, "pause between two announcements")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ifi, err := net.InterfaceByName(*ifname)
	if err != nil {
		log.Fatal(err)
	}
	conn, err := mdns.Listen(ctx, ifi)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	zones := make([]*mdns.Zone, *n)
	for i := range zones {
		host := fmt.Sprintf("%s%03d", *prefix, i)
		addrs := []netip.Addr{
			netip.AddrFrom4([4]byte{10, 128, byte(i / 256), byte(i % 256)}),
			netip.MustParseAddr(fmt.Sprintf("fd00:128::%x", i+1)),
		}
		zones[i] = mdns.NewZone(host+".local.", *cluster, []mdns.Service{mdns.DefaultService(*cluster, host)}, addrs, nil)
	}
	for round := 0; ; round++ {
		for _, z := range zones {
			b, err := z.Announcement(mdns.NewStamp(time.Now()), false).Pack()
			if err != nil {
				log.Fatal(err)
			}
			if err := conn.Multicast(b); err != nil {
				log.Printf("announce %s: %v", z.Host, err)
			}
			time.Sleep(*gap)
		}
		if round == 0 {
			fmt.Printf("announced %d\n", len(zones))
		}
		select {
		case <-ctx.Done():
			os.Exit(0)
		case <-time.After(*every):
		}
	}
}
