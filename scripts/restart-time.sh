#!/usr/bin/env bash
# Time from start to /readyz of one or more linknode binaries on the same
# stopped one-node data dir, in turn, ROUNDS times (default 3): what a
# change to the start did, on the same files. The node's files are read once
# first so every start finds them in the page cache. Each node is stopped
# (SIGTERM, by PID) before the next starts. Ports: BENCH_PORT_BASE (19200)
# + 60, 70, 80 and 580, on loopback.
#
#   bash scripts/restart-time.sh DATA_DIR BIN [BIN...]
#
# A data dir to time: `LINKS=... bash scripts/bench.sh scale` removes its
# own, so make one with scripts/benchload into a node started by hand, then
# stop that node.
set -euo pipefail
data=${1:?usage: restart-time.sh DATA_DIR BIN [BIN...]}
shift
[ $# -gt 0 ] || { echo "usage: restart-time.sh DATA_DIR BIN [BIN...]" >&2; exit 2; }
rounds=${ROUNDS:-3}
P=${BENCH_PORT_BASE:-19200}
log=$(mktemp)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -f "$log"' EXIT
find "$data" -type f -exec cat {} + >/dev/null
for r in $(seq "$rounds"); do
  for bin in "$@"; do
    t0=$(date +%s.%N)
    "$bin" -node-id "$(cat "$data/node-id")" -data-dir "$data" -http-addr "127.0.0.1:$((P + 80))" -raft-addr "127.0.0.1:$((P + 70))" \
      -gossip-addr "127.0.0.1:$((P + 60))" -admin-addr "127.0.0.1:$((P + 580))" -public-url "http://127.0.0.1:$((P + 80))" \
      -log-level warn >>"$log" 2>&1 &
    pid=$!
    ready=no
    for _ in $(seq 3000); do # up to 60 s
      if curl -fs -o /dev/null "http://127.0.0.1:$((P + 80))/readyz"; then ready=yes; break; fi
      sleep 0.02
    done
    t1=$(date +%s.%N)
    echo "round $r $bin: ready=$ready after $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    pid=
    [ "$ready" = yes ] || { echo "not ready within 60 s; its log:" >&2; tail -20 "$log" >&2; exit 1; }
  done
done
