#!/usr/bin/env bash
# A local N-node linkraft cluster on 127.0.0.1, everything under one folder.
#
#   scripts/cluster.sh up [N]      build linknode, start N nodes (default 3), wait until all are ready
#   scripts/cluster.sh status      linknode status against node 1
#   scripts/cluster.sh logs [i]    tail node i's log (default: all)
#   scripts/cluster.sh down        SIGTERM every node started here (by PID), wait for them
#
# Node i listens on HTTP 127.0.0.1:$((HTTP_BASE+i)), admin $((ADMIN_BASE+i)), peer port $((RAFT_BASE+i)),
# gossip $((GOSSIP_BASE+i)).
# Folder: $LINKRAFT_CLUSTER_DIR (default ./linkraft-cluster): bin/, cluster.key, admin.key, n<i>/data, n<i>.log, n<i>.pid.
# The nodes share cluster.key (made by linknode keygen on the first up): peer traffic is mutual TLS.
# admin.key is the cluster's first admin API key: export LINKRAFT_KEY=$(cat linkraft-cluster/admin.key).
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${LINKRAFT_CLUSTER_DIR:-linkraft-cluster}
HTTP_BASE=${HTTP_BASE:-9000}
RAFT_BASE=${RAFT_BASE:-9100}
GOSSIP_BASE=${GOSSIP_BASE:-9200}
ADMIN_BASE=${ADMIN_BASE:-9300}
SHARDS=${SHARDS:-8}

up() {
  local n=${1:-3}
  mkdir -p "$DIR/bin"
  go build -tags hashicorpmetrics -o "$DIR/bin/linknode" ./cmd/linknode
  [ -f "$DIR/cluster.key" ] || "$DIR/bin/linknode" keygen -o "$DIR/cluster.key"
  if [ ! -f "$DIR/admin.key" ]; then
    (umask 077 && printf 'lrk_%s\n' "$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')" >"$DIR/admin.key")
  fi
  local join=""
  for i in $(seq 1 "$n"); do join+="127.0.0.1:$((GOSSIP_BASE + i)),"; done
  join=${join%,}
  for i in $(seq 1 "$n"); do
    if [ -f "$DIR/n$i.pid" ] && kill -0 "$(cat "$DIR/n$i.pid")" 2>/dev/null; then
      echo "n$i already running (pid $(cat "$DIR/n$i.pid"))"; continue
    fi
    mkdir -p "$DIR/n$i"
    "$DIR/bin/linknode" -node-id "n$i" -data-dir "$DIR/n$i/data" \
      -http-addr "127.0.0.1:$((HTTP_BASE + i))" -raft-addr "127.0.0.1:$((RAFT_BASE + i))" \
      -gossip-addr "127.0.0.1:$((GOSSIP_BASE + i))" -public-url "http://127.0.0.1:$((HTTP_BASE + i))" \
      -bootstrap-expect "$n" -join "$join" -shards "$SHARDS" -cluster-key-file "$DIR/cluster.key" \
      -admin-addr "127.0.0.1:$((ADMIN_BASE + i))" -admin-key-file "$DIR/admin.key" \
      ${EXTRA_FLAGS:-} >>"$DIR/n$i.log" 2>&1 &
    echo $! >"$DIR/n$i.pid"
    echo "n$i: pid $!, http://127.0.0.1:$((HTTP_BASE + i)), log $DIR/n$i.log"
  done
  for i in $(seq 1 "$n"); do
    for _ in $(seq 1 600); do
      curl -fs "http://127.0.0.1:$((HTTP_BASE + i))/readyz" >/dev/null 2>&1 && break
      sleep 0.1
    done
    curl -fs "http://127.0.0.1:$((HTTP_BASE + i))/readyz" >/dev/null || { echo "n$i not ready; see $DIR/n$i.log"; exit 1; }
  done
  echo "cluster of $n ready; API key: export LINKRAFT_KEY=\$(cat $DIR/admin.key)"
}

down() {
  local pids=()
  for f in "$DIR"/n*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; pids+=("$pid"); fi
    rm -f "$f"
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { echo "pid $pid still running after 15 s; sending SIGKILL"; kill -KILL "$pid"; }
  done
  echo "stopped ${#pids[@]} node(s)"
}

case "${1:-}" in
  up) up "${2:-3}" ;;
  down) down ;;
  status) "$DIR/bin/linknode" status -addr "127.0.0.1:$((ADMIN_BASE + 1))" -key "$(cat "$DIR/admin.key")" ;;
  logs) if [ -n "${2:-}" ]; then tail -n 100 -f "$DIR/n$2.log"; else tail -n 20 "$DIR"/n*.log; fi ;;
  *) sed -n '2,12p' "$0"; exit 2 ;;
esac
