package cluster

import "testing"

// TestHostNodeName: the host name as kubelet makes it a Node name, and a
// host name that is none refused.
func TestHostNodeName(t *testing.T) {
	for in, want := range map[string]string{
		"master-0":                  "master-0",
		"Master-1.OCP4.example.com": "master-1.ocp4.example.com",
		" worker-7\n":               "worker-7",
	} {
		if got, err := HostNodeName(in); err != nil || got != want {
			t.Errorf("HostNodeName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "  ", "master_0", "localhost..", "-x"} {
		if got, err := HostNodeName(in); err == nil {
			t.Errorf("HostNodeName(%q) = %q, want an error", in, got)
		}
	}
}
