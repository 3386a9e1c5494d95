#!/usr/bin/env bash
# bench.sh — `make bench`: dnsperf against Corefiles serving the example
# cluster's names, all run by one binary (bin/coredns-bench, built here with the
# benchmark-only onemap plugin):
#   a  infradns: apiint + appswildcard
#   b  OpenShift on-prem: CoreDNS template blocks + hosts (the stack we replace)
#   c  whoami only: the cost of CoreDNS itself (ceiling)
#   d  onemap: one map lookup of pre-built records (ceiling for a plugin)
#   e  infradns: mdnsnodes with 500 nodes heard over real multicast on lo
#   f  OpenShift's way for the same node names: hosts with 500 nodes
#   p  infradns: the Corefile `infradns render-node` writes for a node (cache
#      30, forward to the site's DNS, errors, health, ready, prometheus,
#      multisocket)
#   q  the same rendered Corefile with onemap in place of our plugins (ceiling)
#   o  OpenShift on-prem's production Corefile: b inside what its template
#      renders around it (errors, bufsize, health, forward, cache 30, reload)
#   r  infradns: PTR for the 500 nodes (heard over mDNS as in e) and the VIPs,
#      the cluster's node networks named with apiint's `reverse`
#   t  onemap with the same PTR records (ceiling)
#   u  OpenShift on-prem's way: hosts with the nodes and VIPs, a reverse zone
#      file answering the unknown addresses
# a-f, r, t, u each without and with `cache 30`. a-d, p, q answer the VIP names (api,
# *.apps), e and f the node names (<node>.DOMAIN A/AAAA). The server runs on
# CPU 0 with GOMAXPROCS=1, dnsperf on CPU 1, loopback only; the two-core rows
# (a, d, p, q) give the server both CPUs (GOMAXPROCS=2, a socket each) and
# dnsperf the same two, and count the server's CPU time. Runs are interleaved
# (a b c d a b c d …) so machine noise hits every config alike; the table
# shows the median of the runs.
# Writes docs/benchmarks.md (BENCH_OUT) and prints it.
#
# Environment: BENCH_SECONDS (10) per run, BENCH_RUNS (3), BENCH_CLIENTS (4)
# dnsperf clients, BENCH_OUTSTANDING (100) queries in flight, BENCH_ONLY (e.g.
# "a d") to run a subset, BENCH_OUT (docs/benchmarks.md).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

secs=${BENCH_SECONDS:-10}
runs=${BENCH_RUNS:-3}
clients=${BENCH_CLIENTS:-4}
outstanding=${BENCH_OUTSTANDING:-100}
out=${BENCH_OUT:-docs/benchmarks.md}
only=${BENCH_ONLY:-}
port_lo=15300
port_hi=15399
server_cpu=0
client_cpu=1
bin=$root/bin/coredns-bench

# The example cluster (corefile.example).
zone=ocp4.example.com
api_v4=192.0.2.5 api_v6=2001:db8::5
ing_v4=192.0.2.10 ing_v6=2001:db8::10

# The configurations: id|description|Corefile body function|expected
# rcodes|query set. "mix" = the query file's NOERROR/NXDOMAIN split;
# "noerror" = every answer NOERROR. Query set "vips" is genqueries' file,
# "nodes" the node names. To add one, add a line here and a cf_* function below.
configs=(
  "a|infradns: apiint + appswildcard|cf_ours|mix|vips"
  "b|OpenShift on-prem: template + hosts|cf_openshift|mix|vips"
  "c|whoami only (ceiling)|cf_whoami|noerror|vips"
  "d|onemap: one map lookup (ceiling)|cf_onemap|mix|vips"
  "e|infradns: mdnsnodes, 500 nodes over mDNS|cf_mdnsnodes|mix|nodes"
  "f|OpenShift on-prem: hosts, 500 nodes|cf_hosts|mix|nodes"
  "p|infradns: the rendered production Corefile|cf_rendered|mix|vips"
  "q|rendered Corefile, onemap in place of ours (ceiling)|cf_rendered_onemap|mix|vips"
  "o|OpenShift on-prem: its production Corefile|cf_openshift_prod|mix|vips"
  "r|infradns: PTR, 500 nodes over mDNS + VIPs|cf_ptr|mix|ptr"
  "t|onemap: PTR, one map lookup (ceiling)|cf_onemap_ptr|mix|ptr"
  "u|OpenShift on-prem: hosts PTR, 500 nodes + VIPs|cf_hosts_ptr|mix|ptr"
)
# Node i of e and f is worker-NNN with 10.128.i/256.i%256 and fd00:128::(i+1),
# as test/bench/mdnsflood announces them.
nodes=500
caches=(none 30)
# What is run, in this order in every round: id|cache|cores. p and q carry the
# rendered Corefile's own cache ("rendered").
cases=()
for cache in "${caches[@]}"; do
  for id in a b c d e f r t u; do cases+=("$id|$cache|1"); done
done
cases+=("p|rendered|1" "q|rendered|1" "o|rendered|1" "a|none|2" "d|none|2" "p|rendered|2" "q|rendered|2")

die() { echo "bench: $*" >&2; exit 1; }

for cmd in dnsperf taskset dig ss go curl; do
  command -v "$cmd" >/dev/null || die "$cmd is missing (run make deps)"
done
[ "$(nproc)" -ge 2 ] || die "needs 2 CPUs (server on CPU $server_cpu, dnsperf on CPU $client_cpu)"
[[ "$secs" =~ ^[0-9]+$ && "$secs" -ge 1 ]] || die "BENCH_SECONDS must be a whole number ≥ 1"
[[ "$runs" =~ ^[0-9]+$ && "$runs" -ge 1 ]] || die "BENCH_RUNS must be a whole number ≥ 1"

work=$(mktemp -d -t infradns-bench.XXXXXX)
pid=
flood_pid=
up_pid=
cleanup() {
  for p in "$pid" "$flood_pid" "$up_pid"; do
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
      kill -KILL "$p" 2>/dev/null || true
      wait "$p" 2>/dev/null || true
    fi
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- Corefile bodies: cf_<name> prints the plugins of the server block. ---------

cf_ours() {
  cat <<EOF
    apiint $api_v4 $api_v6 {
        zone $zone
    }
    appswildcard $ing_v4 $ing_v6 {
        zone $zone
    }
EOF
}

# OpenShift's on-prem Corefile (machine-config-operator's coredns-corefile
# template as baremetal-runtimecfg renders it): per name an answer template for
# the VIP's family, each with fallthrough, then a hosts block of the nodes. With
# one VIP per name the other family gets an answerless "EmptyType" template
# (NODATA); our example cluster is dual-stack, so the second template of each
# pair answers the IPv6 VIP instead, giving the same answers as ours from the
# same number of templates. The real Corefile then forwards to the site DNS;
# here a `file` zone with only SOA/NS stands in for it (it answers the
# NXDOMAINs), which is cheaper than any forward, i.e. generous to OpenShift.
cf_openshift() {
  local dom=$zone
  cat <<EOF
    template IN A $dom {
        match .*.apps.$dom
        answer "{{ .Name }} 60 in {{ .Type }} $ing_v4"
        fallthrough
    }
    template IN AAAA $dom {
        match .*.apps.$dom
        answer "{{ .Name }} 60 in {{ .Type }} $ing_v6"
        fallthrough
    }
    template IN A $dom {
        match ^api.$dom
        answer "{{ .Name }} 60 in {{ .Type }} $api_v4"
        fallthrough
    }
    template IN AAAA $dom {
        match ^api.$dom
        answer "{{ .Name }} 60 in {{ .Type }} $api_v6"
        fallthrough
    }
    template IN A $dom {
        match ^api-int.$dom
        answer "{{ .Name }} 60 in {{ .Type }} $api_v4"
        fallthrough
    }
    template IN AAAA $dom {
        match ^api-int.$dom
        answer "{{ .Name }} 60 in {{ .Type }} $api_v6"
        fallthrough
    }
    hosts {
        192.0.2.21 master-0 master-0.$dom
        192.0.2.22 master-1 master-1.$dom
        192.0.2.23 master-2 master-2.$dom
        192.0.2.31 worker-0 worker-0.$dom
        192.0.2.32 worker-1 worker-1.$dom
        fallthrough
    }
    file $work/upstream.zone $dom
EOF
}

# mdnsnodes on lo: the nodes arrive as real mDNS announcements (see fill).
cf_mdnsnodes() {
  cat <<EOF
    mdnsnodes {
        zone $zone
        cluster ocp4
        interface lo
    }
EOF
}

# OpenShift's Corefile serves node names from a hosts block; unknown names
# fall through to the site DNS (here the SOA-only zone, as in b).
cf_hosts() {
  cat <<EOF
    hosts $work/hosts.nodes $zone {
        fallthrough
    }
    file $work/upstream.zone $zone
EOF
}

cf_whoami() {
  echo "    whoami"
}

cf_onemap() {
  echo "    onemap $zone $work/onemap.names"
}

# PTR: the reverse names of the nodes' and the VIPs' addresses. The node
# networks are named with apiint's reverse option, so an unknown address in
# them is NXDOMAIN (with the reverse zone's SOA) rather than forwarded.
cf_ptr() {
  cat <<EOF
    apiint $api_v4 $api_v6 {
        zone $zone
        reverse 10.128.0.0/16 fd00:128::/64
    }
    appswildcard $ing_v4 $ing_v6 {
        zone $zone
    }
EOF
  cf_mdnsnodes
}

# The ceiling for PTR: every record pre-built, one map lookup; "." makes any
# other name NXDOMAIN.
cf_onemap_ptr() {
  echo "    onemap . $work/onemap.ptr"
}

# OpenShift answers PTR for nodes from its hosts block (release 4.8 and
# later); the VIPs are added to it here so that the answers match ours, and a
# reverse zone with only SOA and NS answers the unknown addresses, as the
# site's DNS would.
cf_hosts_ptr() {
  cat <<EOF
    hosts $work/hosts.ptr {
        fallthrough
    }
    file $work/reverse.zone 128.10.in-addr.arpa
EOF
}

# The Corefile `infradns render-node` writes for a control-plane node of the
# example cluster, made runnable here: its port, its health, ready and metrics
# listeners on loopback ports, mdnsnodes on lo without a kubeconfig (no API in
# a benchmark: the node names come from mDNS), no lameduck (each run would
# wait 5 s to stop), and the site's DNS (its forward import) an upstream on
# loopback that only the loop plugin's probe reaches.
cf_rendered() {
  sed -E -e "s/^\. \{/.:$cf_port {/" \
    -e "s/^( *health ):[0-9]+/\1127.0.0.1:$((cf_port + 1000))/" \
    -e "/^ *lameduck /d" \
    -e "s/^( *ready ):[0-9]+/\1127.0.0.1:$((cf_port + 2000))/" \
    -e "s/^( *prometheus ).*/\1127.0.0.1:$((cf_port + 3000))/" \
    -e "s/^( *interface ).*/\1lo/" \
    -e "/^ *kubeconfig /d" \
    -e "s#^( *import ).*forward.*#\1$work/forward.conf#" \
    "$work/render/etc/infradns/Corefile"
}

# cf_rendered_onemap: the same with onemap where apiint, appswildcard and
# mdnsnodes stand.
cf_rendered_onemap() {
  cf_rendered | awk -v om="    onemap $zone $work/onemap.names" '
    /^    (apiint|appswildcard|mdnsnodes)( |$)/ { if (!done) print om; done = 1; skip = 1; next }
    skip && /^    }$/ { skip = 0; next }
    !skip'
}

# OpenShift's production Corefile (machine-config-operator's on-prem
# coredns-corefile template): b's templates and hosts inside errors, bufsize,
# health, forward (policy sequential) to the site's DNS, cache 30 and reload.
# No metrics plugin: OpenShift's has none. As in b, the SOA-only zone answers
# the cluster domain's NXDOMAINs in place of the site DNS.
cf_openshift_prod() {
  echo ".:$cf_port {"
  cat <<EOF
    errors
    bufsize 512
    health 127.0.0.1:$((cf_port + 1000))
    forward . 127.0.0.1:$up_port {
        policy sequential
    }
    cache 30
    reload
EOF
  cf_openshift
  echo "}"
}

# corefile FUNC PORT CACHE CORES prints a whole Corefile. The rendered ones
# (cache "rendered") are whole already; with two cores the others listen on
# as many sockets as GOMAXPROCS (multisocket), as the rendered one does.
corefile() {
  cf_port=$2
  if [ "$3" = rendered ]; then "$1"; return; fi
  echo ".:$2 {"
  [ "$4" = 1 ] || echo "    multisocket"
  [ "$3" = none ] || echo "    cache $3"
  "$1"
  echo "}"
}

# --- servers ----------------------------------------------------------------------

# port_busy PORT: something listens on PORT (TCP or UDP, any address). CoreDNS
# binds with SO_REUSEPORT, so a forgotten server would silently share the load.
port_busy() { [ -n "$(ss -Hlntu "( sport = :$1 )" 2>/dev/null)" ]; }

next_port=$port_lo
# pick_port prints the next free port of the range, round robin.
pick_port() {
  local i p
  for ((i = 0; i <= port_hi - port_lo; i++)); do
    p=$next_port
    next_port=$((next_port >= port_hi ? port_lo : next_port + 1))
    port_busy "$p" || { echo "$p"; return 0; }
  done
  die "no free port in $port_lo-$port_hi"
}

# cpus CORES prints the CPU list the server runs on; client_cpus CORES
# dnsperf's (its own CPU beside one server core, both CPUs beside two).
cpus() { if [ "$1" = 1 ]; then echo "$server_cpu"; else echo "$server_cpu,$client_cpu"; fi; }
client_cpus() { if [ "$1" = 1 ]; then echo "$client_cpu"; else cpus "$1"; fi; }

# start CONF PORT [CORES] starts the server pinned to the server CPU (or both)
# and waits until it answers. Sets pid.
start() {
  local conf=$1 port=$2 cores=${3:-1} i
  port_busy "$port" && die "port $port is in use"
  GOMAXPROCS=$cores taskset -c "$(cpus "$cores")" "$bin" -conf "$conf" -quiet >"$work/server.log" 2>&1 &
  pid=$!
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || { cat "$work/server.log" >&2; die "server exited ($conf)"; }
    if dig +time=1 +tries=1 +short @127.0.0.1 -p "$port" "api.$zone" A >/dev/null 2>&1; then
      break
    fi
    sleep 0.1
  done
  [ "$i" -lt 100 ] || { cat "$work/server.log" >&2; die "server on port $port did not answer within 10 s"; }
  # A Corefile with the ready plugin (the rendered one): wait for it, as
  # kubelet's readiness probe does. mdnsnodes answers SERVFAIL, not a
  # cacheable NXDOMAIN, for unknown node names until it has listened one
  # mDNS query window.
  ready=$(sed -nE 's/^ *ready +([0-9.:]+).*/\1/p' "$conf")
  [ -n "$ready" ] || return 0
  for ((i = 0; i < 100; i++)); do
    curl -fs -o /dev/null "http://$ready/ready" && return 0
    sleep 0.1
  done
  cat "$work/server.log" >&2
  die "server on port $port not ready within 10 s"
}

stop() {
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
  if [ -n "$flood_pid" ]; then
    kill -TERM "$flood_pid" 2>/dev/null || true
    wait "$flood_pid" 2>/dev/null || true
    flood_pid=
  fi
}

# fill ID PORT: for mdnsnodes, announce the nodes over multicast on lo (one
# round; mdnsflood's next round is 30 s later, after the run) and check that
# the first, a middle and the last node are served. Each attempt asks names
# never asked before: with `cache 30` an early NXDOMAIN would stay cached.
fill() {
  [ "$1" = e ] || [ "$1" = r ] || return 0
  local i n ok
  "$work/mdnsflood" -interface lo -cluster ocp4 -n "$nodes" >"$work/flood.log" 2>&1 &
  flood_pid=$!
  for ((i = 0; i < 100; i++)); do
    grep -q '^announced' "$work/flood.log" && break
    sleep 0.1
  done
  for ((i = 0; i < 10; i++)); do
    sleep 0.2
    ok=0
    for n in $i $((nodes / 2 + i)) $((nodes - 1 - i)); do
      [ "$(dig +time=1 +tries=1 +short @127.0.0.1 -p "$2" "$(printf 'worker-%03d' "$n").$zone" A)" = "10.128.$((n / 256)).$((n % 256))" ] && ok=$((ok + 1))
    done
    [ "$ok" -eq 3 ] && return 0
  done
  cat "$work/flood.log" >&2
  die "mdnsnodes did not hear the $nodes nodes"
}

# field FILE REGEX prints the first number after REGEX in dnsperf's output.
field() { sed -nE "s/^ *$2 *([0-9.]+).*/\1/p" "$1" | head -1; }

# rcode FILE NAME prints the count of response code NAME (0 if absent).
rcode() { grep -oE "$2 [0-9]+" <(grep 'Response codes:' "$1") | awk '{print $2}' | head -1 | grep . || echo 0; }

# check FILE EXPECT ID CACHE SET fails unless the response codes are the expected ones.
check() {
  local f=$1 expect=$2 id=$3 cache=$4
  local completed noerr nx other lost sent
  sent=$(field "$f" 'Queries sent:')
  completed=$(field "$f" 'Queries completed:')
  lost=$(field "$f" 'Queries lost:')
  noerr=$(rcode "$f" NOERROR)
  nx=$(rcode "$f" NXDOMAIN)
  other=$((completed - noerr - nx))
  [ "$completed" -gt 0 ] || die "$id/cache $cache: no query answered"
  [ "$other" -eq 0 ] || { grep 'Response codes:' "$f" >&2; die "$id/cache $cache: $other answers neither NOERROR nor NXDOMAIN (SERVFAIL?)"; }
  # A few queries may be in flight when the time limit ends; more means drops.
  [ $((lost * 1000)) -le "$sent" ] || die "$id/cache $cache: $lost of $sent queries lost"
  case $expect in
    noerror) [ "$nx" -eq 0 ] || die "$id/cache $cache: $nx NXDOMAIN, want none" ;;
    mix)
      # The query file's share of NXDOMAIN, ± 1 percentage point (dnsperf stops
      # part-way through the file).
      awk -v nx="$nx" -v c="$completed" -v want="${nx_share[$5]}" \
        'BEGIN { s = nx / c; exit !(s > want - 0.01 && s < want + 0.01) }' ||
        { grep 'Response codes:' "$f" >&2; die "$id/cache $cache: NXDOMAIN share is not ${nx_share[$5]}"; } ;;
  esac
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# --- build, data ------------------------------------------------------------------

echo "bench: building $bin (tags benchmap)"
go build -tags benchmap -trimpath -ldflags "-s -w -X main.version=bench" -o "$bin" ./coredns
summary=$(go run ./test/bench/genqueries -dir "$work" -zone "$zone" \
  -api-v4 "$api_v4" -api-v6 "$api_v6" -ingress-v4 "$ing_v4" -ingress-v6 "$ing_v6")
declare -A nx_share
nx_share[vips]=$(awk -F'[ =]' '{ print $6 / $2 }' <<<"$summary")
mv "$work/queries.txt" "$work/queries.vips.txt"
# Node names: every node A and AAAA, and one NXDOMAIN per ten queries.
go build -o "$work/mdnsflood" ./test/bench/mdnsflood
nx_nodes=$((nodes * 2 / 9))
for ((i = 0; i < nodes; i++)); do
  n=$(printf 'worker-%03d' "$i").$zone
  printf '10.128.%d.%d %s\nfd00:128::%x %s\n' $((i / 256)) $((i % 256)) "$n" $((i + 1)) "$n" >>"$work/hosts.nodes"
  printf '%s A\n%s AAAA\n' "$n" "$n"
done >"$work/queries.nodes.unshuffled"
for ((i = 0; i < nx_nodes; i++)); do printf 'nosuch-node-%03d.%s A\n' "$i" "$zone"; done >>"$work/queries.nodes.unshuffled"
shuf --random-source=<(yes) "$work/queries.nodes.unshuffled" >"$work/queries.nodes.txt"
nx_share[nodes]=$(awk -v nx="$nx_nodes" -v all="$((nodes * 2 + nx_nodes))" 'BEGIN { print nx / all }')
# Reverse names: every node's IPv4 and IPv6 address, the four VIPs, and one
# unknown address of the node network per ten queries (NXDOMAIN).
rev4() { awk -F. '{ printf "%s.%s.%s.%s.in-addr.arpa\n", $4, $3, $2, $1 }' <<<"$1"; }
# rev6 HEX32 prints the nibble form of an IPv6 address written as 32 hex digits.
rev6() { echo "$(rev <<<"$1" | sed 's/./&./g')ip6.arpa"; }
node6() { printf 'fd000128000000000000000000%06x' $(($1 + 1)); }
for ((i = 0; i < nodes; i++)); do
  n=$(printf 'worker-%03d' "$i").$zone.
  r4=$(rev4 "10.128.$((i / 256)).$((i % 256))")
  r6=$(rev6 "$(node6 "$i")")
  printf '%s PTR\n%s PTR\n' "$r4" "$r6" >&3
  printf '%s PTR %s\n%s PTR %s\n' "$r4" "$n" "$r6" "$n" >&4
done 3>"$work/queries.ptr.unshuffled" 4>"$work/onemap.ptr"
# The VIPs (api_v6 and ing_v6 written out in full).
for v in "$api_v4 api-int" "$ing_v4 ingress.apps" "20010db8000000000000000000000005 api-int" "20010db8000000000000000000000010 ingress.apps"; do
  read -r a name <<<"$v"
  if [[ $a == *.* ]]; then r=$(rev4 "$a"); else r=$(rev6 "$a"); fi
  echo "$r PTR" >>"$work/queries.ptr.unshuffled"
  echo "$r PTR $name.$zone." >>"$work/onemap.ptr"
done
printf '%s api-int.%s\n%s api-int.%s\n%s ingress.apps.%s\n%s ingress.apps.%s\n' \
  "$api_v4" "$zone" "$api_v6" "$zone" "$ing_v4" "$zone" "$ing_v6" "$zone" | cat "$work/hosts.nodes" - >"$work/hosts.ptr"
nx_ptr=$(((nodes * 2 + 4) / 9))
for ((i = 0; i < nx_ptr; i++)); do echo "$(rev4 "10.128.$((200 + i / 256)).$((i % 256))") PTR"; done >>"$work/queries.ptr.unshuffled"
shuf --random-source=<(yes) "$work/queries.ptr.unshuffled" >"$work/queries.ptr.txt"
nx_share[ptr]=$(awk -v nx="$nx_ptr" -v all="$((nodes * 2 + 4 + nx_ptr))" 'BEGIN { print nx / all }')
cat >"$work/reverse.zone" <<EOF
\$ORIGIN 128.10.in-addr.arpa.
@       30 IN SOA ns.dns.$zone. hostmaster.$zone. 1 7200 1800 86400 30
@       30 IN NS  ns.dns.$zone.
EOF
cat >"$work/upstream.zone" <<EOF
\$ORIGIN $zone.
@       30 IN SOA ns.dns.$zone. hostmaster.$zone. 1 7200 1800 86400 30
@       30 IN NS  ns.dns.$zone.
ns.dns  30 IN A   192.0.2.53
EOF

# The rendered Corefile (p, q) and the site's DNS it forwards to: an upstream on
# the client CPU that only the loop plugin's start-up probe reaches (every
# benchmark name is in the cluster zone, which our plugins own; check() would
# see an upstream answer as a wrong NXDOMAIN share).
"$root/bin/infradns" render-node -f deploy/cluster.example.yaml -o "$work/render" \
  -node master-0 -role control-plane >/dev/null || die "infradns render-node failed"
# Outside the servers' range: pick_port's choice is only free until the
# server binds (SO_REUSEPORT would let two servers share a port).
up_port=$((port_lo - 10))
port_busy "$up_port" && die "port $up_port (the upstream stand-in) is in use"
up_metrics=127.0.0.1:$((port_lo - 9))
printf '.:%s {\n    prometheus %s\n    whoami\n}\n' "$up_port" "$up_metrics" >"$work/Corefile.upstream"
echo "forward . 127.0.0.1:$up_port" >"$work/forward.conf"

declare -A cfg
selected=()
for c in "${configs[@]}"; do
  id=${c%%|*}
  cfg[$id]=$c
  if [ -z "$only" ] || [[ " $only " == *" $id "* ]]; then selected+=("$c"); fi
done
[ ${#selected[@]} -gt 0 ] || die "BENCH_ONLY=$only selects no config"
run_cases=()
for k in "${cases[@]}"; do
  id=${k%%|*}
  if [ -z "$only" ] || [[ " $only " == *" $id "* ]]; then run_cases+=("$k"); fi
done
if [[ " ${run_cases[*]} " == *"|rendered|"* ]]; then
  GOMAXPROCS=1 taskset -c "$client_cpu" "$bin" -conf "$work/Corefile.upstream" -quiet >"$work/upstream.log" 2>&1 &
  up_pid=$!
  for ((i = 0; i < 100; i++)); do
    dig +time=1 +tries=1 +short @127.0.0.1 -p "$up_port" "upstream.test" A >/dev/null 2>&1 && break
    kill -0 "$up_pid" 2>/dev/null || { cat "$work/upstream.log" >&2; die "the upstream stand-in exited"; }
    sleep 0.1
  done
fi

# Every config that serves the cluster's names must give the same answers, or
# the comparison is void.
declare -A probes wants
probes[vips]="api.$zone A|api-int.$zone AAAA|route-0001-ns-01.apps.$zone A|route-0001-ns-01.apps.$zone AAAA|nosuch-00001.$zone A"
wants[vips]="NOERROR $api_v4|NOERROR $api_v6|NOERROR $ing_v4|NOERROR $ing_v6|NXDOMAIN"
probes[nodes]="worker-042.$zone A|worker-042.$zone AAAA|WORKER-300.$zone A|worker-300.$zone MX|nosuch-node-001.$zone A"
wants[nodes]="NOERROR 10.128.0.42|NOERROR fd00:128::2b|NOERROR 10.128.1.44|NOERROR|NXDOMAIN"
probes[ptr]="$(rev4 10.128.0.42) PTR|$(rev6 "$(node6 300)") PTR|$(rev4 "$api_v4") PTR|$(rev6 20010db8000000000000000000000010) PTR|$(rev4 10.128.200.7) PTR"
wants[ptr]="NOERROR worker-042.$zone.|NOERROR worker-300.$zone.|NOERROR api-int.$zone.|NOERROR ingress.apps.$zone.|NXDOMAIN"
for c in "${selected[@]}"; do
  IFS='|' read -r id desc fn expect set <<<"$c"
  [ "$expect" = mix ] || continue
  port=$(pick_port)
  probe_cache=none
  [[ $fn == cf_rendered* || $fn == cf_openshift_prod ]] && probe_cache=rendered
  corefile "$fn" "$port" "$probe_cache" 1 >"$work/Corefile.probe"
  start "$work/Corefile.probe" "$port"
  fill "$id" "$port"
  IFS='|' read -ra ps <<<"${probes[$set]}"
  IFS='|' read -ra ws <<<"${wants[$set]}"
  for i in "${!ps[@]}"; do
    # shellcheck disable=SC2086 # "name type"
    got=$(dig +time=1 +tries=1 +noall +comments +answer @127.0.0.1 -p "$port" ${ps[$i]} |
      awk '/status:/ { s = $6; sub(",", "", s) } /^[^;]/ && NF >= 5 { a = a " " $5 } END { print s a }')
    [ "$got" = "${ws[$i]}" ] || { stop; die "$id: ${ps[$i]} answered '$got', want '${ws[$i]}'"; }
  done
  stop
done

load_before=$(uptime)
echo "bench: $summary; ${#run_cases[@]} rows × $runs runs × $secs s"

# cpu_ticks PID prints the process's user + system CPU time in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# --- runs: interleaved ------------------------------------------------------------

for ((r = 1; r <= runs; r++)); do
  for k in "${run_cases[@]}"; do
    IFS='|' read -r id cache cores <<<"$k"
    IFS='|' read -r _ desc fn expect set <<<"${cfg[$id]}"
    port=$(pick_port)
    key=$id.$cache.$cores
    conf=$work/Corefile.$key
    corefile "$fn" "$port" "$cache" "$cores" >"$conf"
    start "$conf" "$port" "$cores"
    fill "$id" "$port"
    res=$work/dnsperf.$key.$r
    t0=$(cpu_ticks "$pid")
    taskset -c "$(client_cpus "$cores")" \
      dnsperf -s 127.0.0.1 -p "$port" -d "$work/queries.$set.txt" \
      -l "$secs" -c "$clients" -q "$outstanding" >"$res" 2>&1 ||
      { cat "$res" >&2; die "dnsperf failed ($id, cache $cache, $cores cores)"; }
    t1=$(cpu_ticks "$pid")
    rss_kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
    stop
    check "$res" "$expect" "$id" "$cache" "$set"
    qps=$(field "$res" 'Queries per second:')
    lat=$(field "$res" 'Average Latency \(s\):')
    used=$(awk -v t="$((t1 - t0))" -v hz="$hz" -v s="$secs" 'BEGIN { printf "%.2f", t / hz / s }')
    echo "$qps $lat $rss_kb $used" >>"$work/result.$key"
    printf 'bench: run %d/%d  %s  cache %-8s  %s core(s)  %10.0f qps  %6.3f ms  %5.1f MiB  server %s cores\n' \
      "$r" "$runs" "$id" "$cache" "$cores" "$qps" "$(awk -v l="$lat" 'BEGIN { print l * 1000 }')" \
      "$(awk -v k="$rss_kb" 'BEGIN { print k / 1024 }')" "$used"
  done
done
load_after=$(uptime)
# What reached the site's DNS stand-in over all rendered runs (the loop
# plugin's probe per start; the benchmark's names must not).
upstream_queries=–
if [ -n "$up_pid" ]; then
  upstream_queries=$(curl -fsS "http://$up_metrics/metrics" | awk '/^coredns_dns_requests_total/ { n += $2 } END { print n + 0 }')
fi

# --- report -----------------------------------------------------------------------

declare -A qps_med cores_med
col() { awk -v c="$1" '{ print $c }' "$2" | median; }
{
  echo "# DNS benchmark"
  echo
  echo "Generated by \`make bench\` (hack/bench.sh) on $(date -u '+%Y-%m-%d %H:%M UTC'). Do not edit by hand."
  echo
  echo "## Machine and method"
  echo
  echo "- CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), nproc $(nproc); kernel $(uname -r)"
  echo "- $(go version | cut -d' ' -f3), CoreDNS $("$bin" -version | sed -nE 's/.*CoreDNS ([0-9.]+).*/\1/p' | head -1), dnsperf $(dnsperf -h 2>&1 | sed -nE 's/.*[Vv]ersion ([0-9.]+).*/\1/p' | head -1)"
  echo "- Load before: \`${load_before#*load average: }\`, after: \`${load_after#*load average: }\` (1/5/15 min; other jobs on the machine add noise)"
  echo "- One binary for all configs: \`bin/coredns-bench\` (\`go build -tags benchmap ./coredns\`: the product build plus the benchmark-only \`onemap\` plugin)."
  echo "- Server: \`GOMAXPROCS=1 taskset -c $server_cpu\`; dnsperf: \`taskset -c $client_cpu dnsperf -l $secs -c $clients -q $outstanding\` (no rate limit), 127.0.0.1 only."
  echo "- Queries a–d: $summary ($(sort -u "$work/queries.vips.txt" | wc -l) distinct name/type pairs): 10 % api/api-int A+AAAA, 80 % \`*.apps\` (3000 names, 1 in 5 AAAA), 10 % NXDOMAIN in the cluster domain; shuffled, fixed seed (test/bench/genqueries)."
  echo "- Queries e–f: $((nodes * 2 + nx_nodes)) (each of the $nodes nodes A and AAAA, $nx_nodes unknown names → NXDOMAIN), shuffled. e hears the nodes from test/bench/mdnsflood over IPv4 multicast on lo (one round of announcements before each run); f reads the same nodes from a hosts file."
  echo "- Queries r–u: $((nodes * 2 + 4 + nx_ptr)) PTR (each node's IPv4 and IPv6 address, the 4 VIPs, $nx_ptr unknown addresses of 10.128.0.0/16 → NXDOMAIN), shuffled. r hears the nodes over mDNS as e does; t and u read the same records from files."
  echo "- Median of $runs runs of $secs s per row, runs interleaved (a b c … a b c …); a ratio is the median over the rounds of the two rows' ratio in the same round; every run's response codes checked (no SERVFAIL; NXDOMAIN share as in the query file; whoami answers all NOERROR)."
  echo "- Saturated: latency is mostly dnsperf's queue (≈ in flight / qps); compare qps. Peak RSS is the server's VmHWM after the run."
  echo
  echo "- Two-core rows: the server gets \`GOMAXPROCS=2 taskset -c $server_cpu,$client_cpu\` and listens on two sockets (\`multisocket\`: one per GOMAXPROCS, SO_REUSEPORT), and dnsperf runs on the same two CPUs: the load generator takes part of the second core. \"server cores\" is the server's user + system CPU time over the run's length (/proc/PID/stat)."
  echo
  echo "## Results"
  echo
  echo "| config | cache | cores | qps (median) | qps of each run | avg latency ms | peak RSS MiB | server cores |"
  echo "|---|---|---:|---:|---|---:|---:|---:|"
  for k in "${run_cases[@]}"; do
    IFS='|' read -r id cache cores <<<"$k"
    IFS='|' read -r _ desc fn expect set <<<"${cfg[$id]}"
    f=$work/result.$id.$cache.$cores
    q=$(col 1 "$f")
    qps_med[$id.$cache.$cores]=$q
    cores_med[$id.$cache.$cores]=$(col 4 "$f")
    printf '| %s — %s | %s | %s | %.0f | %s | %.3f | %.1f | %.2f |\n' "$id" "$desc" "$cache" "$cores" "$q" \
      "$(awk '{ printf "%s%.0f", (NR > 1 ? ", " : ""), $1 }' "$f")" \
      "$(awk -v l="$(col 2 "$f")" 'BEGIN { print l * 1000 }')" \
      "$(awk -v k="$(col 3 "$f")" 'BEGIN { print k / 1024 }')" "${cores_med[$id.$cache.$cores]}"
  done
  # ratio X Y prints " | X/Y", the median over the rounds of the two rows'
  # qps in the same round, or " | –" when a row did not run. Rows of one
  # round run a few seconds apart, so a slow spell of the host (every row of
  # a round 30-40 % down, seen here) divides out; a ratio of the two
  # medians would pair a fast run with a slow one.
  ratio() {
    local fx=$work/result.$1 fy=$work/result.$2
    if [ -f "$fx" ] && [ -f "$fy" ]; then
      paste -d' ' <(awk '{ print $1 }' "$fx") <(awk '{ print $1 }' "$fy") |
        awk '{ print $1 / $2 }' | median | awk '{ printf " | %.2f", $1 }'
    else
      printf ' | –'
    fi
  }
  echo
  echo "## Ratios (one core; per round, the median of the rounds)"
  echo
  echo "| ratio | no cache | cache 30 | target |"
  echo "|---|---:|---:|---|"
  for pair in "a|b|a/b: infradns vs OpenShift templates|≥ 2.0 without cache" "a|c|a/c: infradns vs whoami|" "a|d|a/d: infradns vs one map lookup|≥ 0.95" "e|f|e/f: mdnsnodes vs hosts, 500 nodes|" \
    "r|t|r/t: PTR, infradns vs one map lookup|≥ 0.95" "r|e|r/e: PTR vs the node names' A/AAAA (e)|≈ 1" "r|u|r/u: PTR, infradns vs OpenShift hosts|"; do
    IFS='|' read -r ours other label target <<<"$pair"
    line="| $label"
    for cache in "${caches[@]}"; do line+=$(ratio "$ours.$cache.1" "$other.$cache.1"); done
    echo "$line | $target |"
  done
  echo
  echo "## The production Corefile"
  echo
  echo "p is the Corefile \`infradns render-node\` writes (below), q the same with onemap in place of apiint, appswildcard"
  echo "and mdnsnodes, o OpenShift's own production Corefile (b's templates and hosts behind \`cache 30\`, no metrics)."
  echo "Our plugins sit before \`cache\` in the chain (coredns/directives.go), so their names never pay a cache"
  echo "lookup; \`cache 30\` serves what \`forward\` answers. See Profiling for what the rendered Corefile's"
  echo "\`errors\` + \`prometheus\` cost here."
  echo
  echo "| ratio | one core | two cores | target |"
  echo "|---|---:|---:|---|"
  echo "| p/q: rendered Corefile, infradns vs one map lookup$(ratio p.rendered.1 q.rendered.1)$(ratio p.rendered.2 q.rendered.2) | ≥ 0.95 |"
  echo "| p/o: rendered Corefile vs OpenShift's production Corefile$(ratio p.rendered.1 o.rendered.1) | – |  |"
  echo
  echo "## A second core"
  echo
  echo "| config | qps 2 cores / 1 core | server cores used (1 → 2) | qps per server core, 2 cores / 1 core | target |"
  echo "|---|---:|---:|---:|---|"
  for k in "a|none" "d|none" "p|rendered" "q|rendered"; do
    IFS='|' read -r id cache <<<"$k"
    [ -n "${qps_med[$id.$cache.1]:-}" ] && [ -n "${qps_med[$id.$cache.2]:-}" ] || continue
    awk -v id="$id" -v c="$cache" -v q1="${qps_med[$id.$cache.1]}" -v q2="${qps_med[$id.$cache.2]}" \
      -v u1="${cores_med[$id.$cache.1]}" -v u2="${cores_med[$id.$cache.2]}" 'BEGIN {
        printf "| %s (cache %s) | %.2f | %.2f → %.2f | %.2f | ≥ 1.70 |\n", id, c, q2 / q1, u1, u2, (q2 / u2) / (q1 / u1) }'
  done
  echo
  echo "On this 2-CPU machine dnsperf needs a CPU too: with two cores the server and the load generator share both,"
  echo "so the first column is bounded by what dnsperf leaves. The last column is the server's throughput per CPU"
  echo "second it used: 1.00 means the second core's time is as productive as the first's (no lock or socket"
  echo "contention); qps 2 cores / 1 core ≈ that × server cores used (2 cores) / server cores used (1 core)."
  echo
  echo "## Corefiles (one core; a–f: the no-cache variant, the cache rows add \`cache 30\` first; two cores add \`multisocket\`)"
  for c in "${selected[@]}"; do
    IFS='|' read -r id desc fn expect set <<<"$c"
    f=$work/Corefile.$id.none.1
    [ -f "$f" ] || f=$work/Corefile.$id.rendered.1
    echo
    echo "$id — $desc:"
    echo
    echo '```'
    sed "s#$work/#\$WORK/#g" "$f" | sed -E 's/^\.:[0-9]+ \{/.:PORT {/; s/127\.0\.0\.1:[0-9]+/127.0.0.1:PORT/'
    echo '```'
  done
  echo
  echo "\`\$WORK/upstream.zone\` holds only the SOA and NS of $zone (it answers OpenShift's NXDOMAINs in place of the"
  echo "site DNS it forwards to); \`\$WORK/onemap.names\` lists api, api-int and the 3000 apps names with their VIPs;"
  echo "\`\$WORK/hosts.nodes\` holds the $nodes nodes' IPv4 and IPv6 lines; \`\$WORK/forward.conf\` forwards to the upstream"
  echo "stand-in (\`whoami\`), which got $upstream_queries queries in all (the loop plugin's probes at start)."
  echo
  echo "## Profiling"
  echo
  echo "\`bin/coredns-bench\` also has the \`pprof\` plugin: add \`pprof 127.0.0.1:15398\` to a Corefile above, run it pinned as here"
  echo "with dnsperf, and fetch \`http://127.0.0.1:15398/debug/pprof/profile?seconds=10\`. In a profile, watch \`runtime.newstack\`:"
  echo "miekg/dns serves each UDP query on a new goroutine with a small stack, so every frame our chain adds on the way to"
  echo "\`WriteMsg\` can push the packing code over a stack-size boundary and make each query pay a \`runtime.copystack\`."
  echo "That is what the rendered Corefile (p) pays: in a 7-s profile of p, \`runtime.newstack\` took 19 % of the server's"
  echo "CPU, 790 ms of it growing the stack at \`appswildcard\`'s entry, a depth that \`errors\` and \`prometheus\` add"
  echo "(their own work is small). The same Corefile without both ran at 74–83k qps against 52–57k with them (3 runs of"
  echo "5 s each, 2026-11-25); without \`prometheus\` alone, 56–60k."
  # The scale benchmark (make bench-scale, ~20 min against a real
  # kube-apiserver) has its own generated file; its tables are carried here.
  if [[ -f docs/scale-benchmarks.md ]]; then
    echo
    echo "## Scale: following 500 to 5,000 Nodes (from docs/scale-benchmarks.md, \`make bench-scale\`)"
    echo
    sed -e '1,/^$/d' -e 's/^## /### /' docs/scale-benchmarks.md
  fi
} >"$work/report.md"

mkdir -p "$(dirname "$out")"
cp "$work/report.md" "$out"
echo
cat "$out"
