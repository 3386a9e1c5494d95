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

// ServiceNamesLabel is the label below the cluster domain the Services'
// names live under by default: SERVICE.NAMESPACE.lb.<domain>.
const ServiceNamesLabel = "lb"

// LoadBalancerClass is the spec.loadBalancerClass of the Services whose
// addresses infradns allocates (lbpools).
const LoadBalancerClass = "infradns.io/lb"

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

// ServiceName is a name the Services answer to, relative to their domain
// ("web.shop" for Service web in namespace shop; a hostname annotation as
// it is), and the index of the Service that has it.
type ServiceName struct {
	Rel     string
	Service int
	// Hostname: the name comes from AnnotationHostname.
	Hostname bool
}

// HostnameRefusal is an AnnotationHostname that is not served, and why.
type HostnameRefusal struct {
	Service, Hostname, Reason string
}

// ServiceNames are the names of svcs (sorted by namespace and name), in
// the order of the rules that give them:
//
//   - SERVICE.NAMESPACE for every Service: Kubernetes makes these unique,
//     and namespaces are its tenancy boundary.
//   - A hostname annotation adds HOSTNAME, unless it is a SERVICE.NAMESPACE
//     name, or it ends in the name of another namespace that has a Service
//     here: a Service may not take a name below a namespace not its own
//     (team a's Service must not answer for db.team-b). A namespace that
//     gets its first Service later takes such a name back.
//   - Two Services asking for one hostname: the first by namespace/name
//     keeps it, so the answer does not depend on the order of events.
//
// lbservices answers these names and `infradns status` lists them.
func ServiceNames(svcs []Service) ([]ServiceName, []HostnameRefusal) {
	names := make([]ServiceName, 0, len(svcs))
	taken := make(map[string]int, len(svcs)) // name → index of its holder
	namespaces := map[string]bool{}
	for i, s := range svcs {
		rel := s.Name + "." + s.Namespace
		taken[rel] = i
		names = append(names, ServiceName{Rel: rel, Service: i})
		namespaces[s.Namespace] = true
	}
	var refused []HostnameRefusal
	for i, s := range svcs {
		h := s.Hostname
		if h == "" {
			continue
		}
		last := h[strings.LastIndexByte(h, '.')+1:]
		if j, ok := taken[h]; ok {
			reason := "Service " + svcs[j].Key() + " has it"
			if h == svcs[j].Name+"."+svcs[j].Namespace {
				reason = "it is a SERVICE.NAMESPACE name"
			}
			refused = append(refused, HostnameRefusal{s.Key(), h, reason})
			continue
		}
		if last != s.Namespace && namespaces[last] {
			refused = append(refused, HostnameRefusal{s.Key(), h, "it is below namespace " + last})
			continue
		}
		taken[h] = i
		names = append(names, ServiceName{Rel: h, Service: i, Hostname: true})
	}
	return names, refused
}
