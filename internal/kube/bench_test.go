package kube

import (
	"testing"

	"github.com/infradns/infradns/internal/kubetest"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// BenchmarkNodeDecode is the work every watching process does per Node
// update it receives: decoding the event, in the two encodings the API
// server offers, and the size of one Node in each.
func BenchmarkNodeDecode(b *testing.B) {
	n := kubetest.RealisticNode(1, 1)
	for _, ct := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), ct)
		if !ok {
			b.Fatalf("no serializer for %s", ct)
		}
		enc := codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
		data, err := runtime.Encode(enc, n)
		if err != nil {
			b.Fatal(err)
		}
		dec := codecs.UniversalDeserializer()
		b.Run(ct, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := dec.Decode(data, nil, &corev1.Node{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(data)), "bytes/node")
		})
	}
}

// BenchmarkNodeHeartbeat is what a heartbeat costs once decoded, with 5,000
// Nodes stored: before nodeStore it was a re-list, sort and render of every
// Node (20.7 ms per update measured at 5,000 Nodes).
func BenchmarkNodeHeartbeat(b *testing.B) {
	const nodes = 5000
	renders := 0
	s := newNodeStore(func() { renders++ }, func(Drop) {})
	list := make([]any, nodes)
	for i := range nodes {
		list[i] = kubetest.RealisticNode(i, 1)
	}
	_ = s.Replace(list, "1")
	s.Nodes()
	beats := make([]*corev1.Node, 100)
	for i := range beats {
		beats[i] = kubetest.RealisticNode(i*37%nodes, int64(2+i))
	}
	renders = 0
	i := 0
	for b.Loop() {
		_ = s.Update(beats[i%len(beats)])
		i++
	}
	b.ReportMetric(float64(renders)/float64(b.N), "renders/op")
}
