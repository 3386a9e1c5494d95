#!/usr/bin/env bash
# Builds the real kube-apiserver, etcd and kubelet that the integration tests
# run (the kubelet: test/e2e's real-kubelet lab; kubeadm, kubectl,
# kube-controller-manager and kube-scheduler: the kubeadm lab), from
# the Go module proxy, into a cache directory shared by every checkout:
#   ${INFRADNS_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/infradns/kube}/<kube>-etcd<etcd>/
# A stamp (module versions + go.mod/go.sum/build.sh hash + Go version) makes a
# second run a no-op; a lock lets parallel test packages call it safely.
# Prints the directory holding the binaries on its last line.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
GO="${GO:-go}"

kube_version="$(GOFLAGS=-mod=mod "$GO" list -m -f '{{.Version}}' k8s.io/kubernetes)"
etcd_version="$(GOFLAGS=-mod=mod "$GO" list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
base="${INFRADNS_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/infradns/kube}"
out="$base/${kube_version}-etcd${etcd_version}"
stamp="$(printf '%s\n' "$kube_version" "$etcd_version" "$("$GO" env GOVERSION)" \
	"$(cat go.mod go.sum build.sh | sha256sum | cut -d' ' -f1)")"

bins=(kube-apiserver kubelet kubeadm kubectl kube-controller-manager kube-scheduler)
fresh() {
	for b in "${bins[@]}" etcd; do
		[[ -x "$out/$b" ]] || return 1
	done
	[[ -f "$out/stamp" ]] &&
		[[ "$(cat "$out/stamp")" == "$stamp" ]]
}

mkdir -p "$out"
if fresh; then
	echo "$out"
	exit 0
fi

exec 9>"$out/.lock"
flock 9
if fresh; then # another caller built it while we waited
	echo "$out"
	exit 0
fi

start=$(date +%s)
echo "building ${bins[*]} $kube_version and etcd $etcd_version into $out (cold: ~25 min on 2 cores)" >&2
GOFLAGS=-mod=mod "$GO" mod download
minor="${kube_version#v1.}"
minor="${minor%%.*}"
ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=$kube_version \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/component-base/version.gitTreeState=clean"
tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# One go build for every command: shared packages compile once, links overlap.
CGO_ENABLED=0 GOFLAGS=-mod=mod "$GO" build -trimpath -ldflags "$ldflags" \
	-o "$tmp/" "${bins[@]/#/k8s.io/kubernetes/cmd/}"
CGO_ENABLED=0 GOFLAGS=-mod=mod "$GO" build -trimpath -ldflags "-s -w" \
	-o "$tmp/etcd" go.etcd.io/etcd/server/v3
for b in "${bins[@]}" etcd; do
	mv -f "$tmp/$b" "$out/"
done
printf '%s\n' "$stamp" >"$out/stamp"
echo "built in $(($(date +%s) - start)) s" >&2
echo "$out"
