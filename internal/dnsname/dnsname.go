// Package dnsname holds the one rule for the names infradns takes from
// people and from the network: host-name labels (RFC 1123). It is pure, so
// the Corefile parsers, the cluster model and the tests share it.
package dnsname

import (
	"errors"
	"fmt"
	"strings"
)

// MaxDomainLen is the longest domain name in presentation form without the
// trailing dot: 255 octets on the wire (RFC 1035 2.3.4) less the length octets.
const MaxDomainLen = 253

// CheckDomain reports whether name is a host-style domain name (RFC 1123 2.1):
// one or more labels of letters, digits and hyphens, 1 to 63 characters each,
// neither starting nor ending with a hyphen, and a last label that is not all
// digits (an IPv4 address is not a domain). One trailing dot is allowed; the
// root "." is not a domain here. Case is not checked: callers lower-case.
// The error names the first bad label.
func CheckDomain(name string) error {
	n := strings.TrimSuffix(name, ".")
	if n == "" {
		return errors.New("no labels: want a domain such as ocp4.example.com")
	}
	if len(n) > MaxDomainLen {
		return fmt.Errorf("longer than %d characters", MaxDomainLen)
	}
	if err := CheckLabels(n); err != nil {
		return err
	}
	last := n[strings.LastIndexByte(n, '.')+1:]
	if strings.Trim(last, "0123456789") == "" {
		return fmt.Errorf("last label %q is all digits: not a domain name", last)
	}
	return nil
}

// CheckLabels reports whether rel is a relative name of one or more host-name
// labels (see CheckLabel), such as "apps" or "shard1.apps". A leading,
// trailing or doubled dot is an empty label.
func CheckLabels(rel string) error {
	for l := range strings.SplitSeq(rel, ".") {
		if err := CheckLabel(l); err != nil {
			return err
		}
	}
	return nil
}

// CheckLabel reports whether l is a host-name label (RFC 1123 2.1, RFC 952):
// 1 to 63 letters, digits and hyphens, not starting or ending with a hyphen.
// Wildcards ('*'), underscores, escapes, spaces and shell or zone-file
// metacharacters are all refused.
func CheckLabel(l string) error {
	switch {
	case l == "":
		return errors.New("empty label (a leading, trailing or doubled dot)")
	case len(l) > 63:
		return fmt.Errorf("label %q is longer than 63 characters", l)
	}
	for _, c := range l {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("label %q has %q: only letters, digits and '-' are allowed", l, c)
		}
	}
	if l[0] == '-' || l[len(l)-1] == '-' {
		return fmt.Errorf("label %q starts or ends with '-'", l)
	}
	return nil
}
