// Command rogue is a test fixture for the e2e spoofing scenarios: a host on
// the cluster link that sends mDNS announcements it has no right to send. It
// is not part of the product.
//
//	rogue -mode announce -host master-1 -cluster ocp4 -addr 198.51.100.166 [-key FILE -age 60s] [-goodbye]
//	rogue -mode capture -host master-1 -out FILE   # save one signed announcement of host
//	rogue -mode replay -in FILE                    # multicast the saved bytes again
//
// announce and replay send -count packets -gap apart and exit; capture prints
// "listening" once its sockets are open and exits after saving a packet.
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
	"strings"
	"syscall"
	"time"

	"github.com/infradns/infradns/internal/mdns"

	"github.com/miekg/dns"
)

func main() {
	mode := flag.String("mode", "announce", "announce, capture or replay")
	ifname := flag.String("interface", "eth0", "interface to send on")
	host := flag.String("host", "", "short host name to claim (announce) or to capture")
	cluster := flag.String("cluster", "ocp4", "cluster name in the TXT record")
	addrList := flag.String("addr", "", "comma-separated addresses to claim")
	keyFile := flag.String("key", "", "sign with the shared key in this file")
	age := flag.Duration("age", 0, "sign with a timestamp this far in the past")
	goodbye := flag.Bool("goodbye", false, "announce: send goodbyes (TTL 0) instead")
	count := flag.Int("count", 3, "packets to send")
	gap := flag.Duration("gap", 200*time.Millisecond, "pause between packets")
	out := flag.String("out", "", "capture: file to write the packet to")
	in := flag.String("in", "", "replay: file holding the packet")
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

	switch *mode {
	case "announce":
		var addrs []netip.Addr
		for _, s := range strings.Split(*addrList, ",") {
			a, err := netip.ParseAddr(strings.TrimSpace(s))
			if err != nil {
				log.Fatalf("-addr: %v", err)
			}
			addrs = append(addrs, a)
		}
		var key []byte
		if *keyFile != "" {
			if key, err = mdns.LoadKey(*keyFile); err != nil {
				log.Fatal(err)
			}
		}
		z := mdns.NewZone(*host+".local.", *cluster, []mdns.Service{mdns.DefaultService(*cluster, *host)}, addrs, key)
		send(conn, *count, *gap, func() []byte {
			b, err := z.Announcement(mdns.NewStamp(time.Now().Add(-*age)), *goodbye).Pack()
			if err != nil {
				log.Fatal(err)
			}
			return b
		})
	case "replay":
		b, err := os.ReadFile(*in)
		if err != nil {
			log.Fatal(err)
		}
		send(conn, *count, *gap, func() []byte { return b })
	case "capture":
		capture(ctx, conn, strings.ToLower(*host)+".local.", *out)
	default:
		log.Fatalf("unknown -mode %q", *mode)
	}
}

func send(conn *mdns.Conn, count int, gap time.Duration, packet func() []byte) {
	for i := range count {
		if i > 0 {
			time.Sleep(gap)
		}
		if err := conn.Multicast(packet()); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("sent %d\n", count)
}

// capture saves the first announcement of host that carries a signature and
// addresses that are not goodbyes: what an eavesdropper on the link would keep
// to replay later.
func capture(ctx context.Context, conn *mdns.Conn, host, out string) {
	pkts := make(chan mdns.Packet, 64)
	stop := make(chan struct{})
	defer close(stop)
	go conn.Read(pkts, stop)
	fmt.Println("listening")
	for {
		select {
		case <-ctx.Done():
			log.Fatal("no announcement captured")
		case p := <-pkts:
			m, err := mdns.ParsePacket(p.Data)
			if err != nil || !m.Response || !signedAnnouncement(m, host) {
				continue
			}
			if err := os.WriteFile(out, p.Data, 0o644); err != nil {
				log.Fatal(err)
			}
			fmt.Printf("captured %d bytes from %v\n", len(p.Data), p.Src)
			return
		}
	}
}

func signedAnnouncement(m *dns.Msg, host string) bool {
	var sig, addr bool
	for _, rr := range append(m.Answer, m.Extra...) {
		switch rr := rr.(type) {
		case *dns.TXT:
			_, ok := mdns.TXTFields(rr.Txt)["sig"]
			sig = sig || ok
		case *dns.A:
			addr = addr || (strings.EqualFold(rr.Hdr.Name, host) && rr.Hdr.Ttl > 0)
		}
	}
	return sig && addr
}
