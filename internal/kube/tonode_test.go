package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestToNodeLabels: the role and the drain label become flags; a heartbeat
// that changes neither compares equal.
func TestToNodeLabels(t *testing.T) {
	for _, tc := range []struct {
		labels                 map[string]string
		controlPlane, excluded bool
	}{
		{nil, false, false},
		{map[string]string{"node-role.kubernetes.io/master": ""}, true, false},
		{map[string]string{"node-role.kubernetes.io/control-plane": "", LabelExcludeFromLB: "true"}, true, true},
		// Kubernetes checks the key alone: any value excludes.
		{map[string]string{LabelExcludeFromLB: ""}, false, true},
	} {
		n := ToNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-0", Labels: tc.labels}})
		if n.ControlPlane != tc.controlPlane || n.Excluded != tc.excluded {
			t.Errorf("labels %v: %+v, want control plane %v, excluded %v", tc.labels, n, tc.controlPlane, tc.excluded)
		}
	}
}
