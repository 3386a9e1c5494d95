#!/usr/bin/env bash
# Installs the Debian packages the tests and the lab need. As root it runs
# apt-get; otherwise it only checks, and fails naming what is missing.
set -euo pipefail

# command → Debian package
declare -A pkgs=(
  [dig]=bind9-dnsutils
  [dnsperf]=dnsperf
  [ip]=iproute2
  [ping]=iputils-ping
  [curl]=curl
  [keepalived]=keepalived
  [haproxy]=haproxy
  [avahi-daemon]=avahi-daemon
  [avahi-browse]=avahi-utils
  [dbus-daemon]=dbus
  [unshare]=util-linux
  [pkill]=procps
  [taskset]=util-linux
  # promtool checks the rules; the server evaluates them over a lab's metrics (test/e2e).
  [promtool]=prometheus
  [prometheus]=prometheus
  [vtysh]=frr
  [bird]=bird2
  # The reference authoritative server of the DNS differential test (test/e2e).
  [knotd]=knot
  [nft]=nftables
  # systemd's unit parser for the resolver units (internal/nodecfg). Never
  # systemd-resolved: its postinst replaces the host's /etc/resolv.conf.
  [systemd-analyze]=systemd
  # The image without a registry (make image-oci) and the real-kubelet lab.
  [mmdebstrap]=mmdebstrap
  [containerd]=containerd
  [ctr]=containerd
  [runc]=runc
  # make release: the other architectures' Debian layers (mmdebstrap runs
  # their maintainer scripts through binfmt_misc) and deploy/release's test,
  # which runs the cross-built infradns under qemu.
  [qemu-aarch64-static]=qemu-user-static
  [qemu-ppc64le-static]=qemu-user-static
  [qemu-s390x-static]=qemu-user-static
  [update-binfmts]=binfmt-support
  # The kubeadm lab's pod network (bridge, host-local, loopback, portmap).
  [/usr/lib/cni/bridge]=containernetworking-plugins
)

# Registers the emulators with binfmt_misc (a container may need it mounted).
register_binfmt() {
  [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] && return 0
  [ "$(id -u)" -eq 0 ] || { echo "install-deps: qemu-user-static is not registered with binfmt_misc (as root: update-binfmts --enable); make release needs it" >&2; return 0; }
  [ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || true
  update-binfmts --enable >/dev/null 2>&1 || true
  [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || echo "install-deps: warning: qemu-aarch64 is not in binfmt_misc; make release cannot build foreign Debian layers" >&2
}

missing=()
for cmd in "${!pkgs[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || missing+=("${pkgs[$cmd]}")
done
if [ ${#missing[@]} -eq 0 ]; then register_binfmt; exit 0; fi

mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi
echo "install-deps: apt-get install ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
register_binfmt
