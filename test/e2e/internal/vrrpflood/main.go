// Command vrrpflood is a test fixture: a rogue host on the cluster link that
// floods VRRP adverts anyone on an L2 segment can send (VRRP v3 has no
// authentication). It is not part of the product.
//
//	vrrpflood -interface eth0 -vrids 51 -vips 198.51.100.100 -spoof 198.51.100.0/24 [-rate 1000] [-duration 15s]
//
// Every advert lists 255 addresses (random ones in 192.0.2.0/24, with the
// -vips in half of them; 90 for IPv6, what fits a 1,500-byte frame) from a random source in -spoof (IPv4) or a random
// link-local one (IPv6, one advert in four), under a random router ID or, one
// in eight, one of -vrids; a third are resignations (priority 0). One in ten
// is instead a resignation naming only the -vips under a router ID not in
// -vrids: what keepalived ignores but a relay that trusted any resignation
// would follow. It sends through a packet socket, so the IP header (source
// included) is its own, and prints "flooded N adverts in D" when done.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"net/netip"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/infradns/infradns/internal/vrrp"

	"golang.org/x/sys/unix"
)

func main() {
	ifname := flag.String("interface", "eth0", "interface to send on")
	vridList := flag.String("vrids", "", "comma-separated router IDs of the cluster")
	vipList := flag.String("vips", "", "comma-separated VIPs of the cluster")
	spoof := flag.String("spoof", "198.51.100.0/24", "IPv4 sources are drawn from this prefix")
	rate := flag.Int("rate", 1000, "adverts per second")
	duration := flag.Duration("duration", 15*time.Second, "how long to flood")
	flag.Parse()

	var vrids []uint8
	for _, s := range strings.Split(*vridList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 255 {
			log.Fatalf("-vrids: %q", s)
		}
		vrids = append(vrids, uint8(n))
	}
	var vips []netip.Addr
	for _, s := range strings.Split(*vipList, ",") {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			log.Fatalf("-vips: %v", err)
		}
		vips = append(vips, a)
	}
	pfx, err := netip.ParsePrefix(*spoof)
	if err != nil || !pfx.Addr().Is4() {
		log.Fatalf("-spoof: an IPv4 prefix: %q", *spoof)
	}
	ifi, err := net.InterfaceByName(*ifname)
	if err != nil {
		log.Fatal(err)
	}
	fds := map[bool]int{}
	for _, v6 := range []bool{false, true} {
		proto := uint16(unix.ETH_P_IP)
		if v6 {
			proto = unix.ETH_P_IPV6
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(proto)))
		if err != nil {
			log.Fatalf("packet socket: %v", err)
		}
		fds[v6] = fd
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	// Sent in batches every 10 ms: a 1 ms ticker is not kept on a busy
	// machine.
	perTick := max(1, *rate/100)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	start, sent, failed := time.Now(), 0, 0
	var lastErr error
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		for range perTick {
			i := sent + failed
			v6 := i%4 == 3
			pkt := advert(rng, i, v6, pfx, vrids, vips)
			to := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}
			if v6 {
				to.Protocol = htons(unix.ETH_P_IPV6)
				copy(to.Addr[:], []byte{0x33, 0x33, 0, 0, 0, 0x12})
			} else {
				to.Protocol = htons(unix.ETH_P_IP)
				copy(to.Addr[:], []byte{0x01, 0x00, 0x5e, 0, 0, 0x12})
			}
			if err := unix.Sendto(fds[v6], pkt, 0, to); err != nil {
				failed++
				lastErr = err
				continue
			}
			sent++
		}
	}
	if sent == 0 {
		log.Fatalf("nothing sent: %v", lastErr)
	}
	fmt.Printf("flooded %d adverts in %s (%d sends failed, last error %v)\n", sent, time.Since(start).Round(time.Millisecond), failed, lastErr)
}

// advert is the i-th packet of the flood, from its IP header on.
func advert(rng *rand.Rand, i int, v6 bool, spoof netip.Prefix, vrids []uint8, vips []netip.Addr) []byte {
	var src, dst netip.Addr
	if v6 {
		b := [16]byte{0: 0xfe, 1: 0x80}
		binary.BigEndian.PutUint64(b[8:], rng.Uint64())
		src, dst = netip.AddrFrom16(b), vrrp.GroupV6
	} else {
		b := spoof.Masked().Addr().As4()
		host := rng.Uint32() & (1<<(32-spoof.Bits()) - 1)
		binary.BigEndian.PutUint32(b[:], binary.BigEndian.Uint32(b[:])|host)
		src, dst = netip.AddrFrom4(b), vrrp.GroupV4
	}
	ours := func(a netip.Addr) bool { return a.Is6() == v6 }
	a := vrrp.Advert{Version: 3, VRID: uint8(rng.IntN(255) + 1), Priority: uint8(rng.IntN(254) + 1), Interval: 60 * time.Millisecond}
	if i%10 == 9 {
		// A tidy resignation of the VIPs under a foreign router ID.
		for slices.Contains(vrids, a.VRID) {
			a.VRID = uint8(rng.IntN(255) + 1)
		}
		a.Priority = 0
		for _, v := range vips {
			if ours(v) {
				a.Addresses = append(a.Addresses, v)
			}
		}
	}
	if len(a.Addresses) == 0 {
		if i%8 == 0 {
			a.VRID = vrids[rng.IntN(len(vrids))]
		}
		if i%3 == 0 {
			a.Priority = 0
		}
		// 255 IPv4 addresses fill 1,048 bytes; IPv6 ones fit 90 to a
		// 1,500-byte frame.
		n := 255
		if v6 {
			n = 90
		}
		for range n {
			if v6 {
				b := [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(rng.IntN(256))}
				a.Addresses = append(a.Addresses, netip.AddrFrom16(b))
			} else {
				a.Addresses = append(a.Addresses, netip.AddrFrom4([4]byte{192, 0, 2, byte(rng.IntN(256))}))
			}
		}
		if i%2 == 0 {
			for _, v := range vips {
				if ours(v) {
					a.Addresses[rng.IntN(len(a.Addresses))] = v
				}
			}
		}
	}
	body, err := a.Marshal(src, dst)
	if err != nil {
		log.Fatal(err)
	}
	if v6 {
		h := make([]byte, 40, 40+len(body))
		h[0] = 6 << 4
		binary.BigEndian.PutUint16(h[4:6], uint16(len(body)))
		h[6], h[7] = vrrp.Protocol, 255
		s, d := src.As16(), dst.As16()
		copy(h[8:24], s[:])
		copy(h[24:40], d[:])
		return append(h, body...)
	}
	h := make([]byte, 20, 20+len(body))
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:4], uint16(20+len(body)))
	h[8], h[9] = 255, vrrp.Protocol
	s, d := src.As4(), dst.As4()
	copy(h[12:16], s[:])
	copy(h[16:20], d[:])
	binary.BigEndian.PutUint16(h[10:12], ipChecksum(h))
	return append(h, body...)
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
