package kube

import (
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
)

// reconnectBackoff replaces the reflector's default (0.8 s doubling to 30 s,
// jitter 1.0): after a 60 s API outage that default waited up to a minute
// before listing again (measured against a real kube-apiserver), so the first
// change after the API came back reached keepalived/haproxy that late. Capped
// at 5 s with half jitter, a node retries three cheap requests every 5–7.5 s
// while the API is down and follows the API within seconds of its return.
var reconnectBackoff = wait.Backoff{
	Duration: 400 * time.Millisecond,
	Factor:   2,
	Jitter:   0.5,
	Steps:    1 << 20,
	Cap:      5 * time.Second,
}

// notifyStore is what a shared informer would be for this watcher, without
// its per-object handler machinery: the reflector writes into an indexer and
// every write asks for one full re-render. Owning the reflector is what lets
// the watcher choose its backoff, which shared informers do not expose.
// The EndpointSlices it holds are few and small (nodeStore holds the Nodes).
type notifyStore struct {
	cache.Indexer
	changed func()
	synced  atomic.Bool
}

func newNotifyStore(changed func()) *notifyStore {
	return &notifyStore{
		Indexer: cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{}),
		changed: changed,
	}
}

func (s *notifyStore) Add(obj any) error {
	err := s.Indexer.Add(obj)
	s.changed()
	return err
}

func (s *notifyStore) Update(obj any) error {
	err := s.Indexer.Update(obj)
	s.changed()
	return err
}

func (s *notifyStore) Delete(obj any) error {
	err := s.Indexer.Delete(obj)
	s.changed()
	return err
}

// Replace is the reflector's full listing: the first one is the sync, later
// ones (after a watch broke) may hide deletions, so each asks for a render.
func (s *notifyStore) Replace(list []any, rv string) error {
	err := s.Indexer.Replace(list, rv)
	s.synced.Store(true)
	s.changed()
	return err
}

func (s *notifyStore) Resync() error { return nil }

func (s *notifyStore) HasSynced() bool { return s.synced.Load() }
