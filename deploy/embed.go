// Package deploy holds what a node installs besides the image: the static
// pod, Corefile and resolver templates `infradns render-node` fills in, and
// the NetworkManager dispatcher script. They are embedded so the command and
// its tests read the very files shipped in this directory.
package deploy

import "embed"

// Templates are static-pods/*.tmpl: text/template files given a
// nodecfg.Values.
//
//go:embed static-pods/*.tmpl
var Templates embed.FS

// Dispatcher is node/30-infradns-resolv-prepender, installed unchanged in
// /etc/NetworkManager/dispatcher.d.
//
//go:embed node/30-infradns-resolv-prepender
var Dispatcher []byte

// RBAC is rbac.yaml: the three identities' grants, applied by `infradns
// identities` (internal/identity.RBAC substitutes the ingress namespace).
//
//go:embed rbac.yaml
var RBAC []byte
