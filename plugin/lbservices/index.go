package lbservices

import (
	"slices"
	"strings"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/records"
)

// index is what ServeDNS answers from: names relative to the domain (lower
// case, "web.shop" for Service web in namespace shop) → addresses. It is
// built whole from one list of Services and swapped atomically, so a query
// reads it without a lock.
type index struct {
	names map[string]records.Set
	// ents are the empty non-terminals between the domain and the names
	// (a namespace, the upper labels of a hostname): NODATA, not NXDOMAIN.
	ents    map[string]bool
	reverse records.Reverse
	// refused are the hostname annotations not served, with the reason.
	refused []refusal
}

// A refusal is a hostname annotation that is not served.
type refusal struct {
	service, hostname, reason string
}

func (ix *index) lookup(rel string) (records.Set, bool) {
	if ix == nil {
		return records.Set{}, false
	}
	s, ok := ix.names[rel]
	return s, ok
}

func (ix *index) has(rel string) bool { _, ok := ix.names[rel]; return ok }

func (ix *index) ent(rel string) bool { return ix != nil && ix.ents[rel] }

func (ix *index) reverseMap() records.Reverse {
	if ix == nil {
		return nil
	}
	return ix.reverse
}

// buildIndex turns the Services into names below each of domains (the same
// relative names in every domain; PTRs name them in each). The rules, in the
// order they apply:
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
// The Services must be sorted by namespace and name (kube.ServiceWatcher's
// order).
func buildIndex(svcs []cluster.Service, domains []string) *index {
	ix := &index{names: make(map[string]records.Set, len(svcs)), ents: map[string]bool{}}
	sets := make([]records.Set, len(svcs))
	namespaces := map[string]bool{}
	for i, s := range svcs {
		sets[i] = records.SetOf(s.Addrs)
		ix.names[s.Name+"."+s.Namespace] = sets[i]
		namespaces[s.Namespace] = true
	}
	owner := map[string]string{} // hostname → the Service that holds it
	for i, s := range svcs {
		h := s.Hostname
		if h == "" {
			continue
		}
		key := s.Key()
		last := h[strings.LastIndexByte(h, '.')+1:]
		switch {
		case owner[h] != "":
			ix.refused = append(ix.refused, refusal{key, h, "Service " + owner[h] + " has it"})
		case ix.has(h):
			ix.refused = append(ix.refused, refusal{key, h, "it is a SERVICE.NAMESPACE name"})
		case last != s.Namespace && namespaces[last]:
			ix.refused = append(ix.refused, refusal{key, h, "it is below namespace " + last})
		default:
			owner[h] = key
			ix.names[h] = sets[i]
		}
	}
	for rel := range ix.names {
		for i := strings.IndexByte(rel, '.'); i >= 0; i = strings.IndexByte(rel, '.') {
			rel = rel[i+1:]
			if _, ok := ix.names[rel]; !ok {
				ix.ents[rel] = true
			}
		}
	}
	ix.reverse = records.Reverse{}
	for i, s := range svcs {
		for _, d := range domains {
			ix.reverse.Add(sets[i], s.Name+"."+s.Namespace+"."+d)
		}
	}
	ix.reverse.Sort()
	slices.SortFunc(ix.refused, func(a, b refusal) int { return strings.Compare(a.service, b.service) })
	return ix
}
