package cluster

import (
	"fmt"
	"net/netip"
	"strings"
)

// Service is what the cluster's names need of a Kubernetes Service of type
// LoadBalancer: who it is, the addresses its load balancer was given
// (status.loadBalancer.ingress, whoever allocated them: infradns, MetalLB,
// kube-vip's cloud provider) and the friendlier name its owner asked for.
type Service struct {
	Namespace, Name string
	// Hostname is the checked value of AnnotationHostname: one or more
	// lower-case host-name labels, "" when there is none.
	Hostname string
	// Addrs are the load-balancer IPs, unicast, unmapped, sorted, each once.
	Addrs []netip.Addr
}

// AnnotationHostname asks for a name besides SERVICE.NAMESPACE: its value,
// one or more host-name labels, below the same domain.
const AnnotationHostname = "infradns.io/hostname"

// Key is the Service's "namespace/name", the order Services are listed in.
func (s Service) Key() string { return s.Namespace + "/" + s.Name }

// CheckHostname checks an AnnotationHostname value: host-name labels
// separated by dots, no trailing dot, at most 200 characters (room for the
// domain below which it is served).
func CheckHostname(h string) error {
	if h == "" || len(h) > 200 || strings.HasSuffix(h, ".") {
		return fmt.Errorf("%q is not a host name: want one or more DNS-1123 labels, e.g. shop or shop.eu, at most 200 characters, no trailing dot", h)
	}
	for l := range strings.SplitSeq(h, ".") {
		if err := CheckLabel(l); err != nil {
			return err
		}
	}
	return nil
}
