package mdns

import (
	"strings"

	"github.com/miekg/dns"
)

// DefaultReserved are the host labels a node may never claim because other
// infradns plugins own them in the cluster zone: apiint (api, api-int),
// appswildcard (apps, and everything below it) and the zone's authority (dns:
// dns.<zone> is the empty non-terminal above the nameserver ns.dns.<zone>,
// answered NODATA by whichever plugin of the block sees it first, so a node
// named dns would be served or not depending on the plugin order).
var DefaultReserved = []string{"api", "api-int", "apps", "dns"}

// ValidHostLabel reports whether l is a host name label (RFC 952/1123: letters,
// digits and inner hyphens, 1 to 63 characters). Lower case is expected.
func ValidHostLabel(l string) bool {
	if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// HostLabel returns the host label of an mDNS host name "<label>.<domain>":
// exactly one label, a valid host name, in domain (all case-insensitive).
func HostLabel(host, domain string) (string, bool) {
	host = strings.ToLower(dns.Fqdn(host))
	domain = strings.ToLower(dns.Fqdn(domain))
	if len(host) <= len(domain)+1 || !strings.HasSuffix(host, "."+domain) {
		return "", false
	}
	l := host[:len(host)-len(domain)-1]
	if !ValidHostLabel(l) {
		return "", false
	}
	return l, true
}

// escapeLabel writes an instance label (free text, RFC 6763 4.3) in the
// presentation form miekg/dns uses, so a name we build compares equal to the
// same name unpacked from the wire.
func escapeLabel(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.' || c == ' ' || c == '\'' || c == '@' || c == ';' || c == '(' || c == ')' || c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < ' ' || c > '~':
			b.WriteByte('\\')
			b.WriteByte('0' + c/100)
			b.WriteByte('0' + c/10%10)
			b.WriteByte('0' + c%10)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// splitFirst splits a presentation-form name into its first label, unescaped,
// and the rest of the name.
func splitFirst(name string) (label, rest string) {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			return b.String(), name[i+1:]
		case c == '\\' && i+3 < len(name) && isDigit(name[i+1]) && isDigit(name[i+2]) && isDigit(name[i+3]):
			b.WriteByte(byte(int(name[i+1]-'0')*100 + int(name[i+2]-'0')*10 + int(name[i+3]-'0')))
			i += 3
		case c == '\\' && i+1 < len(name):
			b.WriteByte(name[i+1])
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), ""
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// lower folds ASCII only: mDNS names compare case-insensitively in ASCII
// (RFC 6762 16), and instance labels may hold UTF-8 that must stay as it is.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
