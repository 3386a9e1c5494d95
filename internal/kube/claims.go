package kube

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lbpool"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a Service's owner may ask the allocator through annotations. Each
// is also read under MetalLB's two names (metallb.io/ and, older,
// metallb.universe.tf/), so Services move from MetalLB unchanged.
const (
	// AnnotationAddresses requests addresses, comma-separated, one per
	// family (spec.loadBalancerIP, deprecated upstream, asks for one).
	AnnotationAddresses = "infradns.io/loadBalancerIPs"
	// AnnotationPool names the pool the addresses come from.
	AnnotationPool = "infradns.io/address-pool"
	// AnnotationSharing is the sharing key: Services with the same key and
	// no port in common may share an address.
	AnnotationSharing = "infradns.io/allow-shared-ip"
)

// The default names of lbpools' objects, in the namespace deploy/rbac.yaml
// creates (DefaultStatusLeaseNamespace): the pools' ConfigMap and the Lease
// electing the one instance that writes.
const (
	PoolsConfigMap = "lb-pools"
	AllocatorLease = "lb-allocator"
	// PoolsKey is the ConfigMap's data key holding the pools.
	PoolsKey = "pools.yaml"
)

// DefaultClass is the spec.loadBalancerClass of the Services infradns
// allocates for.
const DefaultClass = cluster.LoadBalancerClass

// annotation reads key under its own name, then MetalLB's.
func annotation(svc *corev1.Service, key string) (string, bool) {
	_, suffix, _ := strings.Cut(key, "/")
	for _, k := range []string{key, "metallb.io/" + suffix, "metallb.universe.tf/" + suffix} {
		if v, ok := svc.Annotations[k]; ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// Ours reports whether the allocator serves svc: of type LoadBalancer and
// of class, or of no class when isDefault (the cluster's default load
// balancer; with another in the cluster, only one may be the default).
func Ours(svc *corev1.Service, class string, isDefault bool) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	if svc.Spec.LoadBalancerClass == nil {
		return isDefault
	}
	return *svc.Spec.LoadBalancerClass == class
}

// ToClaim is what svc (one of Ours) asks of the pools. A request that
// cannot be read makes the claim Invalid: allocating some other address
// than the owner asked for would be worse than waiting for a fix.
func ToClaim(svc *corev1.Service) lbpool.Claim {
	c := lbpool.Claim{
		Namespace:  svc.Namespace,
		Name:       svc.Name,
		PreferDual: svc.Spec.IPFamilyPolicy != nil && *svc.Spec.IPFamilyPolicy == corev1.IPFamilyPolicyPreferDualStack,
		Local:      svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal,
	}
	for _, f := range svc.Spec.IPFamilies {
		c.Families = append(c.Families, f == corev1.IPv6Protocol)
	}
	if len(c.Families) == 0 {
		c.Families = []bool{false}
	}
	for _, p := range svc.Spec.Ports {
		c.Ports = append(c.Ports, lbpool.Port{Protocol: string(p.Protocol), Port: p.Port})
	}
	c.Pool, _ = annotation(svc, AnnotationPool)
	c.SharingKey, _ = annotation(svc, AnnotationSharing)
	requested, field := svc.Spec.LoadBalancerIP, "spec.loadBalancerIP"
	if v, ok := annotation(svc, AnnotationAddresses); ok {
		requested, field = v, "annotation "+AnnotationAddresses
	}
	if requested != "" {
		for s := range strings.SplitSeq(requested, ",") {
			ip, err := netip.ParseAddr(strings.TrimSpace(s))
			if err != nil || ip.Zone() != "" {
				c.Invalid = fmt.Sprintf("%s: %q is not an address", field, strings.TrimSpace(s))
				break
			}
			c.Requested = append(c.Requested, ip.Unmap())
		}
	}
	c.Current = statusAddrs(svc)
	return c
}

// Claims are what the Services of class (and of none when isDefault) ask
// of the pools, with ours the Services they are of, in the same order;
// after them in claims come the Foreign claims of the other Services of type
// LoadBalancer with an address: another allocator's (two tools given
// overlapping ranges), whose addresses are never given to one of ours.
func Claims(svcs []*corev1.Service, class string, isDefault bool) (ours []*corev1.Service, claims []lbpool.Claim) {
	var foreign []lbpool.Claim
	for _, svc := range svcs {
		switch {
		case Ours(svc, class, isDefault):
			ours = append(ours, svc)
			claims = append(claims, ToClaim(svc))
		case svc.Spec.Type == corev1.ServiceTypeLoadBalancer:
			if cur := statusAddrs(svc); len(cur) > 0 {
				foreign = append(foreign, lbpool.Claim{Namespace: svc.Namespace, Name: svc.Name, Current: cur, Foreign: true})
			}
		}
	}
	return ours, append(claims, foreign...)
}

// statusAddrs are the IPs of svc's status.loadBalancer.ingress.
func statusAddrs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if ip, err := netip.ParseAddr(in.IP); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// StatusPatch is the merge patch that makes svc's load-balancer ingress
// addrs (none: empty). The resourceVersion makes it conditional: a Service
// changed since it was read is decided again, not overwritten.
func StatusPatch(resourceVersion string, addrs []netip.Addr) []byte {
	type ingress struct {
		IP     string `json:"ip"`
		IPMode string `json:"ipMode"`
	}
	in := make([]ingress, 0, len(addrs))
	for _, a := range addrs {
		// VIP: the address is a node's, packets reach it with it as their
		// destination (kube-proxy need not short-cut it).
		in = append(in, ingress{IP: a.String(), IPMode: string(corev1.LoadBalancerIPModeVIP)})
	}
	b, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion},
		"status":   map[string]any{"loadBalancer": map[string]any{"ingress": in}},
	})
	return b
}

// TrimClaimService keeps of a Service what ToClaim, Ours and StatusPatch
// read: a reflector of every Service of the cluster holds no more.
func TrimClaimService(obj any) (any, error) {
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	out := &corev1.Service{
		TypeMeta: svc.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID, ResourceVersion: svc.ResourceVersion,
		},
		Spec: corev1.ServiceSpec{
			Type:                  svc.Spec.Type,
			LoadBalancerClass:     svc.Spec.LoadBalancerClass,
			LoadBalancerIP:        svc.Spec.LoadBalancerIP,
			IPFamilies:            svc.Spec.IPFamilies,
			IPFamilyPolicy:        svc.Spec.IPFamilyPolicy,
			ExternalTrafficPolicy: svc.Spec.ExternalTrafficPolicy,
		},
		Status: svc.Status,
	}
	for _, p := range svc.Spec.Ports {
		out.Spec.Ports = append(out.Spec.Ports, corev1.ServicePort{Protocol: p.Protocol, Port: p.Port})
	}
	for k, v := range svc.Annotations {
		for _, a := range []string{AnnotationAddresses, AnnotationPool, AnnotationSharing} {
			_, suffix, _ := strings.Cut(a, "/")
			if strings.HasSuffix(k, "/"+suffix) {
				if out.Annotations == nil {
					out.Annotations = map[string]string{}
				}
				out.Annotations[k] = v
			}
		}
	}
	return out, nil
}
