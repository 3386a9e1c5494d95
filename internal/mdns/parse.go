package mdns

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// ErrNotMDNS is returned for messages that RFC 6762 18.3 and 18.11 tell a
// receiver to ignore: an opcode other than QUERY or a non-zero rcode.
var ErrNotMDNS = errors.New("not an mdns message")

// ParsePacket unpacks a received datagram. It never panics on hostile input
// (miekg/dns bounds every read) and refuses what mDNS must ignore.
func ParsePacket(b []byte) (*dns.Msg, error) {
	if len(b) > maxPacket {
		return nil, fmt.Errorf("%w: %d bytes", ErrNotMDNS, len(b))
	}
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		return nil, fmt.Errorf("unpack: %w", err)
	}
	if m.Opcode != dns.OpcodeQuery || m.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%w: opcode %d rcode %d", ErrNotMDNS, m.Opcode, m.Rcode)
	}
	return m, nil
}

// TXTFields parses DNS-SD key=value strings (RFC 6763 6.3). Keys are case
// insensitive; the first occurrence of a key wins (6.4); a key without '='
// maps to "".
func TXTFields(txt []string) map[string]string {
	f := make(map[string]string, len(txt))
	for _, s := range txt {
		k, v, _ := strings.Cut(s, "=")
		if k == "" {
			continue
		}
		k = lower(k)
		if _, ok := f[k]; !ok {
			f[k] = v
		}
	}
	return f
}

// addrOf returns the address of an A or AAAA record.
func addrOf(rr dns.RR) (netip.Addr, bool) {
	switch rr := rr.(type) {
	case *dns.A:
		a, ok := netip.AddrFromSlice(rr.A.To4())
		return a, ok
	case *dns.AAAA:
		a, ok := netip.AddrFromSlice(rr.AAAA.To16())
		if ok && a.Is4In6() {
			return netip.Addr{}, false
		}
		return a, ok
	}
	return netip.Addr{}, false
}
