package lbpools

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"

	corev1 "k8s.io/api/core/v1"
)

// announcers follows who announces each Service's addresses over BGP. The
// nodes decide it themselves from the same objects (cluster.ServiceVIPs);
// the writer only tells the Service's owner (an event when it changes) and
// the alert (how many Services no node may announce).
type announcers struct {
	// last is each Service's Announcers at the previous view; nil before
	// the first one, which is taken in silence: a new writer must not
	// repeat every Service's events.
	last map[string][]string
}

// announcement is an event to record on a Service.
type announcement struct {
	key            string
	typ, reason    string
	message        string
	unannouncedNow bool
}

// maxListed is how many nodes an event names before it counts the rest.
const maxListed = 10

// update takes a new view of the Services (kube.AnnounceWatcher's) and
// returns the events its changes make, and how many Services no node may
// announce.
func (a *announcers) update(svcs []cluster.LBService) (events []announcement, unannounced int) {
	first := a.last == nil
	next := make(map[string][]string, len(svcs))
	for _, s := range svcs {
		by := s.Announcers()
		if by == nil {
			unannounced++
		}
		next[s.Key()] = by
		prev, seen := a.last[s.Key()]
		// Announcers is nil (nobody) or names someone, so Equal tells the two apart.
		if first || (seen && slices.Equal(prev, by)) {
			continue
		}
		events = append(events, announcementOf(s.Key(), by))
	}
	a.last = next
	return events, unannounced
}

func announcementOf(key string, by []string) announcement {
	switch {
	case by == nil:
		return announcement{key: key, typ: corev1.EventTypeWarning, reason: "NotAnnounced", unannouncedNow: true,
			message: "Announced by no node: externalTrafficPolicy Local and no ready endpoint"}
	case len(by) == 1 && by[0] == cluster.EveryNode:
		return announcement{key: key, typ: corev1.EventTypeNormal, reason: "Announced", message: "Announced over BGP by every node"}
	}
	list := by
	more := ""
	if len(list) > maxListed {
		list, more = list[:maxListed], fmt.Sprintf(" and %d more", len(by)-maxListed)
	}
	return announcement{key: key, typ: corev1.EventTypeNormal, reason: "Announced",
		message: fmt.Sprintf("Announced over BGP by %s%s (externalTrafficPolicy Local: the nodes with a ready endpoint)", strings.Join(list, ", "), more)}
}

// followAnnouncers runs while this instance writes: it follows the Services
// and their EndpointSlices, records the events and sets the gauge. find
// gives the Service object an event names.
func (l *LBPools) followAnnouncers(ctx context.Context, client kube.Client, find func(key string) *corev1.Service) {
	a := &announcers{}
	w := kube.NewAnnounceWatcher(client, kube.AnnounceOptions{Class: l.class, Default: l.isDefault})
	w.Run(ctx, func(svcs []cluster.LBService) {
		events, n := a.update(svcs)
		unannounced().Set(float64(n))
		for _, e := range events {
			svc := find(e.key)
			if svc == nil {
				continue // gone since
			}
			if e.unannouncedNow {
				log.Warningf("Service %s: %s", e.key, e.message)
			} else {
				log.Infof("Service %s: %s", e.key, e.message)
			}
			l.event(ctx, client, svc, e.typ, e.reason, e.message)
		}
	})
}
