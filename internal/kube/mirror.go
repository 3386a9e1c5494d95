package kube

import (
	"context"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// Mirror keeps the objects of one list-and-watch in memory, trimmed by
// its transform, and calls changed after each change. It is an informer
// with the reconnect backoff of the other watches here: client-go's
// informers take no backoff, and theirs (0.8 s doubling to 30 s) kept
// lbpools' view of the Services stale for more than 15 s after a 10-s API
// outage, so a new Service waited that long for its address.
type Mirror struct {
	cache.Store
	changed   func()
	transform cache.TransformFunc
	synced    atomic.Bool
}

// NewMirror returns an empty Mirror; transform may be nil.
func NewMirror(changed func(), transform cache.TransformFunc) *Mirror {
	if transform == nil {
		transform = func(o any) (any, error) { return o, nil }
	}
	return &Mirror{Store: cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc), changed: changed, transform: transform}
}

// Run lists and watches lw into the Mirror until ctx ends.
func (m *Mirror) Run(ctx context.Context, name string, lw cache.ListerWatcher, obj runtime.Object) {
	b := reconnectBackoff
	cache.NewReflectorWithOptions(lw, obj, m, cache.ReflectorOptions{Name: name, Backoff: &b}).RunWithContext(ctx)
}

// HasSynced reports whether the first listing is in.
func (m *Mirror) HasSynced() bool { return m.synced.Load() }

// The reflector applies a store's Transformer only to a streamed list
// (watch-list), so every object is trimmed here, before it is stored; the
// transform must accept an object it already trimmed.

func (m *Mirror) Add(obj any) error    { return m.put(obj, m.Store.Add) }
func (m *Mirror) Update(obj any) error { return m.put(obj, m.Store.Update) }
func (m *Mirror) Delete(obj any) error { return m.after(m.Store.Delete(obj)) }

func (m *Mirror) put(obj any, store func(any) error) error {
	t, err := m.transform(obj)
	if err != nil {
		return err
	}
	return m.after(store(t))
}

// Replace is a full listing: the first is the sync.
func (m *Mirror) Replace(list []any, rv string) error {
	trimmed := make([]any, 0, len(list))
	for _, o := range list {
		t, err := m.transform(o)
		if err != nil {
			return err
		}
		trimmed = append(trimmed, t)
	}
	err := m.Store.Replace(trimmed, rv)
	m.synced.Store(true)
	return m.after(err)
}

func (m *Mirror) after(err error) error {
	m.changed()
	return err
}
