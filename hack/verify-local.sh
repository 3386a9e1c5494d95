#!/usr/bin/env bash
# verify-local.sh — `make verify`: serves the example cluster (corefile.example)
# from bin/coredns on a free loopback port and runs hack/verify-dns.sh against
# it. Names outside the cluster are forwarded to a loopback port nobody listens
# on, so nothing leaves the machine. Exits with verify-dns.sh's status.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$root/bin/coredns
corefile=$root/corefile.example
[ -x "$bin" ] || { echo "verify-local: $bin is missing (run make build)" >&2; exit 2; }
command -v dig >/dev/null || { echo "verify-local: dig is missing (run make deps)" >&2; exit 2; }

# The example cluster, as corefile.example defines it.
domain=ocp4.example.com
api_vips=192.0.2.5,2001:db8::5
ingress_vips=192.0.2.10,2001:db8::10

work=$(mktemp -d -t infradns-verify.XXXXXX)
pid=
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    # health's lameduck delays a TERM exit by 5 s; nothing here needs it.
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# port_busy PORT: something listens on PORT (TCP or UDP, any address).
port_busy() { [ -n "$(ss -Hlntu "( sport = :$1 )" 2>/dev/null)" ]; }

# free_port prints a port in 20000-59999 that nothing listens on.
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    port_busy "$p" || { echo "$p"; return 0; }
  done
  echo "verify-local: no free port found" >&2
  return 1
}

# The example's fixed side ports (health, ready, metrics) may be taken by another
# server on this machine: then serve a copy with free ports instead.
ports_of() { grep -oE '^[[:space:]]*(health|ready|prometheus)[[:space:]]+:[0-9]+' "$corefile" | grep -oE '[0-9]+$'; }

start() {
  local conf=$corefile p ready_port=18181
  local side=() busy=0
  mapfile -t side < <(ports_of)
  for p in "${side[@]}"; do port_busy "$p" && busy=1; done
  if [ "$busy" = 1 ] || [ "${1:-}" = fresh ]; then
    conf=$work/Corefile
    cp "$corefile" "$conf"
    for p in "${side[@]}"; do
      local np
      np=$(free_port)
      sed -i -E "s/^([[:space:]]*(health|ready|prometheus)[[:space:]]+):$p\b/\1:$np/" "$conf"
      [ "$p" = 18181 ] && ready_port=$np
    done
    echo "verify-local: fixed side ports busy, serving a copy with ports changed: $(grep -E '^[[:space:]]*(health|ready|prometheus) ' "$conf" | tr -s ' ' | tr '\n' ' ')"
  fi
  dns_port=$(free_port)
  upstream_port=$(free_port)
  INFRADNS_UPSTREAM=127.0.0.1:$upstream_port "$bin" -conf "$conf" -dns.port "$dns_port" >"$work/coredns.log" 2>&1 &
  pid=$!
  # Ready when the ready plugin says so (every plugin started) and DNS answers.
  for _ in $(seq 1 100); do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null || true
      pid=
      return 1
    fi
    if curl -fsS -m 1 "http://127.0.0.1:$ready_port/ready" >/dev/null 2>&1 &&
      dig +time=1 +tries=1 +short -p "$dns_port" @127.0.0.1 "$domain" SOA >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.1
  done
  echo "verify-local: coredns did not become ready in 10 s" >&2
  return 2
}

# A port can be taken between the check and the bind: retry with fresh ports.
started=
for attempt in 1 2 3; do
  mode=
  [ "$attempt" -gt 1 ] && mode=fresh
  rc=0
  start "$mode" || rc=$?
  if [ "$rc" -eq 0 ]; then started=1; break; fi
  [ "$rc" -eq 2 ] && break
  echo "verify-local: coredns exited at start (attempt $attempt):" >&2
  tail -n 5 "$work/coredns.log" >&2
done
if [ -z "$started" ]; then
  echo "verify-local: could not start bin/coredns; its log:" >&2
  tail -n 30 "$work/coredns.log" >&2
  exit 1
fi

echo "verify-local: bin/coredns serving $domain on 127.0.0.1:$dns_port (pid $pid)"
set +e
"$root/hack/verify-dns.sh" --server 127.0.0.1 --port "$dns_port" --domain "$domain" \
  --api-vip "$api_vips" --ingress-vip "$ingress_vips" --verbose
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "verify-local: checks failed; coredns log tail:" >&2
  tail -n 30 "$work/coredns.log" >&2
fi
exit "$rc"
