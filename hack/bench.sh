#!/usr/bin/env bash
# bench.sh — `make bench`: dnsperf against four Corefiles serving the example
# cluster's names, all run by one binary (bin/coredns-bench, built here with the
# benchmark-only onemap plugin):
#   a  infradns: apiint + appswildcard
#   b  OpenShift on-prem: CoreDNS template blocks + hosts (the stack we replace)
#   c  whoami only: the cost of CoreDNS itself (ceiling)
#   d  onemap: one map lookup of pre-built records (ceiling for a plugin)
#   e  infradns: mdnsnodes with 500 nodes heard over real multicast on lo
#   f  OpenShift's way for the same node names: hosts with 500 nodes
# each without and with `cache 30`. a-d answer the VIP names (api, *.apps), e
# and f the node names (<node>.DOMAIN A/AAAA). The server runs on CPU 0 with GOMAXPROCS=1,
# dnsperf on CPU 1, loopback only. Runs are interleaved (a b c d a b c d …) so
# machine noise hits every config alike; the table shows the median of the runs.
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
)
# Node i of e and f is worker-NNN with 10.128.i/256.i%256 and fd00:128::(i+1),
# as test/bench/mdnsflood announces them.
nodes=500
caches=(none 30)

die() { echo "bench: $*" >&2; exit 1; }

for cmd in dnsperf taskset dig ss go; do
  command -v "$cmd" >/dev/null || die "$cmd is missing (run make deps)"
done
[ "$(nproc)" -ge 2 ] || die "needs 2 CPUs (server on CPU $server_cpu, dnsperf on CPU $client_cpu)"
[[ "$secs" =~ ^[0-9]+$ && "$secs" -ge 1 ]] || die "BENCH_SECONDS must be a whole number ≥ 1"
[[ "$runs" =~ ^[0-9]+$ && "$runs" -ge 1 ]] || die "BENCH_RUNS must be a whole number ≥ 1"

work=$(mktemp -d -t infradns-bench.XXXXXX)
pid=
flood_pid=
cleanup() {
  for p in "$pid" "$flood_pid"; do
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

# corefile FUNC PORT CACHE prints a whole Corefile.
corefile() {
  echo ".:$2 {"
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

# start CONF PORT starts the server pinned to the server CPU and waits until it
# answers. Sets pid.
start() {
  local conf=$1 port=$2 i
  port_busy "$port" && die "port $port is in use"
  GOMAXPROCS=1 taskset -c "$server_cpu" "$bin" -conf "$conf" -quiet >"$work/server.log" 2>&1 &
  pid=$!
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || { cat "$work/server.log" >&2; die "server exited ($conf)"; }
    if dig +time=1 +tries=1 +short @127.0.0.1 -p "$port" "api.$zone" A >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.1
  done
  cat "$work/server.log" >&2
  die "server on port $port did not answer within 10 s"
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
  [ "$1" = e ] || return 0
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
cat >"$work/upstream.zone" <<EOF
\$ORIGIN $zone.
@       30 IN SOA ns.dns.$zone. hostmaster.$zone. 1 7200 1800 86400 30
@       30 IN NS  ns.dns.$zone.
ns.dns  30 IN A   192.0.2.53
EOF

selected=()
for c in "${configs[@]}"; do
  id=${c%%|*}
  if [ -z "$only" ] || [[ " $only " == *" $id "* ]]; then selected+=("$c"); fi
done
[ ${#selected[@]} -gt 0 ] || die "BENCH_ONLY=$only selects no config"

# Every config that serves the cluster's names must give the same answers, or
# the comparison is void.
declare -A probes wants
probes[vips]="api.$zone A|api-int.$zone AAAA|route-0001-ns-01.apps.$zone A|route-0001-ns-01.apps.$zone AAAA|nosuch-00001.$zone A"
wants[vips]="NOERROR $api_v4|NOERROR $api_v6|NOERROR $ing_v4|NOERROR $ing_v6|NXDOMAIN"
probes[nodes]="worker-042.$zone A|worker-042.$zone AAAA|WORKER-300.$zone A|worker-300.$zone MX|nosuch-node-001.$zone A"
wants[nodes]="NOERROR 10.128.0.42|NOERROR fd00:128::2b|NOERROR 10.128.1.44|NOERROR|NXDOMAIN"
for c in "${selected[@]}"; do
  IFS='|' read -r id desc fn expect set <<<"$c"
  [ "$expect" = mix ] || continue
  port=$(pick_port)
  corefile "$fn" "$port" none >"$work/Corefile.probe"
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
echo "bench: $summary; ${#selected[@]} configs × ${#caches[@]} cache settings × $runs runs × $secs s"

# --- runs: interleaved ------------------------------------------------------------

for ((r = 1; r <= runs; r++)); do
  for cache in "${caches[@]}"; do
    for c in "${selected[@]}"; do
      IFS='|' read -r id desc fn expect set <<<"$c"
      port=$(pick_port)
      conf=$work/Corefile.$id.$cache
      corefile "$fn" "$port" "$cache" >"$conf"
      start "$conf" "$port"
      fill "$id" "$port"
      res=$work/dnsperf.$id.$cache.$r
      taskset -c "$client_cpu" dnsperf -s 127.0.0.1 -p "$port" -d "$work/queries.$set.txt" \
        -l "$secs" -c "$clients" -q "$outstanding" >"$res" 2>&1 ||
        { cat "$res" >&2; die "dnsperf failed ($id, cache $cache)"; }
      rss_kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
      stop
      check "$res" "$expect" "$id" "$cache" "$set"
      qps=$(field "$res" 'Queries per second:')
      lat=$(field "$res" 'Average Latency \(s\):')
      echo "$qps $lat $rss_kb" >>"$work/result.$id.$cache"
      printf 'bench: run %d/%d  %s  cache %-4s  %10.0f qps  %6.3f ms  %5.1f MiB\n' \
        "$r" "$runs" "$id" "$cache" "$qps" "$(awk -v l="$lat" 'BEGIN { print l * 1000 }')" \
        "$(awk -v k="$rss_kb" 'BEGIN { print k / 1024 }')"
    done
  done
done
load_after=$(uptime)

# --- report -----------------------------------------------------------------------

declare -A qps_med
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
  echo "- Median of $runs runs of $secs s per row, runs interleaved (a b c … a b c …); every run's response codes checked (no SERVFAIL; NXDOMAIN share as in the query file; whoami answers all NOERROR)."
  echo "- Saturated: latency is mostly dnsperf's queue (≈ in flight / qps); compare qps. Peak RSS is the server's VmHWM after the run."
  echo
  echo "## Results"
  echo
  echo "| config | cache | qps (median) | qps of each run | avg latency ms | peak RSS MiB |"
  echo "|---|---|---:|---|---:|---:|"
  for cache in "${caches[@]}"; do
    for c in "${selected[@]}"; do
      IFS='|' read -r id desc fn expect set <<<"$c"
      f=$work/result.$id.$cache
      q=$(col 1 "$f")
      qps_med[$id.$cache]=$q
      printf '| %s — %s | %s | %.0f | %s | %.3f | %.1f |\n' "$id" "$desc" "$cache" "$q" \
        "$(awk '{ printf "%s%.0f", (NR > 1 ? ", " : ""), $1 }' "$f")" \
        "$(awk -v l="$(col 2 "$f")" 'BEGIN { print l * 1000 }')" \
        "$(awk -v k="$(col 3 "$f")" 'BEGIN { print k / 1024 }')"
    done
  done
  echo
  echo "## Ratios (qps medians)"
  echo
  echo "| ratio | no cache | cache 30 | target |"
  echo "|---|---:|---:|---|"
  for pair in "a|b|a/b: infradns vs OpenShift templates|≥ 2.0 without cache" "a|c|a/c: infradns vs whoami|" "a|d|a/d: infradns vs one map lookup|≥ 0.95" "e|f|e/f: mdnsnodes vs hosts, 500 nodes|"; do
    IFS='|' read -r ours other label target <<<"$pair"
    line="| $label"
    for cache in "${caches[@]}"; do
      if [ -n "${qps_med[$ours.$cache]:-}" ] && [ -n "${qps_med[$other.$cache]:-}" ]; then
        line+=$(awk -v x="${qps_med[$ours.$cache]}" -v y="${qps_med[$other.$cache]}" 'BEGIN { printf " | %.2f", x / y }')
      else
        line+=" | –"
      fi
    done
    echo "$line | $target |"
  done
  echo
  echo "## Corefiles (no-cache variant; the cache rows add \`cache 30\` first)"
  for c in "${selected[@]}"; do
    IFS='|' read -r id desc fn expect set <<<"$c"
    echo
    echo "$id — $desc:"
    echo
    echo '```'
    sed "s#$work/#\$WORK/#g" "$work/Corefile.$id.none" | sed -E 's/^\.:[0-9]+ \{/.:PORT {/'
    echo '```'
  done
  echo
  echo "\`\$WORK/upstream.zone\` holds only the SOA and NS of $zone (it answers OpenShift's NXDOMAINs in place of the"
  echo "site DNS it forwards to); \`\$WORK/onemap.names\` lists api, api-int and the 3000 apps names with their VIPs;"
  echo "\`\$WORK/hosts.nodes\` holds the $nodes nodes' IPv4 and IPv6 lines."
  echo
  echo "## Profiling"
  echo
  echo "\`bin/coredns-bench\` also has the \`pprof\` plugin: add \`pprof 127.0.0.1:15398\` to a Corefile above, run it pinned as here"
  echo "with dnsperf, and fetch \`http://127.0.0.1:15398/debug/pprof/profile?seconds=10\`. In a profile, watch \`runtime.newstack\`:"
  echo "miekg/dns serves each UDP query on a new goroutine with a small stack, so every frame our chain adds on the way to"
  echo "\`WriteMsg\` can push the packing code over a stack-size boundary and make each query pay a \`runtime.copystack\`."
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
