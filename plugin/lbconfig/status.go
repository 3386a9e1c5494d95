package lbconfig

import (
	"context"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/vrrp"
)

// Lease timing: renewed every leaseRenew while held, so a dead holder's
// lease shows expired after leaseDuration. A renewal that fails is tried
// again at the next tick (1 s), and one that the API never answers gives up
// after leaseTimeout: the loop renews every held VIP in turn and also keeps
// vip_held current, so with an API that hangs, a round over four VIPs takes
// 1 + 4×2 s and each lease is still tried twice in the 20 s between the
// renewal being due and the lease expiring.
const (
	leaseRenew    = 10 * time.Second
	leaseDuration = 30 * time.Second
	leaseTimeout  = 2 * time.Second
)

// vipStatus reports which VIPs this node holds: the vip_held metric every
// second and, with the status-lease option, a Lease per VIP.
type vipStatus struct {
	model     *cluster.Model
	namespace string
	client    atomic.Pointer[kube.Client]
}

type vipInfo struct {
	addr  netip.Addr
	kind  string
	lease string
}

// leaseMeta are the labels and annotations of x's Lease.
func (v *vipStatus) leaseMeta(x vipInfo) (labels, annotations map[string]string) {
	return map[string]string{
			"app.kubernetes.io/name": "infradns",
			kube.LabelCluster:        v.model.Name(),
			kube.LabelGroup:          x.kind,
			kube.LabelFamily:         cluster.Family(x.addr),
		}, map[string]string{
			kube.AnnotationVIP: x.addr.String(),
		}
}

// vips are the model's VIPs with the group each belongs to and the name
// of its Lease: CLUSTER-GROUP-vip-FAMILY (ocp4-api-vip-v4,
// ocp4-ingress-2-vip-v6).
func (v *vipStatus) vips() []vipInfo {
	var out []vipInfo
	for _, g := range v.model.Groups() {
		for _, a := range g.VIPs {
			out = append(out, vipInfo{addr: a, kind: g.Name, lease: cluster.StatusLeaseName(v.model.Name(), g.Name, a)})
		}
	}
	return out
}

func (v *vipStatus) run(ctx context.Context) {
	if v.model.Mode() == cluster.ModeBGP {
		// Every eligible node announces the VIPs at once: there is no one
		// holder for a Lease to name. bgp_announced and bgp_session_up
		// say what this node announces.
		return
	}
	vips := v.vips()
	all := make([]netip.Addr, len(vips))
	for i, x := range vips {
		all[i] = x.addr
	}
	since := map[netip.Addr]time.Time{}
	renewed := map[netip.Addr]time.Time{}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		held, err := vrrp.Held(v.model.Interface(), all)
		if err == nil {
			now := time.Now()
			for _, x := range vips {
				if !slices.Contains(held, x.addr) {
					delete(since, x.addr)
					delete(renewed, x.addr)
					vipHeld.WithLabelValues(x.addr.String(), x.kind).Set(0)
					continue
				}
				vipHeld.WithLabelValues(x.addr.String(), x.kind).Set(1)
				if _, ok := since[x.addr]; !ok {
					since[x.addr] = now
					log.Infof("this node holds the %s vip %s", x.kind, x.addr)
				}
				c := v.client.Load()
				if v.namespace == "" || c == nil || now.Sub(renewed[x.addr]) < leaseRenew {
					continue
				}
				h := kube.HolderLease{Client: *c, Namespace: v.namespace, Duration: leaseDuration, Timeout: leaseTimeout}
				h.Labels, h.Annotations = v.leaseMeta(x)
				if err := h.Renew(ctx, x.lease, v.model.NodeName(), since[x.addr]); err != nil {
					log.Warningf("vip status: %v", err)
					continue
				}
				renewed[x.addr] = now
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
