package cluster

import "strings"

// HostNodeName is the Node name a host registers as when no configuration
// names one: kubelet's default, the host name without surrounding space
// and in lower case (k8s.io/component-helpers/node/util.GetHostname). A
// configuration shared by many nodes (an OpenShift MachineConfig, one per
// pool) names no node, so each node's lbconfig calls this with its own
// host name when it starts; what comes out is held to the Node name rules,
// as it reaches keepalived's router_id and the status Leases.
func HostNodeName(hostname string) (string, error) {
	n := strings.ToLower(strings.TrimSpace(hostname))
	if err := CheckNodeName(n); err != nil {
		return "", err
	}
	return n, nil
}
