#!/usr/bin/env bash
# Single-node throughput with wrk on loopback: creates/s (every create is a
# Raft commit: fsync of the shard's log and of its bbolt state) and
# redirects/s (served from the node's cache/bbolt).
#
#   bash scripts/bench.sh            # 10 s per run, 64 connections
#   DURATION=30s CONNS=128 bash scripts/bench.sh
#
# Bounded: each wrk run stops after DURATION; the node is started here and
# stopped here, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
HTTP=127.0.0.1:${BENCH_HTTP_PORT:-18480}
RAFT=127.0.0.1:${BENCH_RAFT_PORT:-18470}

command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT

go build -tags hashicorpmetrics -o "$work/linknode" ./cmd/linknode
"$work/linknode" -data-dir "$work/data" -http-addr "$HTTP" -raft-addr "$RAFT" -gossip-addr 127.0.0.1:0 -log-level warn \
  >"$work/node.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  curl -fs "http://$HTTP/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fs "http://$HTTP/readyz" >/dev/null

echo "== machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(go version | cut -d' ' -f3)"
echo "== creates: POST /api/v1/links, $CONNS connections, $DURATION"
wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s scripts/wrk/create.lua "http://$HTTP"

# 10,000 links to redirect over.
for i in $(seq 1 10000); do
  printf '{"url":"https://example.com/r/%d"}\n' "$i"
done | xargs -d '\n' -P 16 -I{} curl -fs -H 'Content-Type: application/json' -d '{}' "http://$HTTP/api/v1/links" \
  | grep -o '"code":"[^"]*"' | cut -d'"' -f4 >"$work/codes"
echo "== redirects: GET /{code} over $(wc -l <"$work/codes") codes, $CONNS connections, $DURATION"
CODES="$work/codes" wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s scripts/wrk/redirect.lua "http://$HTTP"
