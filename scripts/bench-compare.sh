#!/usr/bin/env bash
# Creates and redirects of two revisions of linknode, measured in one
# interleaved run on this machine: what a change did to the write and the
# redirect path against the commit before it.
#
#   bash scripts/bench-compare.sh BASE [HEAD]   # any revisions git knows; no HEAD: the working tree
#   ROUNDS=5 DURATION=10s LINKS=10000 bash scripts/bench-compare.sh HEAD~1
#
# Each round measures both revisions, one after the other (the order
# alternates between rounds):
#   creates    one node, 64 clients, closed loop, DURATION (scripts/benchcluster
#              -nodes 1 -clients-list 64 -trials 0 -bin ...)
#   redirects  one node as shipped (analytics and raw visits on), LINKS links, wrk
#              -t2 -c64 for DURATION with a browser User-Agent and Referer (every
#              request a counted human visit), codes in turn (scripts/wrk/codes.lua)
# then prints the medians per revision and head/base. Both nodes are a plain
# `go build ./cmd/linknode`; the load generators are this tree's, so only the
# node differs. Bounded: every load stops after DURATION; every node is
# started and stopped here, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -ge 1 ] || { sed -n '2,9p' "$0"; exit 2; }
BASE=$1
HEAD=${2:-}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
LINKS=${LINKS:-10000}
HTTP=127.0.0.1:${BENCH_HTTP_PORT:-18680}
RAFT=127.0.0.1:${BENCH_RAFT_PORT:-18670}

. scripts/bench-node.sh
work=$(mktemp -d)
cleanup() {
  stop
  for rev in base head; do
    [ -d "$work/src-$rev" ] && git worktree remove --force "$work/src-$rev" >/dev/null 2>&1
  done
  rm -rf "$work"
}
trap cleanup EXIT

# build REV NAME: linknode at REV ("" = the working tree) into $work/NAME.
build() {
  if [ -z "$1" ]; then
    go build -o "$work/$2" ./cmd/linknode
  else
    git worktree add --detach "$work/src-$2" "$1" >/dev/null 2>&1
    (cd "$work/src-$2" && go build -o "$work/$2" ./cmd/linknode)
  fi
}
build "$BASE" base
build "$HEAD" head
go build -o "$work/benchcluster" ./scripts/benchcluster
base_id=$(git rev-parse --short "$BASE")
head_id=${HEAD:+$(git rev-parse --short "$HEAD")}
head_id=${head_id:-"$(git rev-parse --short HEAD)+tree"}

# start NAME: a node of binary NAME on its own data dir, as shipped.
start() {
  LINKNODE_ADMIN_KEY=$key "$work/$1" -data-dir "$work/data-$1" -http-addr "$HTTP" -raft-addr "$RAFT" \
    -gossip-addr 127.0.0.1:0 -admin-addr 127.0.0.1:0 -log-level warn >>"$work/node-$1.log" 2>&1 &
  pid=$!
  wait_ready "$work/node-$1.log"
}
# Each node gets LINKS links of its own (the same URLs), made through its API.
for rev in base head; do
  start "$rev"
  load_links "$LINKS" "$work/codes-$rev"
  stop
done

echo "== $(nproc) cores (the load generators share them), $(go version | cut -d' ' -f3); base $base_id, head $head_id"
echo "== creates: 1 node, 64 clients, $DURATION; redirects: 1 node as shipped, $LINKS links, wrk -t2 -c64, $DURATION"
declare -A creates redirects
for r in $(seq 1 "$ROUNDS"); do
  order="base head"
  [ $((r % 2)) -eq 0 ] && order="head base"
  for rev in $order; do
    line=$("$work/benchcluster" -bin "$work/$rev" -nodes 1 -clients-list 64 -trials 0 -duration "$DURATION" | grep '^creates:')
    c=$(echo "$line" | sed 's/.* \([0-9]*\) creates\/s.*/\1/')
    creates[$rev]+="$c "
    echo "round $r $rev creates: $line"
    start "$rev"
    line=$(CODES="$work/codes-$rev" BROWSER=1 wrk -t2 -c64 -d"$DURATION" --latency -s scripts/wrk/codes.lua "http://$HTTP" | grep RESULT)
    stop
    redirects[$rev]+="$(echo "$line" | sed 's/.*RESULT rps=\([0-9]*\).*/\1/') "
    echo "round $r $rev redirects: $line"
  done
done
median() { printf '%s\n' $@ | sort -n | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
for what in creates redirects; do
  declare -n runs=$what
  b=$(median ${runs[base]}); h=$(median ${runs[head]})
  echo "== $what/s median: base $b (${runs[base]% }), head $h (${runs[head]% }); head/base = $(awk -v a="$h" -v b="$b" 'BEGIN{printf "%.3f", a/b}')"
done
