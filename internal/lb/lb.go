// Package lb turns a cluster model (internal/cluster) and a snapshot of the
// cluster into keepalived and haproxy configuration. The pure part: Desired
// (the VRRP instances of the groups cluster.Assign lets this node hold, and
// haproxy's backends; desired.go) and Render (text/template, deterministic;
// render.go). The I/O part, each piece behind a small interface or func:
// Validate with the real tools (validate.go), Install (validate, then write
// if changed), Reload (reload.go), the health probes that feed keepalived's
// track files (health.go), the interface lookup (netif.go), and the
// Controller that chains them for each snapshot (controller.go). Informers
// live in internal/kube, VRRP wire knowledge in internal/vrrp.
package lb
