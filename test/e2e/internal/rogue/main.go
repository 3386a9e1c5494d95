// Command rogue is a test fixture for the e2e spoofing scenarios: a host on
// the cluster link that sends mDNS announcements it has no right to send. It
// is not part of the product.
//
//	rogue -mode announce -host master-1 -cluster ocp4 -addr 198.51.100.166 [-key FILE -age 60s] [-goodbye]
//	rogue -mode capture -host master-1 -out FILE   # save one signed announcement of host
//	rogue -mode replay -in FILE                    # multicast the saved bytes again
//	rogue -mode flood -host flood -hosts 1000 -addrs 200000 -batch 200 -gap 3ms
//
// announce and replay send -count packets -gap apart and exit; capture prints
// "listening" once its sockets are open and exits after saving a packet.
//
// flood is the resource-exhaustion attack on an unsigned resolver: from one
// IPv4 source it announces -addrs made-up addresses (10.64.0.0 up), -batch per
// packet, for -hosts names "<host>-<i>" taken in turn, with -ttl (the wire
// maximum by default) on every record; it prints "flooded A addresses in P
// packets" and exits.
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
	"golang.org/x/net/ipv4"
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
	nAddrs := flag.Int("addrs", 200000, "flood: addresses to announce in all")
	batch := flag.Int("batch", 200, "flood: addresses per packet")
	hosts := flag.Int("hosts", 1000, "flood: host names to spread the addresses over")
	ttl := flag.Uint("ttl", 0xffffffff, "flood: TTL of every record")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ifi, err := net.InterfaceByName(*ifname)
	if err != nil {
		log.Fatal(err)
	}
	if *mode == "flood" {
		flood(ifi, *host, *cluster, *nAddrs, *batch, *hosts, uint32(*ttl), *gap)
		return
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
			if key, err = mdns.LoadKey(*keyFile, nil); err != nil {
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

// flood sends the addresses from the IPv4 socket alone, so that they all come
// from one source address (mdns.Conn would send each packet on both families).
func flood(ifi *net.Interface, host, cluster string, n, batch, hosts int, ttl uint32, gap time.Duration) {
	if batch < 1 || hosts < 1 {
		log.Fatal("-batch and -hosts must be at least 1")
	}
	pc, err := net.ListenPacket("udp4", net.JoinHostPort("0.0.0.0", fmt.Sprint(mdns.Port)))
	if err != nil {
		log.Fatal(err)
	}
	defer pc.Close()
	p := ipv4.NewPacketConn(pc)
	for _, err := range []error{p.SetMulticastInterface(ifi), p.SetMulticastTTL(255)} {
		if err != nil {
			log.Fatal(err)
		}
	}
	group := &net.UDPAddr{IP: mdns.GroupV4.AsSlice(), Port: mdns.Port}
	packets := 0
	for sent := 0; sent < n; packets++ {
		if packets > 0 {
			time.Sleep(gap)
		}
		addrs := make([]netip.Addr, 0, batch)
		for ; len(addrs) < batch && sent < n; sent++ {
			v := uint32(10)<<24 | uint32(64)<<16 + uint32(sent)
			addrs = append(addrs, netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}))
		}
		name := fmt.Sprintf("%s-%d", host, packets%hosts)
		svc := mdns.DefaultService(cluster, name)
		svc.TTL = ttl
		z := mdns.NewZone(name+".local.", cluster, []mdns.Service{svc}, addrs, nil)
		z.HostTTL = ttl
		b, err := z.Announcement(mdns.Stamp{}, false).Pack()
		if err != nil {
			log.Fatal(err)
		}
		if _, err := p.WriteTo(b, nil, group); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("flooded %d addresses in %d packets\n", n, packets)
}
