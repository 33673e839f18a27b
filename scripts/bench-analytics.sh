#!/usr/bin/env bash
# Redirect throughput with analytics on versus off, same node, same data,
# same machine, interleaved (on, off, on, off, ...): wrk on loopback, browser
# User-Agent and Referer so every redirect is a counted human visit with a
# raw visit record. Prints each run and the medians.
#
#   bash scripts/bench-analytics.sh          # 3 rounds of 10 s each way
#   ROUNDS=5 DURATION=20s bash scripts/bench-analytics.sh
#   ZIPF=1 bash scripts/bench-analytics.sh   # codes drawn Zipf-like (s = 1) instead of round-robin
#
# Bounded: every wrk run stops after DURATION; the node is started and
# stopped here, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
DIST=uniform
[ -n "${ZIPF:-}" ] && DIST=zipf
HTTP=127.0.0.1:${BENCH_HTTP_PORT:-18580}
RAFT=127.0.0.1:${BENCH_RAFT_PORT:-18570}

. scripts/bench-node.sh
work=$(mktemp -d)
trap 'stop; rm -rf "$work"' EXIT

go build -o "$work/linknode" ./cmd/linknode
start() { # $1: -analytics value
  LINKNODE_ADMIN_KEY=$key "$work/linknode" -data-dir "$work/data" -http-addr "$HTTP" -raft-addr "$RAFT" -gossip-addr 127.0.0.1:0 \
    -admin-addr 127.0.0.1:0 -log-level warn -analytics="$1" -visits="${VISITS:-true}" >>"$work/node.log" 2>&1 &
  pid=$!
  wait_ready "$work/node.log"
}

start true
load_links 10000 "$work/codes"
stop

echo "== machine: $(nproc) cores (wrk shares them), $(go version | cut -d' ' -f3); $(wc -l <"$work/codes") links ($DIST keys), $CONNS connections, $DURATION per run"
on=(); off=()
for r in $(seq 1 "$ROUNDS"); do
  for mode in true false; do
    start "$mode"
    line=$(CODES="$work/codes" DIST=$DIST BROWSER=1 wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s scripts/wrk/codes.lua "http://$HTTP" | grep RESULT)
    stop
    echo "round $r analytics=$mode: $line"
    rps=$(echo "$line" | sed 's/.*RESULT rps=\([0-9]*\).*/\1/') # not wrk_rps, printed after it
    if [ "$mode" = true ]; then on+=("$rps"); else off+=("$rps"); fi
  done
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mon=$(median "${on[@]}"); moff=$(median "${off[@]}")
echo "== median redirects/s: analytics on $mon, off $moff; on/off = $(awk -v a="$mon" -v b="$moff" 'BEGIN{printf "%.3f", a/b}')"
