package lbpools

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/lbpool"

	corev1 "k8s.io/api/core/v1"
)

// write is one Service status to change.
type write struct {
	svc   *corev1.Service
	addrs []netip.Addr // none: cleared
	// ours: allocated for the Service; else the Service is no longer of
	// type LoadBalancer and its stale addresses (from the pools) go.
	ours bool
}

// verdict is a Service's allocation, for events and status.
type verdict struct {
	svc    *corev1.Service
	result lbpool.Result
}

// outcome is what one pass decides: the writes, and what is reported.
type outcome struct {
	writes   []write
	verdicts []verdict
	usages   []lbpool.Usage
}

// plan allocates for the Services of class (and of none when isDefault)
// from cfg, and lists the statuses to write. Pure: the loop applies it.
func plan(cfg lbpool.Config, svcs []*corev1.Service, class string, isDefault bool) outcome {
	out := outcome{}
	ours, claims := kube.Claims(svcs, class, isDefault)
	for _, svc := range svcs {
		// No longer a LoadBalancer (the type is the one thing that can
		// change: a class is immutable): what we wrote goes, so the
		// address is free and no stale name is served from it. An
		// address outside the pools is another's and is left.
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			continue
		}
		cur := kube.ToClaim(svc).Current
		if len(cur) > 0 && !slices.ContainsFunc(cur, func(a netip.Addr) bool { return cfg.Of(a) == nil }) {
			out.writes = append(out.writes, write{svc: svc})
		}
	}
	res := lbpool.Allocate(cfg, claims)[:len(ours)]
	for i, r := range res {
		out.verdicts = append(out.verdicts, verdict{svc: ours[i], result: r})
		if !lbpool.SameAddrs(claims[i].Current, r.Addrs) || len(ours[i].Status.LoadBalancer.Ingress) != len(r.Addrs) {
			out.writes = append(out.writes, write{svc: ours[i], addrs: r.Addrs, ours: true})
		}
	}
	out.usages = lbpool.Usages(cfg, res)
	slices.SortFunc(out.writes, func(a, b write) int {
		return strings.Compare(a.svc.Namespace+"/"+a.svc.Name, b.svc.Namespace+"/"+b.svc.Name)
	})
	return out
}

// written is a status this instance wrote and its watch may not have
// brought back yet: against the Service's resourceVersion rv.
type written struct {
	rv    string
	addrs []netip.Addr
}

// withWritten is svcs as they are after this instance's own writes: a
// Service whose resourceVersion is still the one a write was made against
// gets the written addresses (a copy; the watch's objects are shared).
// Without it a pass that runs before the watch returns a write (another
// change kicked it) sees the address free and may give it to a second
// Service, which then moves one of the two. Entries the watch has caught up
// with, or whose Service is gone, are dropped from w.
func withWritten(svcs []*corev1.Service, w map[string]written) []*corev1.Service {
	if len(w) == 0 {
		return svcs
	}
	out := make([]*corev1.Service, len(svcs))
	seen := make(map[string]bool, len(w))
	for i, svc := range svcs {
		out[i] = svc
		key := svc.Namespace + "/" + svc.Name
		e, ok := w[key]
		if !ok {
			continue
		}
		seen[key] = true
		if svc.ResourceVersion != e.rv {
			delete(w, key) // the watch brought it (or a newer change)
			continue
		}
		c := svc.DeepCopy()
		c.Status.LoadBalancer.Ingress = nil
		for _, a := range e.addrs {
			c.Status.LoadBalancer.Ingress = append(c.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: a.String()})
		}
		out[i] = c
	}
	for key := range w {
		if !seen[key] {
			delete(w, key)
		}
	}
	return out
}
