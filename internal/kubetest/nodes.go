package kubetest

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RealisticNode is Node i the size kubelet keeps it (~12 KB of JSON, 9 KB
// of protobuf): two InternalIPs (10.0.x.y and fd00::x) and a Hostname, 13
// labels, 8 conditions whose lastHeartbeatTime is heartbeat (Unix seconds),
// 40 images. Scale tests create thousands; the benchmarks decode them.
func RealisticNode(i int, heartbeat int64) *corev1.Node {
	name := fmt.Sprintf("worker-%04d", i)
	n := &corev1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name,
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
