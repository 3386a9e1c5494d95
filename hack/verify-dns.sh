#!/usr/bin/env bash
# verify-dns.sh — checks, with dig, that an infradns server answers the cluster
# names the way nodes, pods and installers rely on: the API and ingress VIPs,
# authoritative negative answers, and the same over UDP and TCP.
#
# One PASS/FAIL line per check, then "N passed, M failed". Exit status: 0 when
# every check passed, 1 when one failed, 2 on a usage error.
#
# Example (on a node, against its own CoreDNS):
#   hack/verify-dns.sh --server 10.0.0.11 --domain ocp4.example.com \
#     --api-vip 192.0.2.5,2001:db8::5 --ingress-vip 192.0.2.10,2001:db8::10
set -uo pipefail

usage() {
  cat <<'EOF'
Usage: verify-dns.sh --server ADDR --domain DOMAIN --api-vip IP[,IP] --ingress-vip IP[,IP] [options]

Required:
  --server ADDR        DNS server to ask (IPv4 or IPv6 address, or a name dig resolves)
  --domain DOMAIN      cluster domain, e.g. ocp4.example.com (api.DOMAIN, *.apps.DOMAIN)
  --api-vip IP         API VIP; repeat the flag or give a comma list (one per family)
  --ingress-vip IP     ingress VIP; repeat the flag or give a comma list

Options:
  --port N             server port (default 53)
  --transport T        udp, tcp or both (default both)
  --udp | --tcp        shorthand for --transport udp / --transport tcp
  --timeout S          seconds dig waits for one answer (default 2; one try)
  --dig-prefix CMD     run dig through CMD, e.g. "ip netns exec client" (split on spaces)
  --ptr                also check PTR of every VIP (needs a root '.' server block):
                       API VIP -> api-int.DOMAIN, ingress VIP -> ingress.apps.DOMAIN
  -v, --verbose        print dig's output under every failed check
  -h, --help           this text

A family without a VIP (no IPv6 VIP given) must answer NODATA for that type.
IPv6 addresses are compared in expanded form, so any valid spelling works.
EOF
}

die_usage() { echo "verify-dns: $*" >&2; echo "Run with --help for usage." >&2; exit 2; }

server='' port=53 domain='' transport=both timeout=2 verbose=0 ptr=0
api_vips=() ingress_vips=() dig_prefix=()

# add_vips LIST_NAME VALUE: VALUE may be a comma list.
add_vips() {
  local -n list=$1
  local v vs
  IFS=, read -ra vs <<<"$2"
  for v in "${vs[@]}"; do
    v=${v// /}
    [ -n "$v" ] && list+=("$v")
  done
}

while [ $# -gt 0 ]; do
  opt=$1 val='' inline=0
  case $opt in
    --*=*) val=${opt#*=}; opt=${opt%%=*}; inline=1 ;;
  esac
  case $opt in
    -h|--help) usage; exit 0 ;;
    -v|--verbose) verbose=1; shift; continue ;;
    --ptr) ptr=1; shift; continue ;;
    --udp) transport=udp; shift; continue ;;
    --tcp) transport=tcp; shift; continue ;;
    --server|--port|--domain|--api-vip|--ingress-vip|--transport|--timeout|--dig-prefix) ;;
    *) die_usage "unknown argument: $opt" ;;
  esac
  if [ "$inline" = 1 ]; then
    shift
  else
    [ $# -ge 2 ] || die_usage "$opt needs a value"
    val=$2
    shift 2
  fi
  case $opt in
    --server) server=$val ;;
    --port) port=$val ;;
    --domain) domain=$val ;;
    --api-vip) add_vips api_vips "$val" ;;
    --ingress-vip) add_vips ingress_vips "$val" ;;
    --transport) transport=$val ;;
    --timeout) timeout=$val ;;
    --dig-prefix) read -ra dig_prefix <<<"$val" ;;
  esac
done

[ -n "$server" ] || die_usage "--server is required"
[ -n "$domain" ] || die_usage "--domain is required"
[ ${#api_vips[@]} -gt 0 ] || die_usage "at least one --api-vip is required"
[ ${#ingress_vips[@]} -gt 0 ] || die_usage "at least one --ingress-vip is required"
if ! [[ $port =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then die_usage "bad --port: $port"; fi
if ! [[ $timeout =~ ^[0-9]+$ ]] || [ "$timeout" -lt 1 ]; then die_usage "bad --timeout: $timeout"; fi
case $transport in
  udp) transports=(udp) ;;
  tcp) transports=(tcp) ;;
  both) transports=(udp tcp) ;;
  *) die_usage "bad --transport: $transport (udp, tcp or both)" ;;
esac
domain=${domain%.}
domain=${domain,,}
[ -n "$domain" ] || die_usage "--domain is empty"
if [ ${#dig_prefix[@]} -eq 0 ]; then
  command -v dig >/dev/null 2>&1 || { echo "verify-dns: dig not found (Debian: apt-get install bind9-dnsutils; RHEL: dnf install bind-utils)" >&2; exit 2; }
fi

# expand_ip prints an address in a canonical comparable form: IPv4 as is,
# IPv6 as eight zero-padded lower-case groups.
expand_ip() {
  local a=${1,,} head tail n i out=() groups=()
  if [[ $a != *:* ]]; then printf '%s' "$a"; return; fi
  if [[ $a == *::* ]]; then
    head=${a%%::*} tail=${a#*::}
    local h=() t=()
    [ -n "$head" ] && IFS=: read -ra h <<<"$head"
    [ -n "$tail" ] && IFS=: read -ra t <<<"$tail"
    n=$((8 - ${#h[@]} - ${#t[@]}))
    groups=("${h[@]}")
    for ((i = 0; i < n; i++)); do groups+=(0); done
    groups+=("${t[@]}")
  else
    IFS=: read -ra groups <<<"$a"
  fi
  for i in "${groups[@]}"; do out+=("$(printf '%04x' "0x$i" 2>/dev/null || printf '%s' "$i")"); done
  local IFS=:
  printf '%s' "${out[*]}"
}

# sorted_set prints its arguments expanded, sorted and space-separated.
sorted_set() {
  local x
  for x in "$@"; do expand_ip "$x"; echo; done | sort -u | paste -sd' ' -
}

api4=() api6=() ing4=() ing6=()
for v in "${api_vips[@]}"; do if [[ $v == *:* ]]; then api6+=("$v"); else api4+=("$v"); fi; done
for v in "${ingress_vips[@]}"; do if [[ $v == *:* ]]; then ing6+=("$v"); else ing4+=("$v"); fi; done

rand_hex() { od -An -N5 -tx1 /dev/urandom | tr -d ' \n'; }

# mix_case alternates upper and lower case, so a server that lower-cases names
# (or answers from a case-folded cache) shows up.
mix_case() {
  local s=$1 mixed='' i c
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    if ((i % 2)); then mixed+=${c^^}; else mixed+=${c,,}; fi
  done
  printf '%s' "$mixed"
}

passed=0 failed=0
dead=''        # set when the server gave no answer at all on the current transport

pass() { passed=$((passed + 1)); printf 'PASS  %-3s  %s\n' "$cur" "$1"; }
fail() {
  local l
  failed=$((failed + 1))
  printf 'FAIL  %-3s  %s\n' "$cur" "$1"
  if [ "$verbose" = 1 ] && [ -n "${Q_RAW:-}" ]; then while IFS= read -r l; do printf '      | %s\n' "$l"; done <<<"$Q_RAW"; fi
}

# query NAME TYPE runs dig on the current transport and parses its output into
# Q_STATUS, Q_FLAGS, Q_ANS and Q_AUTH ("owner type rdata" per record). It
# returns 1, with Q_ERR set, when dig got no usable answer.
query() {
  local name=$1 type=$2 out rc line section='' owner rtype rdata
  Q_STATUS='' Q_FLAGS='' Q_ERR='' Q_RAW='' Q_ANS=() Q_AUTH=()
  local args=(+time="$timeout" +tries=1 +noall +comments +answer +authority -p "$port" "@$server" "$name" "$type")
  [ "$cur" = tcp ] && args=(+tcp "${args[@]}")
  out=$("${dig_prefix[@]}" dig "${args[@]}" 2>&1)
  rc=$?
  Q_RAW=$out
  if [ $rc -ne 0 ]; then
    Q_ERR="no answer (dig exit $rc: $(grep -m1 -v '^$' <<<"$out"))"
    return 1
  fi
  while IFS= read -r line; do
    case $line in
      *'->>HEADER<<-'*) Q_STATUS=${line#*status: }; Q_STATUS=${Q_STATUS%%,*} ;;
      ';; flags:'*) Q_FLAGS=${line#;; flags: }; Q_FLAGS=${Q_FLAGS%%;*} ;;
      ';; ANSWER SECTION:'*) section=ans ;;
      ';; AUTHORITY SECTION:'*) section=auth ;;
      ';; '*'SECTION:'*) section=other ;;
      ';'* | '') ;;
      *)
        read -r owner _ _ rtype rdata <<<"$line"
        case $section in
          ans) Q_ANS+=("$owner $rtype $rdata") ;;
          auth) Q_AUTH+=("$owner $rtype $rdata") ;;
        esac
        ;;
    esac
  done <<<"$out"
  if [ -z "$Q_STATUS" ]; then
    Q_ERR="unparsable dig output: $(grep -m1 -v '^$' <<<"$out")"
    return 1
  fi
  return 0
}

has_flag() { [[ " $Q_FLAGS " == *" $1 "* ]]; }

# header_problem WANT_STATUS prints why the header is wrong, or nothing.
header_problem() {
  local why=()
  [ "$Q_STATUS" = "$1" ] || why+=("status $Q_STATUS, want $1")
  has_flag aa || why+=("no aa flag")
  has_flag ra && why+=("ra flag set")
  local IFS=';'
  printf '%s' "${why[*]}"
}

# soa_in_authority: the authority section holds the zone's SOA at the apex.
soa_in_authority() {
  local rr owner rtype rest
  for rr in "${Q_AUTH[@]}"; do
    read -r owner rtype rest <<<"$rr"
    owner=${owner%.}
    [ "$rtype" = SOA ] && [ "${owner,,}" = "$domain" ] && return 0
  done
  return 1
}

# run_query NAME TYPE LABEL: query, or record a failure and return 1.
run_query() {
  if [ -n "$dead" ]; then fail "$3: skipped, the server did not answer over $cur"; return 1; fi
  if ! query "$1" "$2"; then
    fail "$3: $Q_ERR"
    [[ $Q_ERR == "no answer"* ]] && [ "$checks_on_transport" -eq 0 ] && dead=1
    return 1
  fi
  return 0
}

# check_addrs NAME TYPE EXACT_CASE WANT...: an authoritative NOERROR whose answer
# is exactly the WANT set at NAME; with no WANT, NODATA with the SOA.
check_addrs() {
  local name=$1 type=$2 exact=$3
  shift 3
  local label="$name $type" rr owner rtype rdata got=() bad=() p
  run_query "$name" "$type" "$label" || { checks_on_transport=$((checks_on_transport + 1)); return; }
  checks_on_transport=$((checks_on_transport + 1))
  p=$(header_problem NOERROR)
  if [ -n "$p" ]; then fail "$label: $p"; return; fi
  for rr in "${Q_ANS[@]}"; do
    read -r owner rtype rdata <<<"$rr"
    if [ "$rtype" != "$type" ]; then bad+=("unexpected $rtype record"); continue; fi
    if [ "$exact" = 1 ]; then
      [ "$owner" = "$name." ] || bad+=("owner $owner, want $name.")
    else
      [ "${owner,,}" = "${name,,}." ] || bad+=("owner $owner, want $name.")
    fi
    got+=("$rdata")
  done
  if [ ${#bad[@]} -gt 0 ]; then fail "$label: ${bad[0]}"; return; fi
  if [ $# -eq 0 ]; then
    if [ ${#got[@]} -ne 0 ]; then fail "$label: want NODATA (no $type VIP configured), got ${got[*]}"; return; fi
    if ! soa_in_authority; then fail "$label: NODATA without the $domain SOA in the authority section"; return; fi
    pass "$label = NODATA"
    return
  fi
  local want_set got_set
  want_set=$(sorted_set "$@")
  got_set=$(sorted_set "${got[@]}")
  if [ "$want_set" != "$got_set" ]; then fail "$label: got [${got[*]}], want [$*]"; return; fi
  pass "$label = ${got[*]}"
}

# check_negative NAME TYPE STATUS LABEL: an authoritative STATUS (NXDOMAIN, or
# NOERROR for NODATA) with no answer and the zone SOA in the authority section.
check_negative() {
  local name=$1 type=$2 status=$3 label="$1 $2" p
  run_query "$name" "$type" "$label" || { checks_on_transport=$((checks_on_transport + 1)); return; }
  checks_on_transport=$((checks_on_transport + 1))
  p=$(header_problem "$status")
  if [ -n "$p" ]; then fail "$label: $p"; return; fi
  if [ ${#Q_ANS[@]} -ne 0 ]; then fail "$label: want an empty answer, got: ${Q_ANS[0]}"; return; fi
  if ! soa_in_authority; then fail "$label: no $domain SOA in the authority section"; return; fi
  if [ "$status" = NOERROR ]; then pass "$label = NODATA"; else pass "$label = $status"; fi
}

# reverse_name IP prints the reverse name of IP: in-addr.arpa for IPv4, the
# nibbles in ip6.arpa for IPv6.
reverse_name() {
  local a x i out=''
  if [[ $1 != *:* ]]; then
    IFS=. read -ra x <<<"$1"
    printf '%s.%s.%s.%s.in-addr.arpa' "${x[3]}" "${x[2]}" "${x[1]}" "${x[0]}"
    return
  fi
  a=$(expand_ip "$1")
  a=${a//:/}
  for ((i = ${#a} - 1; i >= 0; i--)); do out+="${a:i:1}."; done
  printf '%sip6.arpa' "$out"
}

# check_ptr IP WANT: an authoritative NOERROR whose answer is one PTR to WANT.
check_ptr() {
  local name label="PTR $1" p owner rtype rdata
  name=$(reverse_name "$1")
  run_query "$name" PTR "$label" || { checks_on_transport=$((checks_on_transport + 1)); return; }
  checks_on_transport=$((checks_on_transport + 1))
  p=$(header_problem NOERROR)
  if [ -n "$p" ]; then fail "$label: $p"; return; fi
  if [ ${#Q_ANS[@]} -ne 1 ]; then fail "$label: want one PTR record, got ${#Q_ANS[@]} records"; return; fi
  read -r owner rtype rdata <<<"${Q_ANS[0]}"
  if [ "$rtype" != PTR ] || [ "${rdata,,}" != "$2." ]; then fail "$label: got ${Q_ANS[0]}, want PTR $2."; return; fi
  pass "$label = $rdata"
}

check_apex_soa() {
  local label="$domain SOA" p owner rtype rest
  run_query "$domain" SOA "$label" || { checks_on_transport=$((checks_on_transport + 1)); return; }
  checks_on_transport=$((checks_on_transport + 1))
  p=$(header_problem NOERROR)
  if [ -n "$p" ]; then fail "$label: $p"; return; fi
  if [ ${#Q_ANS[@]} -ne 1 ]; then fail "$label: want one SOA record, got ${#Q_ANS[@]} records"; return; fi
  read -r owner rtype rest <<<"${Q_ANS[0]}"
  owner=${owner%.}
  if [ "$rtype" != SOA ] || [ "${owner,,}" != "$domain" ]; then fail "$label: got ${Q_ANS[0]}"; return; fi
  pass "$label = $rest"
}

for cur in "${transports[@]}"; do
  dead='' checks_on_transport=0
  r=$(rand_hex)
  check_addrs "api.$domain" A 0 "${api4[@]}"
  check_addrs "api.$domain" AAAA 0 "${api6[@]}"
  check_addrs "api-int.$domain" A 0 "${api4[@]}"
  check_addrs "api-int.$domain" AAAA 0 "${api6[@]}"
  check_addrs "verify-$r.apps.$domain" A 0 "${ing4[@]}"
  check_addrs "verify-$r.apps.$domain" AAAA 0 "${ing6[@]}"
  check_addrs "a$r.b$r.apps.$domain" A 0 "${ing4[@]}"
  check_addrs "a$r.b$r.apps.$domain" AAAA 0 "${ing6[@]}"
  check_negative "verify-nx-$r.$domain" A NXDOMAIN
  check_apex_soa
  check_negative "apps.$domain" A NOERROR
  check_negative "api.$domain" MX NOERROR
  # A fresh random name, so no cache can have seen another spelling of it.
  if [ ${#ing4[@]} -gt 0 ]; then
    check_addrs "$(mix_case "verify-case-$r.apps.$domain")" A 1 "${ing4[@]}"
  else
    check_addrs "$(mix_case "verify-case-$r.apps.$domain")" AAAA 1 "${ing6[@]}"
  fi
  check_addrs "$(mix_case "api.$domain")" A 0 "${api4[@]}"
  if [ "$ptr" = 1 ]; then
    for v in "${api_vips[@]}"; do check_ptr "$v" "api-int.$domain"; done
    for v in "${ingress_vips[@]}"; do check_ptr "$v" "ingress.apps.$domain"; done
  fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
