#!/usr/bin/env bash
# What a crash costs a restart, per binary: a fresh one-node cluster is
# bulk-loaded (8 clients, 1,000 links a request) for LOAD seconds (default
# 6), SIGKILLed mid-load, and started again on its files; the time from
# that start to /readyz (every group caught up with its log) is printed,
# and the last CHECK (default 1,000) links the load had acknowledged, the
# ones most likely still in an uncommitted state file, must redirect. In
# turn, ROUNDS times (default 3). Ports: BENCH_PORT_BASE (19300) + 60, 70,
# 80 and 580, on loopback; only the processes it starts are ended, by PID.
#
#   bash scripts/crash-replay.sh BIN [BIN...]
#
# Used for the state files' commit interval (BENCHMARKS.md, issue 28
# session 8): the longer it is, the more a restart applies again.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: crash-replay.sh BIN [BIN...]" >&2; exit 2; }
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-3} load=${LOAD:-6} check=${CHECK:-1000}
P=${BENCH_PORT_BASE:-19300}
work=$(mktemp -d)
pid= lp=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; [ -n "$lp" ] && kill "$lp" 2>/dev/null; rm -rf "$work"' EXIT
umask 077
go build -o "$work/benchload" ./scripts/benchload
key="lrk_$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
start() { # bin
  LINKNODE_ADMIN_KEY=$key "$1" -node-id n1 -data-dir "$work/n1" -http-addr "127.0.0.1:$((P + 80))" \
    -raft-addr "127.0.0.1:$((P + 70))" -gossip-addr "127.0.0.1:$((P + 60))" -admin-addr "127.0.0.1:$((P + 580))" \
    -public-url "http://127.0.0.1:$((P + 80))" -log-level warn >>"$work/n1.log" 2>&1 &
  pid=$!
}
ready() { # up to 60 s
  for _ in $(seq 3000); do
    curl -fs -o /dev/null "http://127.0.0.1:$((P + 80))/readyz" && return 0
    sleep 0.02
  done
  return 1
}
for r in $(seq "$rounds"); do
  for bin in "$@"; do
    rm -rf "$work/n1" "$work/codes"
    start "$bin"
    ready || { echo "$bin never ready; its log:" >&2; tail -20 "$work/n1.log" >&2; exit 1; }
    LINKRAFT_KEY=$key "$work/benchload" -targets "http://127.0.0.1:$((P + 80))" -n 5000000 -bulk 1000 -clients 8 \
      -timeout 2m -out "$work/codes" >"$work/load.log" 2>&1 &
    lp=$!
    sleep "$load"
    kill -9 "$pid"; wait "$pid" 2>/dev/null || true
    pid=
    # The load fails fast from here on and writes what was acknowledged.
    wait "$lp" || true
    lp=
    t0=$(date +%s.%N)
    start "$bin"
    ready || { echo "$bin not ready within 60 s after the crash; its log:" >&2; tail -20 "$work/n1.log" >&2; exit 1; }
    t1=$(date +%s.%N)
    acked=$(wc -l <"$work/codes")
    bad=$(tail -n "$check" "$work/codes" | awk -v u="http://127.0.0.1:$((P + 80))" '{print "url = \"" u "/" $1 "\""; print "output = \"/dev/null\""}' |
      curl -s -K - -w '%{http_code}\n' | grep -cv '^302$' || true)
    echo "round $r $bin: $acked links acknowledged; ready $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s after the crash; last $check acknowledged: $bad not redirecting"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    pid=
    [ "$bad" = 0 ] || { echo "acknowledged links lost" >&2; exit 1; }
  done
done
