package nodecfg

import (
	"errors"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// DecodePod reads a static pod manifest strictly: an unknown or duplicate
// field is an error (kubelet would drop it silently and the pod would run
// without it), and the pod must be one kubelet runs as a node agent here.
func DecodePod(b []byte) (*corev1.Pod, error) {
	var p corev1.Pod
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		return nil, fmt.Errorf("not a strict Pod: %w", err)
	}
	if err := checkPod(&p); err != nil {
		return nil, fmt.Errorf("pod %s: %w", p.Name, err)
	}
	return &p, nil
}

func checkPod(p *corev1.Pod) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if p.APIVersion != "v1" || p.Kind != "Pod" {
		bad("apiVersion/kind %s/%s, want v1/Pod", p.APIVersion, p.Kind)
	}
	if p.Name == "" || p.Namespace == "" {
		bad("name and namespace are required")
	}
	s := p.Spec
	if !s.HostNetwork {
		bad("hostNetwork must be true: the pod serves and holds the node's addresses")
	}
	if s.PriorityClassName != "system-node-critical" {
		bad("priorityClassName %q, want system-node-critical", s.PriorityClassName)
	}
	if len(s.Containers) == 0 {
		bad("no containers")
	}
	vols := map[string]corev1.Volume{}
	for _, v := range s.Volumes {
		if _, dup := vols[v.Name]; dup {
			bad("volume %q twice", v.Name)
		}
		vols[v.Name] = v
		if hp := v.HostPath; hp != nil {
			if !path.IsAbs(hp.Path) || path.Clean(hp.Path) != hp.Path {
				bad("volume %q: hostPath %q is not a clean absolute path", v.Name, hp.Path)
			}
			if hp.Type == nil || *hp.Type == corev1.HostPathUnset {
				// Unset creates a directory where a missing file was meant.
				bad("volume %q: hostPath needs a type", v.Name)
			}
		}
	}
	used := map[string]bool{}
	names := map[string]bool{}
	for _, c := range append(append([]corev1.Container(nil), s.InitContainers...), s.Containers...) {
		if names[c.Name] {
			bad("container %q twice", c.Name)
		}
		names[c.Name] = true
		if c.Image == "" || len(c.Command) == 0 || !path.IsAbs(c.Command[0]) {
			bad("container %q: image and an absolute command are required", c.Name)
		}
		if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil ||
			len(c.SecurityContext.Capabilities.Drop) != 1 || c.SecurityContext.Capabilities.Drop[0] != "ALL" {
			bad("container %q: capabilities must drop ALL and add back what it needs", c.Name)
		}
		if c.SecurityContext != nil && (c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged) {
			bad("container %q: privileged", c.Name)
		}
		for _, m := range c.VolumeMounts {
			v, ok := vols[m.Name]
			if !ok {
				bad("container %q mounts undeclared volume %q", c.Name, m.Name)
				continue
			}
			used[m.Name] = true
			// Same path inside and out, so the paths in the Corefile and in
			// the commands mean one file on the host.
			if v.HostPath != nil && v.HostPath.Path != m.MountPath {
				bad("container %q mounts %s at %s: hostPath volumes keep their path", c.Name, v.HostPath.Path, m.MountPath)
			}
		}
		for _, pr := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
			if pr != nil && pr.HTTPGet != nil && !strings.HasPrefix(pr.HTTPGet.Path, "/") {
				bad("container %q: probe path %q", c.Name, pr.HTTPGet.Path)
			}
		}
	}
	for n := range vols {
		if !used[n] {
			bad("volume %q is not mounted", n)
		}
	}
	return errors.Join(errs...)
}
