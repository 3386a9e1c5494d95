package nodecfg

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/infradns/infradns/internal/cluster"

	"go.yaml.in/yaml/v3"
)

// BGPFile is the cluster file's bgp section: the settings every node
// shares, and per-node overrides for nodes in other racks (another ToR,
// another ASN).
type BGPFile struct {
	cluster.BGP
	// Nodes override ASN, router ID and peers by Node name.
	Nodes map[string]BGPNode
}

// BGPNode is one node's overrides; zero fields keep the shared value.
type BGPNode struct {
	ASN      uint32
	RouterID netip.Addr
	Peers    []cluster.BGPPeer
}

// For is the BGP settings of one node: the shared ones with its overrides.
func (b BGPFile) For(node string) cluster.BGP {
	out := b.BGP
	out.Peers = slices.Clone(b.Peers)
	if o, ok := b.Nodes[node]; ok {
		if o.ASN != 0 {
			out.ASN = o.ASN
		}
		if o.RouterID.IsValid() {
			out.RouterID = o.RouterID
		}
		if o.Peers != nil {
			out.Peers = slices.Clone(o.Peers)
		}
	}
	return out
}

// bgpSection reads the bgp mapping:
//
//	bgp:
//	  asn: 64513
//	  speaker: embedded        # or table (then table: 198, and no peers)
//	  peers:
//	  - {address: 10.0.1.1, asn: 64512, passwordFile: /etc/infradns-bgp/tor.password, bfd: {interval: 100ms, multiplier: 3}}
//	  nodes:
//	    worker-7: {asn: 64514, peers: [{address: 10.0.2.1, asn: 64512}]}
func bgpSection(f *File, n *yaml.Node) error {
	return mapping(n, func(k string, v *yaml.Node) error {
		switch k {
		case "asn":
			return asn(v, &f.BGP.ASN)
		case "routerID":
			return scalarAddr(v, &f.BGP.RouterID)
		case "speaker":
			s, err := scalar(v)
			f.BGP.Speaker = s
			return err
		case "table":
			s, err := scalar(v)
			if err != nil {
				return err
			}
			t, err := strconv.Atoi(s)
			if err != nil || v.Tag != "!!int" {
				return fmt.Errorf("%q is not a routing table number", s)
			}
			f.BGP.Table = t
			return nil
		case "peers":
			ps, err := peers(v)
			f.BGP.Peers = ps
			return err
		case "nodes":
			f.BGP.Nodes = map[string]BGPNode{}
			return mapping(v, func(node string, v *yaml.Node) error {
				if err := cluster.CheckNodeName(node); err != nil {
					return err
				}
				var o BGPNode
				err := mapping(v, func(k string, v *yaml.Node) error {
					switch k {
					case "asn":
						return asn(v, &o.ASN)
					case "routerID":
						return scalarAddr(v, &o.RouterID)
					case "peers":
						ps, err := peers(v)
						if ps == nil {
							ps = []cluster.BGPPeer{}
						}
						o.Peers = ps
						return err
					}
					return fmt.Errorf("unknown key %q: asn, routerID or peers", k)
				})
				f.BGP.Nodes[node] = o
				return err
			})
		}
		return fmt.Errorf("unknown key %q: asn, routerID, speaker, table, peers or nodes", k)
	})
}

// lineError is an error inside a section: the line it is on and the keys
// that lead there from the section.
type lineError struct {
	line int
	path []string
	err  error
}

func (e *lineError) Error() string {
	if len(e.path) == 0 {
		return fmt.Sprintf("line %d: %v", e.line, e.err)
	}
	return fmt.Sprintf("line %d: %s: %v", e.line, strings.Join(e.path, ": "), e.err)
}

// at puts key in front of an error's path, or makes err one at line.
func at(line int, key string, err error) error {
	var le *lineError
	if errors.As(err, &le) {
		le.path = append([]string{key}, le.path...)
		return le
	}
	return &lineError{line: line, path: []string{key}, err: err}
}

// atLine makes err one at line, with no key of its own: an item of a list,
// a key of a small mapping whose message names it.
func atLine(line int, err error) error { return &lineError{line: line, err: err} }

// mapping calls set for each key of a mapping; errors name the key and its
// line.
func mapping(n *yaml.Node, set func(k string, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("a %s, not a mapping", kindWord(n))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if prev, ok := seen[k.Value]; ok {
			return at(k.Line, k.Value, fmt.Errorf("set again (first on line %d)", prev))
		}
		seen[k.Value] = k.Line
		if err := set(k.Value, v); err != nil {
			return at(v.Line, k.Value, err)
		}
	}
	return nil
}

func asn(n *yaml.Node, dst *uint32) error {
	s, err := scalar(n)
	if err != nil {
		return err
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n.Tag != "!!int" {
		return fmt.Errorf("%q is not an AS number in [1, 4294967294]", s)
	}
	*dst = uint32(v)
	return nil
}

func peers(n *yaml.Node) ([]cluster.BGPPeer, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("a %s, not a list of peers", kindWord(n))
	}
	var out []cluster.BGPPeer
	for i, item := range n.Content {
		var p cluster.BGPPeer
		err := mapping(item, func(k string, v *yaml.Node) error {
			switch k {
			case "address":
				return scalarAddr(v, &p.Address)
			case "asn":
				return asn(v, &p.ASN)
			case "port":
				s, err := scalar(v)
				if err != nil {
					return err
				}
				x, err := strconv.ParseUint(s, 10, 16)
				if err != nil || x == 0 || v.Tag != "!!int" {
					return fmt.Errorf("%q is not a port in [1, 65535]", s)
				}
				p.Port = uint16(x)
				return nil
			case "password":
				// Never rendered: the value is not even read into an
				// error message.
				return errors.New("an inline password would be written into lbconfig's Corefile (world-readable), the MachineConfig and -dry-run's diff: " +
					"put it in a file on each node that only root can read (0600) and name that file with passwordFile")
			case "passwordFile":
				s, err := scalar(v)
				p.PasswordFile = s
				return err
			case "holdTime", "keepalive":
				s, err := scalar(v)
				if err != nil {
					return err
				}
				d, err := time.ParseDuration(s)
				if err != nil {
					return fmt.Errorf("%q is not a duration", s)
				}
				if k == "holdTime" {
					p.HoldTime = d
				} else {
					p.Keepalive = d
				}
				return nil
			case "bfd":
				if v.Kind == yaml.ScalarNode && v.Tag == "!!bool" {
					p.BFD.Off = v.Value == "false"
					return nil
				}
				return mapping(v, func(k string, v *yaml.Node) error {
					s, err := scalar(v)
					if err != nil {
						return err
					}
					switch k {
					case "interval":
						d, err := time.ParseDuration(s)
						if err != nil {
							return fmt.Errorf("%q is not a duration", s)
						}
						p.BFD.Interval = d
					case "multiplier":
						m, err := strconv.Atoi(s)
						if err != nil {
							return fmt.Errorf("%q is not a whole number", s)
						}
						p.BFD.Multiplier = m
					default:
						return fmt.Errorf("unknown key %q: interval or multiplier (bfd: false turns it off)", k)
					}
					return nil
				})
			}
			return fmt.Errorf("unknown key %q: address, asn, port, passwordFile, holdTime, keepalive or bfd", k)
		})
		if err != nil {
			return nil, at(item.Line, fmt.Sprintf("peer %d", i+1), err)
		}
		if !p.Address.IsValid() {
			return nil, at(item.Line, fmt.Sprintf("peer %d", i+1), errors.New("address is missing"))
		}
		out = append(out, p)
	}
	return out, nil
}

// bgpOptions are lbconfig's Corefile lines for the node's BGP settings.
func bgpOptions(b cluster.BGP) []string {
	if b.Speaker == cluster.SpeakerTable {
		return []string{fmt.Sprintf("bgp-speaker table %d", b.Table)}
	}
	out := []string{fmt.Sprintf("bgp-asn %d", b.ASN)}
	if b.RouterID.IsValid() {
		out = append(out, "bgp-router-id "+b.RouterID.String())
	}
	for _, p := range b.Peers {
		l := fmt.Sprintf("bgp-peer %s %d port %d hold %s keepalive %s", p.Address, p.ASN, p.Port, p.HoldTime, p.Keepalive)
		if p.PasswordFile != "" {
			l += " password-file " + p.PasswordFile
		}
		if p.BFD.Off {
			l += " bfd off"
		} else {
			l += fmt.Sprintf(" bfd %s %d", p.BFD.Interval, p.BFD.Multiplier)
		}
		out = append(out, l)
	}
	return out
}
