// Package vrrp holds what infradns knows about VRRP itself: the router IDs a
// cluster uses, the advertisement wire format, the detection of other
// routers on the link that would fight over our IDs or addresses, and what
// makes a hand-over lose nothing (the VIP's copy on lo, the relay of the
// connections open at the move).
package vrrp

import (
	"errors"
)

// RouterIDs are the VRRP virtual router IDs of one cluster. The same ID is used
// for the IPv4 and the IPv6 instance of a VIP, as OpenShift does: VRRP IDs are
// per address family, so they cannot collide with each other.
type RouterIDs struct {
	API     uint8
	Ingress uint8
}

// ErrEmptyCluster is returned when router IDs are asked for an empty cluster name.
var ErrEmptyCluster = errors.New("cluster name is empty")

// Fletcher8 is baremetal-runtimecfg's checksum, reproduced bit for bit
// (uint8 arithmetic included) so a cluster migrating from OpenShift's stack
// keeps its router IDs and never has two routers claim one VIP under two IDs.
func Fletcher8(s string) uint8 {
	var a, b uint8
	for i := 0; i < len(s); i++ {
		a = (a + s[i]) % 15
		b = (b + a) % 15
	}
	return b<<4 | a
}

// ClusterIDs returns the OpenShift-compatible router IDs of a cluster: the
// Fletcher-8 of "<cluster>-api" and "<cluster>-ingress", plus one because 0 is
// not a valid VRID, with the ingress ID bumped when both are equal. The values
// lie in 1..240 (Fletcher8 never exceeds 0xEE).
func ClusterIDs(cluster string) (RouterIDs, error) {
	if cluster == "" {
		return RouterIDs{}, ErrEmptyCluster
	}
	ids := RouterIDs{
		API:     Fletcher8(cluster+"-api") + 1,
		Ingress: Fletcher8(cluster+"-ingress") + 1,
	}
	if ids.Ingress == ids.API {
		ids.Ingress++
	}
	return ids, nil
}
