package kube

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// realisticNode is a Node the size kubelet keeps (~15 KB of JSON): two
// InternalIPs, 13 labels, 8 conditions, 40 images.
func realisticNode(i int, heartbeat int64) *corev1.Node {
	name := fmt.Sprintf("worker-%04d.ocp4.example.com", i)
	n := &corev1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: "2c7f6a7e-1d8b-4f0e-9a51-5e3c2b9d7a10", ResourceVersion: fmt.Sprint(1000 + heartbeat),
			Labels: map[string]string{}, Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)},
				{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("fd00::%x", i+1)},
				{Type: corev1.NodeHostName, Address: name},
			},
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"), corev1.ResourcePods: resource.MustParse("250")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("15500m"), corev1.ResourceMemory: resource.MustParse("63Gi"), corev1.ResourcePods: resource.MustParse("250")},
			NodeInfo:    corev1.NodeSystemInfo{MachineID: "0123456789abcdef0123456789abcdef", KernelVersion: "5.14.0-427.el9.x86_64", OSImage: "Red Hat Enterprise Linux CoreOS", ContainerRuntimeVersion: "cri-o://1.31.0", KubeletVersion: "v1.36.3", Architecture: "amd64", OperatingSystem: "linux"},
		},
	}
	for j := range 13 {
		n.Labels[fmt.Sprintf("example.com/label-%02d", j)] = fmt.Sprintf("value-%02d", j)
	}
	for j, c := range []corev1.NodeConditionType{"MemoryPressure", "DiskPressure", "PIDPressure", "Ready", "NetworkUnavailable", "KernelDeadlock", "ReadonlyFilesystem", "FrequentKubeletRestart"} {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: c, Status: corev1.ConditionFalse,
			LastHeartbeatTime: metav1.NewTime(time.Unix(heartbeat, 0)), LastTransitionTime: metav1.NewTime(time.Unix(int64(j), 0)),
			Reason: "KubeletHasSufficient" + string(c), Message: "kubelet has sufficient resources and nothing to report on " + string(c)})
	}
	for j := range 40 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{SizeBytes: int64(100+j) << 20, Names: []string{
			fmt.Sprintf("quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:%064x", j),
			fmt.Sprintf("registry.example.com/mirror/component-%02d:v4.18.%d", j, j)}})
	}
	return n
}

// BenchmarkNodeDecode is the work every watching process does per Node
// update it receives: decoding the event, in the two encodings the API
// server offers, and the size of one Node in each.
func BenchmarkNodeDecode(b *testing.B) {
	n := realisticNode(1, 1)
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
		list[i] = realisticNode(i, 1)
	}
	_ = s.Replace(list, "1")
	s.Nodes()
	beats := make([]*corev1.Node, 100)
	for i := range beats {
		beats[i] = realisticNode(i*37%nodes, int64(2+i))
	}
	renders = 0
	i := 0
	for b.Loop() {
		_ = s.Update(beats[i%len(beats)])
		i++
	}
	b.ReportMetric(float64(renders)/float64(b.N), "renders/op")
}
