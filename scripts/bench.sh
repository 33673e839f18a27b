#!/usr/bin/env bash
# linknode beside its peers, measured in one run on this machine.
#
#   bash scripts/bench.sh [redirect|create|scale|list|failover|analytics|profile|all]    (default: redirect)
#   bash scripts/bench.sh guard BASE [HEAD]
#
# redirect  GET /{code} with wrk (-t2 -c64, loopback) over the same links on:
#             linknode      one node as shipped (analytics and raw visits on)
#             linknode-off  the same node restarted with -analytics=false (the
#                           redirect path alone: the second row)
#             nginx         nginx-light, a `map` of the same codes, `return 302`
#             follower      a node of a 3-node cluster as shipped that leads the
#                           fewest shards
#             gomap         plain Go net/http over a map[string]string (bench/peers/gomap)
#             flask         the seed articles' design: Flask + Redis under gunicorn -w 2
#                           (bench/peers/flask_app.py)
#           each with KINDS of request: browser (a browser User-Agent and a
#           Referer: every redirect a counted human visit with a raw visit
#           record) and plain (wrk's bare GET); interleaved (every system once
#           per round, ROUNDS rounds), medians, and the ratios to nginx.
# create    creates/s and p50/p99 at 64 clients, closed loop, linknode as
#           shipped beside etcd (OS package etcd-server) with 1 and with 3
#           members on loopback, same Go load generator (scripts/benchcluster,
#           -etcd for etcd's puts), interleaved rounds, medians and the
#           linknode/etcd ratios; fsync on. CREATE_DETAIL=1 adds linknode at
#           1, 16 and 64 clients and open loop: vegeta (installed with go
#           install) offering OPEN_RATES creates/s.
# scale     per link count (LINKS): load rate, disk bytes per link (shard state,
#           Raft log, snapshots, whole data dir; ~60-byte URLs), RSS after the load and after a restart, time from restart to
#           /readyz, and redirect p50/p99 (uniform keys) after the restart: flat out
#           and paced at SCALE_RATE (16000) requests/s, the same load for every count.
# list      GET /api/v1/links (scripts/benchlist, 4 clients, 400 requests a kind) over LINKS links on
#           one node, then through every node of a 3-node cluster: the newest 100, one owner's
#           newest 100, 100 at a random depth (created_before), walks of 10 pages by cursor, and
#           the 100 most clicked (sort=-clicks) of every owner and of one. LIST_NODES="1 3" picks
#           the single node, the cluster, or both (the default). LIST_SEED=1 loads the
#           cluster's links into one node and then joins the other two (they get every
#           shard by snapshot): 10M links load in minutes instead of an hour here.
# guard BASE [HEAD]
#           what a change did to the write and the redirect path: builds
#           linknode at BASE and at HEAD (default: the working tree) and
#           measures both in one run, interleaved (the order alternates
#           each round): creates on one node and on 3 nodes (64 clients,
#           closed loop) and browser-like redirects (one node as shipped,
#           GUARD_LINKS links), with p99s. Per figure: each revision's median
#           and range (from 5 rounds on, without its lowest and highest
#           run), head/base, the noise (the larger of the two revisions' own
#           spread: that range over the median) and a verdict: moved only if
#           the ranges do not overlap and the change exceeds the noise.
#           Defaults ROUNDS=5, DURATION=5s: about 6 minutes here.
# profile [REV]
#           where the CPU goes, for BENCHMARKS.md: CPU profiles (pprof) of
#           a node as shipped under browser-like redirects (10,000 links, wrk
#           -t2 -c64), of one node under 64 creating clients, and of node n1
#           of 3 under the same; for each, `pprof -top` and a flame graph
#           (pprof's own, drawn by headless Chromium) in PROFILE_DIR
#           (default docs/profiles), named <what>-<commit>. REV: linknode
#           built at that revision (default: the working tree).
# failover  leader of most shards killed (SIGKILL): first successful write,
#           every shard it led writable again, redirect errors on the survivors
#           (scripts/benchcluster, median of 5).
# analytics redirect rps with analytics on versus off (scripts/bench-analytics.sh).
#
# Settings (environment): LINKS="100000" (link counts for redirect, e.g.
# "100000 1000000"), DIST="zipf uniform", KINDS="browser plain",
# SYSTEMS="linknode linknode-off nginx follower gomap flask", ROUNDS=3, DURATION=10s, CONNS=64, THREADS=2, BULK=1000 (links
# per POST /api/v1/links/bulk when loading; 0 loads one create per link),
# OPEN_RATES="250,500,750,1000" (create: the open-loop offered rates).
#
# It installs what it needs with apt (wrk, nginx-light, redis-server,
# python3-flask, python3-redis, gunicorn). Each sub-benchmark prints a table
# and appends it to bench/results/<UTC date>.md. Bounded: every wrk run stops
# after DURATION; every process is started here and stopped here, by PID.
set -euo pipefail
cd "$(dirname "$0")/.."

WHAT=${1:-redirect}
LINKS=${LINKS:-100000}
DIST=${DIST:-zipf uniform}
SYSTEMS=${SYSTEMS:-linknode linknode-off nginx follower gomap flask}
KINDS=${KINDS:-browser plain}
ROUNDS=${ROUNDS:-$([ "$WHAT" = guard ] && echo 5 || echo 3)}
DURATION=${DURATION:-$([ "$WHAT" = guard ] && echo 5s || echo 10s)}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
SCALE_RATE=${SCALE_RATE:-16000} # scale: the paced load whose latency compares across link counts
BULK=${BULK:-1000} # links per bulk create when loading (0: one create per link)
LIST_NODES=${LIST_NODES:-"1 3"} # list: 1 node, the 3-node cluster, or both
LOAD_CLIENTS=${LOAD_CLIENTS:-64} # list: concurrent bulk loaders into the 3-node cluster (64 saturate 2 cores: 503s)
LIST_SEED=${LIST_SEED:-} # list: set to load the cluster's links into one node, then join two (snapshots)
LIST_MORE_CLIENTS=${LIST_MORE_CLIENTS:-} # list: more passes on the cluster with these client counts (e.g. "1")
OPEN_RATES=${OPEN_RATES:-250,500,750,1000} # create: offered creates/s of the open-loop runs
VEGETA=${VEGETA:-$(command -v vegeta || echo "$(go env GOPATH)/bin/vegeta")}
PORT=${BENCH_PORT_BASE:-18400} # every port is PORT + a fixed offset

mkdir -p bench/results
RESULTS=bench/results/$(date -u +%F).md
work=$(mktemp -d)
pids=()
guard_trees=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for t in "${guard_trees[@]}"; do git worktree remove --force "$t" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

need() { # apt packages, installed if a command is missing
  local missing=()
  command -v wrk >/dev/null || missing+=(wrk)
  if [ "$1" = peers ]; then
    command -v nginx >/dev/null || missing+=(nginx-light)
    command -v redis-server >/dev/null || missing+=(redis-server)
    command -v gunicorn >/dev/null || missing+=(gunicorn)
    python3 -c 'import flask, redis' 2>/dev/null || missing+=(python3-flask python3-redis)
  fi
  if [ "$1" = vegeta ] && ! command -v "$VEGETA" >/dev/null; then
    GOFLAGS= go install github.com/tsenart/vegeta/v12@v12.13.0
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

machine() {
  echo "$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(free -g | awk '/Mem:/{print $2}') GiB, $(go version | cut -d' ' -f3), disk: $(df -h --output=source,fstype . | tail -1 | tr -s ' ')"
}

report() { # tee a table into the results file
  tee -a "$RESULTS"
}

wait_http() { # url: poll until it answers (up to 5 min: nginx parses a 10M-entry map); a node's /api/v1/keys answers once it is ready and knows the key
  for _ in $(seq 1 3000); do
    curl -fs -o /dev/null -H "Authorization: Bearer ${LINKRAFT_KEY:-}" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "not answering: $1" >&2
  return 1
}

build() {
  go build -o "$work/linknode" ./cmd/linknode
  "$work/linknode" keygen -o "$work/cluster.key"
  # Every create is authenticated, as shipped: the nodes' first admin key
  # (admin keys are not rate limited).
  LINKRAFT_KEY="lrk_$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
  export LINKRAFT_KEY
  go build -o "$work/benchload" ./scripts/benchload
  go build -o "$work/gomap" ./bench/peers/gomap
}

# start_node name http raft gossip [flags...]: a linknode in the background.
start_node() {
  local name=$1 http=$2 raft=$3 gossip=$4
  shift 4
  LINKNODE_ADMIN_KEY=$LINKRAFT_KEY "$work/linknode" -node-id "$name" -data-dir "$work/$name" -http-addr "127.0.0.1:$http" \
    -raft-addr "127.0.0.1:$raft" -gossip-addr "127.0.0.1:$gossip" -admin-addr "127.0.0.1:$((http + 500))" \
    -public-url "http://127.0.0.1:$http" -log-level warn "$@" >>"$work/$name.log" 2>&1 &
  pids+=($!)
}

# start_cluster3 [flags...]: nodes c1, c2, c3 of a 3-node cluster (8
# shards) in the background, waited for until each is ready.
start_cluster3() {
  local join="127.0.0.1:$((PORT + 61)),127.0.0.1:$((PORT + 62)),127.0.0.1:$((PORT + 63))"
  for i in 1 2 3; do
    start_node "c$i" $((PORT + 80 + i)) $((PORT + 70 + i)) $((PORT + 60 + i)) "$@" \
      -bootstrap-expect 3 -join "$join" -shards 8 -cluster-key-file "$work/cluster.key"
  done
  for i in 1 2 3; do wait_http "http://127.0.0.1:$((PORT + 80 + i))/api/v1/keys"; done
}

# wrk_codes in out: the codes wrk cycles through, at most a million of them
# spread evenly over in (what scripts/wrk/codes.lua would pick), as bare
# codes: each wrk thread then reads a small file before it starts, so the
# threads start together (codes.lua counts rps only while all of them run).
wrk_codes() {
  awk -v n="$(wc -l <"$1")" -v max=1000000 'BEGIN { step = int((n + max - 1) / max); if (step < 1) step = 1 }
    (NR - 1) % step == 0 { print $1 }' "$1" >"$2"
}

# once_more what CMD...: runs CMD, and once more if it fails (a cluster
# that did not form), saying so on stderr.
once_more() {
  local what=$1
  shift
  "$@" || { echo "$what failed (above); once more" >&2; "$@"; }
}

# server_ticks port: the CPU clock ticks (user and system) used so far by
# every process listening on 127.0.0.1:port (nginx's workers, gunicorn's,
# a linknode), from /proc.
server_ticks() {
  local p total=0
  for p in $(ss -Htlnp "sport = :$1" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u); do
    total=$((total + $(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13}' || echo 0)))
  done
  echo "$total"
}

median() { sort -n | awk '{a[NR]=$1} END{if (NR==0) print 0; else print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# ---------------------------------------------------------------- redirect
redirect_setup() { # $1: link count; fills $work/codes-<system>
  local n=$1
  rm -rf "$work"/n1 "$work"/c1 "$work"/c2 "$work"/c3
  n1_mode=
  n1_as true
  n1_pid=${pids[-1]}
  echo "loading $n links into linknode..." >&2
  "$work/benchload" -targets "http://127.0.0.1:$((PORT + 80))" -n "$n" -bulk "$BULK" -out "$work/codes-linknode" >&2
  # nginx's map matches strings case-insensitively: codes that differ only
  # in case (a few per million base62 codes) would conflict; keep the first.
  awk '!seen[tolower($1)]++' "$work/codes-linknode" >"$work/codes-nginx"
  cp "$work/codes-linknode" "$work/codes-linknode-off"
  cp "$work/codes-linknode" "$work/codes-gomap"
  cp "$work/codes-linknode" "$work/codes-flask"

  if [[ " $SYSTEMS " == *" follower "* ]]; then
    start_cluster3
    echo "loading $n links into the 3-node cluster..." >&2
    "$work/benchload" -targets "http://127.0.0.1:$((PORT + 81)),http://127.0.0.1:$((PORT + 82)),http://127.0.0.1:$((PORT + 83))" \
      -n "$n" -bulk "$BULK" -out "$work/codes-follower" >&2
    # The follower: the node leading the fewest shards.
    follower_port=$(for i in 1 2 3; do
      echo "$(curl -fs -H "Authorization: Bearer $LINKRAFT_KEY" "http://127.0.0.1:$((PORT + 80 + i + 500))/admin/v1/cluster" | grep -o '"leader": *"c'"$i"'"' | wc -l) $((PORT + 80 + i))"
    done | sort -n | head -1 | cut -d' ' -f2)
  fi

  if [[ " $SYSTEMS " == *" nginx "* ]]; then
    mkdir -p "$work/nginx/logs"
    # One map per million codes, chained through their defaults ($target
    # falls through to $target1, ...): nginx checks each new key of a map
    # against the keys before it in one of 10,007 lists, so a single map
    # of 10M codes takes more than 10 minutes to parse, where ten maps of
    # 1M take seconds. A code is found in the first map that has it; a
    # miss costs one hash lookup per map.
    awk -v per=1000000 '
      function open_map(i) {
        printf "map $uri $target%s {\n  hostnames off;\n", (i ? i : "")
      }
      NR % per == 1 { if (NR > 1) printf "  default $target%d;\n}\n", m; open_map(m++) }
      { printf "  /%s \"%s\";\n", $1, $2 }
      END { if (NR == 0) open_map(0); printf "  default \"\";\n}\n" }
    ' "$work/codes-nginx" >"$work/nginx/map.conf"
    cat >"$work/nginx/nginx.conf" <<EOF
worker_processes auto;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  map_hash_max_size 4194304;
  map_hash_bucket_size 128;
  include $work/nginx/map.conf;
  server {
    listen 127.0.0.1:$((PORT + 90)) reuseport;
    location / {
      if (\$target = "") { return 404; }
      return 302 \$target;
    }
  }
}
EOF
    nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" &
    pids+=($!)
  fi
  if [[ " $SYSTEMS " == *" gomap "* ]]; then
    "$work/gomap" -addr "127.0.0.1:$((PORT + 91))" -codes "$work/codes-gomap" >"$work/gomap.log" 2>&1 &
    pids+=($!)
  fi
  if [[ " $SYSTEMS " == *" flask "* ]]; then
    redis-server --port $((PORT + 93)) --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$work/redis.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 1 100); do redis-cli -p $((PORT + 93)) ping >/dev/null 2>&1 && break; sleep 0.1; done
    awk '{printf "SET link:%s %s\r\n", $1, $2}' "$work/codes-flask" | redis-cli -p $((PORT + 93)) --pipe >/dev/null
    REDIS_URL="redis://127.0.0.1:$((PORT + 93))/0" gunicorn -w 2 -b "127.0.0.1:$((PORT + 92))" \
      --chdir bench/peers flask_app:app >"$work/gunicorn.log" 2>&1 &
    pids+=($!)
  fi
  for sys in $SYSTEMS; do wrk_codes "$work/codes-$sys" "$work/wrk-$sys"; done
  local first
  first=$(head -1 "$work/codes-linknode" | cut -d' ' -f1)
  for sys in $SYSTEMS; do
    case $sys in
      nginx) wait_http "http://127.0.0.1:$((PORT + 90))/$first" || { cat "$work/nginx/logs/error.log"; return 1; } ;;
      gomap) wait_http "http://127.0.0.1:$((PORT + 91))/$first" ;;
      flask) wait_http "http://127.0.0.1:$((PORT + 92))/$first" ;;
    esac
  done
}

# n1_as true|false: node n1 (the single node, on its data dir) running
# with -analytics=$1, restarted if it runs the other way.
n1_as() {
  [ "$n1_mode" = "$1" ] && return 0
  if [ -n "$n1_mode" ]; then kill "$n1_pid" 2>/dev/null || true; wait "$n1_pid" 2>/dev/null || true; fi
  start_node n1 $((PORT + 80)) $((PORT + 70)) $((PORT + 60)) -analytics="$1"
  n1_pid=${pids[-1]}
  n1_mode=$1
  wait_http "http://127.0.0.1:$((PORT + 80))/api/v1/keys"
}

url_of() {
  case $1 in
    linknode | linknode-off) echo "http://127.0.0.1:$((PORT + 80))" ;;
    follower) echo "http://127.0.0.1:$follower_port" ;;
    nginx) echo "http://127.0.0.1:$((PORT + 90))" ;;
    gomap) echo "http://127.0.0.1:$((PORT + 91))" ;;
    flask) echo "http://127.0.0.1:$((PORT + 92))" ;;
  esac
}

redirect_bench() {
  need peers
  build
  {
    echo
    echo "## redirect — $(date -u '+%F %H:%M UTC'), commit $(git rev-parse --short HEAD)"
    echo
    echo "machine: $(machine); wrk -t$THREADS -c$CONNS -d$DURATION on the same machine; $ROUNDS rounds, systems interleaved; medians;"
    echo "linknode and follower as shipped (peer TLS, API keys, analytics and raw visits on); linknode-off: -analytics=false"
    echo
  } | report
  for n in $LINKS; do
    # Stop the previous size's systems.
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    pids=()
    redirect_setup "$n"
    : >"$work/runs"
    : >"$work/medians"
    for r in $(seq 1 "$ROUNDS"); do
      for sys in $SYSTEMS; do
        case $sys in
          linknode) n1_as true ;;
          linknode-off) n1_as false ;;
        esac
        for dist in $DIST; do
          for kind in $KINDS; do
            url=$(url_of "$sys")
            cpu0=$(server_ticks "${url##*:}")
            line=$(CODES="$work/wrk-$sys" DIST=$dist BROWSER=$([ "$kind" = browser ] && echo 1 || echo 0) \
              wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s scripts/wrk/codes.lua "$url" | grep RESULT || true)
            cpu=$(server_ticks "${url##*:}")
            # The server's CPU (every process listening on its port) per
            # request wrk sent: what a redirect costs it, whatever wrk got.
            cpu=$(echo "$line" | awk -v d=$((cpu - cpu0)) -v hz="$(getconf CLK_TCK)" \
              '{ if (match($0, /requests=[0-9]+/)) n = substr($0, RSTART + 9, RLENGTH - 9) + 0; printf "%.1f", n ? d / hz * 1e6 / n : 0 }')
            echo "round $r $dist $kind $sys: $line cpu_us_per_req=$cpu" >&2
            echo "$dist/$kind $sys $(echo "$line" | sed 's/.*rps=\([0-9.]*\) p50_ms=\([0-9.]*\) p99_ms=\([0-9.]*\) errors=\([0-9]*\).*/\1 \2 \3 \4/') $cpu" >>"$work/runs"
          done
        done
      done
    done
    {
      echo "| links | keys, requests | system | rps | p50 ms | p99 ms | errors | server CPU µs a request |"
      echo "|---|---|---|---|---|---|---|---|"
      for dist in $DIST; do
        for kind in $KINDS; do
          for sys in $SYSTEMS; do
            k="$dist/$kind"
            rps=$(awk -v d="$k" -v s="$sys" '$1==d && $2==s {print $3}' "$work/runs" | median)
            p50=$(awk -v d="$k" -v s="$sys" '$1==d && $2==s {print $4}' "$work/runs" | median)
            p99=$(awk -v d="$k" -v s="$sys" '$1==d && $2==s {print $5}' "$work/runs" | median)
            errs=$(awk -v d="$k" -v s="$sys" '$1==d && $2==s {e+=$6} END{print e+0}' "$work/runs")
            cpu=$(awk -v d="$k" -v s="$sys" '$1==d && $2==s {print $7}' "$work/runs" | median)
            echo "$k $sys $rps $p50 $p99 $cpu" >>"$work/medians"
            echo "| $n | $dist, $kind | $sys | $rps | $p50 | $p99 | $errs | $cpu |"
          done
        done
      done
      echo
      for dist in $DIST; do
        for kind in $KINDS; do
          k="$dist/$kind"
          get() { awk -v d="$k" -v s="$1" -v f="$2" '$1==d && $2==s {print $f}' "$work/medians" | tail -1; }
          ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (a=="" || b=="" || b==0) print "-"; else printf "%.2f", a/b}'; }
          echo "- $n links, $dist keys, $kind requests: **linknode as shipped / nginx: rps $(ratio "$(get linknode 3)" "$(get nginx 3)"), p99 $(ratio "$(get linknode 5)" "$(get nginx 5)")×**;" \
            "analytics off / nginx: rps $(ratio "$(get linknode-off 3)" "$(get nginx 3)"), p99 $(ratio "$(get linknode-off 5)" "$(get nginx 5)")×;" \
            "on/off $(ratio "$(get linknode 3)" "$(get linknode-off 3)"); follower/nginx $(ratio "$(get follower 3)" "$(get nginx 3)");" \
            "linknode/gomap $(ratio "$(get linknode 3)" "$(get gomap 3)"); linknode/flask $(ratio "$(get linknode 3)" "$(get flask 3)");" \
            "server CPU a request, linknode / nginx: $(ratio "$(get linknode 6)" "$(get nginx 6)")× ($(get linknode 6) / $(get nginx 6) µs; analytics off $(get linknode-off 6) µs)"
        done
      done
      echo
    } | report
  done
}

# ---------------------------------------------------------------- scale
rss_mib() { awk '/VmRSS/{printf "%.0f", $2/1024}' "/proc/$1/status"; }

scale_bench() {
  need none
  build
  {
    echo
    echo "## scale — $(date -u '+%F %H:%M UTC'), commit $(git rev-parse --short HEAD)"
    echo
    echo "machine: $(machine); one node, 8 shards, analytics off; links created through the bulk API, $BULK per request (scripts/benchload -bulk); wrk -t$THREADS -c$CONNS -d$DURATION uniform after the restart, median of $ROUNDS runs"
    echo
    echo "| links | loaded/s | disk bytes/link: state + raft log | snapshots | whole data dir | RSS loaded | ready after restart | RSS restarted | redirect rps | p50 | p99 | paced at $SCALE_RATE/s |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  } | report
  for n in $LINKS; do
    rm -rf "$work/s1"
    start_node s1 $((PORT + 80)) $((PORT + 70)) $((PORT + 60)) -analytics=false
    local pid=${pids[-1]}
    wait_http "http://127.0.0.1:$((PORT + 80))/api/v1/keys"
    echo "loading $n links..." >&2
    local l0 l1
    l0=$(date +%s.%N)
    "$work/benchload" -targets "http://127.0.0.1:$((PORT + 80))" -n "$n" -bulk "$BULK" -out "$work/codes-scale" >&2
    l1=$(date +%s.%N)
    local rss1 bytes state raftlog snaps all
    rss1=$(rss_mib "$pid")
    wrk_codes "$work/codes-scale" "$work/wrk-scale"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    state=$(du -cb "$work"/s1/shards/*/state.db | tail -1 | cut -f1)
    raftlog=$( (du -cb "$work"/s1/raft-log "$work"/s1/shards/*/raft.db 2>/dev/null || true) | tail -1 | cut -f1) # the shared log, or a raft.db per group below feature level 8
    snaps=$(du -cb "$work"/s1/shards/*/snapshots | tail -1 | cut -f1)
    all=$(du -sb "$work/s1" | cut -f1)
    bytes=$((state + raftlog))
    local t0 t1
    t0=$(date +%s.%N)
    start_node s1 $((PORT + 80)) $((PORT + 70)) $((PORT + 60)) -analytics=false
    pid=${pids[-1]}
    wait_http "http://127.0.0.1:$((PORT + 80))/api/v1/keys"
    t1=$(date +%s.%N)
    local rss2 line r
    rss2=$(rss_mib "$pid")
    : >"$work/scale-runs"
    for r in $(seq 1 "$ROUNDS"); do # the first run starts with a cold cache
      line=$(CODES="$work/wrk-scale" DIST=uniform wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency \
        -s scripts/wrk/codes.lua "http://127.0.0.1:$((PORT + 80))" | grep RESULT || true)
      echo "run $r: $line" >&2
      echo "$line" | sed 's/.*rps=\([0-9.]*\) p50_ms=\([0-9.]*\) p99_ms=\([0-9.]*\).*/\1 \2 \3/' >>"$work/scale-runs"
    done
    # The same load on every link count: paced at SCALE_RATE requests/s.
    : >"$work/scale-paced"
    for r in $(seq 1 "$ROUNDS"); do
      line=$(CODES="$work/wrk-scale" DIST=uniform RATE="$SCALE_RATE" CONNS="$CONNS" wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency \
        -s scripts/wrk/codes.lua "http://127.0.0.1:$((PORT + 80))" | grep RESULT || true)
      echo "paced run $r: $line" >&2
      echo "$line" | sed 's/.*rps=\([0-9.]*\) p50_ms=\([0-9.]*\) p99_ms=\([0-9.]*\).*/\1 \2 \3/' >>"$work/scale-paced"
    done
    paced="$(cut -d' ' -f1 "$work/scale-paced" | median | xargs printf '%.0f')/s: p50 $(cut -d' ' -f2 "$work/scale-paced" | median) ms, p99 $(cut -d' ' -f3 "$work/scale-paced" | median) ms"
    line="rps=$(cut -d' ' -f1 "$work/scale-runs" | median | xargs printf '%.0f') p50_ms=$(cut -d' ' -f2 "$work/scale-runs" | median) p99_ms=$(cut -d' ' -f3 "$work/scale-runs" | median)"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    echo "medians: $line" >&2
    echo "| $n | $(awk -v n="$n" -v a="$l0" -v b="$l1" 'BEGIN{printf "%.0f", n/(b-a)}') | $((state / n)) + $((raftlog / n)) = $((bytes / n)) | $((snaps / n)) | $((all / n)) | $rss1 MiB | $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f s", b-a}') | $rss2 MiB |" \
      "$(echo "$line" | sed 's/.*rps=\([0-9]*\) p50_ms=\([0-9.]*\) p99_ms=\([0-9.]*\).*/\1 | \2 ms | \3 ms |/') $paced |" | report
  done
}

# ---------------------------------------------------------------- list
list_bench() {
  need none
  build
  go build -o "$work/benchlist" ./scripts/benchlist
  {
    echo
    echo "## list — $(date -u '+%F %H:%M UTC'), commit $(git rev-parse --short HEAD)"
    echo
    echo "machine: $(machine); analytics off; links created through the bulk API, $BULK per request; scripts/benchlist: 4 clients, 400 requests a kind, 100 links a page"
    echo
    echo "| links, nodes | page | requests | p50 | p99 | slowest | errors |"
    echo "|---|---|---|---|---|---|---|"
  } | report
  for n in $LINKS; do
    if [[ " $LIST_NODES " == *" 1 "* ]]; then
    rm -rf "$work/s1"
    start_node s1 $((PORT + 80)) $((PORT + 70)) $((PORT + 60)) -analytics=false
    local pid=${pids[-1]}
    wait_http "http://127.0.0.1:$((PORT + 80))/api/v1/keys"
    echo "loading $n links into one node..." >&2
    "$work/benchload" -targets "http://127.0.0.1:$((PORT + 80))" -n "$n" -bulk "$BULK" -out "$work/codes-list" >&2
    "$work/benchlist" -targets "http://127.0.0.1:$((PORT + 80))" -label "$n, 1 node" | report
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    rm -rf "$work/s1"
    fi
    [[ " $LIST_NODES " == *" 3 "* ]] || continue

    rm -rf "$work"/c1 "$work"/c2 "$work"/c3
    local targets="http://127.0.0.1:$((PORT + 81)),http://127.0.0.1:$((PORT + 82)),http://127.0.0.1:$((PORT + 83))"
    local label="$n, 3 nodes"
    if [[ -n "$LIST_SEED" ]]; then
      # Loaded into c1 alone (its pace, not three replicas' on two
      # cores), then c2 and c3 join and get every shard by snapshot.
      start_node c1 $((PORT + 81)) $((PORT + 71)) $((PORT + 61)) -analytics=false -shards 8 -cluster-key-file "$work/cluster.key"
      wait_http "http://127.0.0.1:$((PORT + 81))/api/v1/keys"
      echo "loading $n links into c1 alone..." >&2
      "$work/benchload" -targets "http://127.0.0.1:$((PORT + 81))" -n "$n" -bulk "$BULK" -out "$work/codes-list" >&2
      for i in 2 3; do
        start_node "c$i" $((PORT + 80 + i)) $((PORT + 70 + i)) $((PORT + 60 + i)) -analytics=false \
          -join "127.0.0.1:$((PORT + 61))" -shards 8 -cluster-key-file "$work/cluster.key"
      done
      echo "c2 and c3 joined; waiting for 3 replicas of every shard, caught up..." >&2
      local t0=$SECONDS
      until curl -fs -H "Authorization: Bearer $LINKRAFT_KEY" "http://127.0.0.1:$((PORT + 581))/admin/v1/cluster" |
        python3 -c 'import json,sys; s=json.load(sys.stdin)["shards"]; sys.exit(0 if len(s)==8 and all(len(x["replicas"])==3 for x in s) else 1)' &&
        curl -fs -o /dev/null "http://127.0.0.1:$((PORT + 82))/readyz" && curl -fs -o /dev/null "http://127.0.0.1:$((PORT + 83))/readyz"; do
        sleep 2
        ((SECONDS - t0 < 3600)) || { echo "no full replication after an hour" >&2; break; }
      done
      echo "replicated after $((SECONDS - t0)) s; waiting for the leaders to spread (each node leading 2 or more of the 8 shards)..." >&2
      until curl -fs -H "Authorization: Bearer $LINKRAFT_KEY" "http://127.0.0.1:$((PORT + 581))/admin/v1/cluster" |
        python3 -c 'import json,sys,collections; c=collections.Counter(x["leader"] for x in json.load(sys.stdin)["shards"]); sys.exit(0 if len(c)==3 and min(c.values())>=2 else 1)'; do
        sleep 2
        ((SECONDS - t0 < 3600)) || { echo "leaders not spread after an hour" >&2; break; }
      done
      echo "ready after $((SECONDS - t0)) s" >&2
      label="$n, 3 nodes (loaded into one, then joined)"
    else
      start_cluster3 -analytics=false
      echo "loading $n links into the 3-node cluster..." >&2
      "$work/benchload" -targets "$targets" -n "$n" -bulk "$BULK" -clients "$LOAD_CLIENTS" -out "$work/codes-list" >&2
    fi
    local cpids=("${pids[@]: -3}")
    if [[ -n "$LIST_SEED" ]]; then
      # The joined nodes' files were just written by snapshot installs
      # and are read cold: a first pass, reported as such, then the
      # measurement.
      "$work/benchlist" -targets "$targets" -label "$label, first pass after the join" | report
    fi
    "$work/benchlist" -targets "$targets" -label "$label" | report
    local c
    for c in $LIST_MORE_CLIENTS; do # the same pages from fewer (or more) clients: how much of the tail is contention
      "$work/benchlist" -targets "$targets" -clients "$c" -label "$label, $c clients" | report
    done
    for p in "${cpids[@]}"; do kill "$p"; done
    for p in "${cpids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"/c1 "$work"/c2 "$work"/c3
  done
}

# ---------------------------------------------------------------- guard
guard_bench() {
  local base=${1:?usage: bench.sh guard BASE [HEAD]} head=${2:-}
  local links=${GUARD_LINKS:-10000}
  need none
  local rev src
  for rev in base head; do
    src=.
    if [ "$rev" = base ] || [ -n "$head" ]; then
      src="$work/src-$rev"
      git worktree add --detach "$src" "$([ "$rev" = base ] && echo "$base" || echo "$head")" >/dev/null 2>&1
      guard_trees+=("$src")
    fi
    (cd "$src" && go build -o "$work/linknode-$rev" ./cmd/linknode)
  done
  go build -o "$work/benchcluster" ./scripts/benchcluster
  go build -o "$work/benchload" ./scripts/benchload
  LINKRAFT_KEY="lrk_$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
  export LINKRAFT_KEY
  local base_id head_id
  base_id=$(git rev-parse --short "$base")
  head_id=$([ -n "$head" ] && git rev-parse --short "$head" || echo "$(git rev-parse --short HEAD)+tree")
  local http=$((PORT + 80))
  # guard_node REV: REV's node as shipped on its own data dir (its links
  # stay there from round to round).
  guard_node() {
    LINKNODE_ADMIN_KEY=$LINKRAFT_KEY "$work/linknode-$1" -node-id g1 -data-dir "$work/g-$1" -http-addr "127.0.0.1:$http" \
      -raft-addr "127.0.0.1:$((PORT + 70))" -gossip-addr "127.0.0.1:$((PORT + 60))" -admin-addr "127.0.0.1:$((PORT + 580))" \
      -public-url "http://127.0.0.1:$http" -log-level warn >>"$work/g-$1.log" 2>&1 &
    pids+=($!)
    wait_http "http://127.0.0.1:$http/api/v1/keys"
  }
  guard_stop() { local p=${pids[-1]}; kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; unset 'pids[-1]'; }
  for rev in base head; do
    guard_node "$rev"
    "$work/benchload" -targets "http://127.0.0.1:$http" -n "$links" -bulk "$BULK" -out "$work/codes-$rev" >/dev/null 2>&1
    guard_stop
  done
  echo "== guard: base $base_id, head $head_id; $(machine)" | report
  echo "== $ROUNDS rounds of $DURATION, order alternating; creates: 64 clients, closed loop; redirects: one node as shipped, $links links, browser-like, wrk -t$THREADS -c$CONNS" | report
  : >"$work/guard-runs"
  local r order line
  for r in $(seq 1 "$ROUNDS"); do
    order="base head"
    [ $((r % 2)) -eq 0 ] && order="head base"
    for rev in $order; do
      for n in 1 3; do
        line=$(once_more "round $r $rev: the $n-node run" \
          "$work/benchcluster" -bin "$work/linknode-$rev" -nodes "$n" -clients-list 64 -trials 0 -duration "$DURATION" -table)
        echo "round $r $rev creates, $n node(s): $line" >&2
        echo "$line" | awk -F'|' -v r="$rev" -v m="creates-$n" '{gsub(/ ms| /, "", $6); print m, r, $4+0, $6+0}' >>"$work/guard-runs"
      done
      guard_node "$rev"
      line=$(CODES="$work/codes-$rev" BROWSER=1 wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s scripts/wrk/codes.lua "http://127.0.0.1:$http" | grep RESULT || true)
      guard_stop
      echo "round $r $rev redirects: $line" >&2
      echo "$line" | sed 's/.*rps=\([0-9.]*\) p50_ms=\([0-9.]*\) p99_ms=\([0-9.]*\).*/redirects \1 \3/' |
        awk -v r="$rev" '{print $1, r, $2, $3}' >>"$work/guard-runs"
    done
  done
  # verdict FIGURE FIELD BETTER(up|down): one table row.
  verdict() {
    local b h
    b=$(awk -v m="$1" -v f="$2" '$1==m && $2=="base" {print $f}' "$work/guard-runs" | tr '\n' ' ')
    h=$(awk -v m="$1" -v f="$2" '$1==m && $2=="head" {print $f}' "$work/guard-runs" | tr '\n' ' ')
    awk -v name="$1 $([ "$2" = 3 ] && echo "/s" || echo "p99 ms")" -v b="$b" -v h="$h" -v better="$3" '
      function med(a, n,   t) { t = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2; return t }
      function sorted(s, a,   n, i, j, t) { n = split(s, a, " "); for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }; return n }
      BEGIN {
        nb = sorted(b, B); nh = sorted(h, H)
        mb = med(B, nb); mh = med(H, nh)
        # The range of each: from five runs on, without the lowest and the
        # highest (one disturbed run on a shared machine is not a change).
        t = (nb >= 5 && nh >= 5) ? 1 : 0
        blo = B[1 + t]; bhi = B[nb - t]; hlo = H[1 + t]; hhi = H[nh - t]
        nz = 0; if (mb > 0) nz = (bhi - blo) / mb; if (mh > 0 && (hhi - hlo) / mh > nz) nz = (hhi - hlo) / mh
        ratio = (mb > 0) ? mh / mb : 0
        apart = (hlo > bhi || blo > hhi)
        v = "within noise"
        if (apart && (ratio - 1 > nz || 1 - ratio > nz)) {
          up = (ratio > 1); v = ((up && better == "up") || (!up && better == "down")) ? "**better**" : "**WORSE**"
        }
        printf "| %s | %g (%g–%g) | %g (%g–%g) | %.3f | ±%.0f%% | %s |\n", name, mb, blo, bhi, mh, hlo, hhi, ratio, nz * 100, v
      }'
  }
  {
    echo
    echo "| figure | base $base_id | head $head_id | head/base | noise | verdict |"
    echo "|---|---|---|---|---|---|"
    for m in creates-1 creates-3 redirects; do
      verdict "$m" 3 up
      verdict "$m" 4 down
    done
    echo
  } | report
}

# ---------------------------------------------------------------- profile
profile_bench() {
  local out=${PROFILE_DIR:-docs/profiles} id rev=${1:-}
  id=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench' ':!docs' || echo "+tree")
  mkdir -p "$out"
  command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
  build
  if [ -n "$rev" ]; then # linknode at REV instead of the working tree's
    id=$(git rev-parse --short "$rev")
    git worktree add --detach "$work/src-profile" "$rev" >/dev/null 2>&1
    guard_trees+=("$work/src-profile")
    (cd "$work/src-profile" && go build -o "$work/linknode" ./cmd/linknode)
  fi
  go build -o "$work/benchcluster" ./scripts/benchcluster
  local secs=15
  # Redirects: one node as shipped.
  rm -rf "$work/p1"
  start_node p1 $((PORT + 80)) $((PORT + 70)) $((PORT + 60)) -pprof
  local pid=${pids[-1]}
  wait_http "http://127.0.0.1:$((PORT + 80))/api/v1/keys"
  "$work/benchload" -targets "http://127.0.0.1:$((PORT + 80))" -n 10000 -bulk "$BULK" -out "$work/codes-p" >/dev/null 2>&1
  CODES="$work/codes-p" BROWSER=1 wrk -t2 -c64 -d$((secs + 5))s --latency -s scripts/wrk/codes.lua "http://127.0.0.1:$((PORT + 80))" >"$work/wrk-p" &
  local wrk_pid=$!
  sleep 2
  curl -fs -o "$work/redirect.pprof" "http://127.0.0.1:$((PORT + 580))/debug/pprof/profile?seconds=$secs"
  wait "$wrk_pid"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "redirects while profiled: $(grep RESULT "$work/wrk-p")" >&2
  # Creates: one node, then n1 of 3.
  "$work/benchcluster" -bin "$work/linknode" -nodes 1 -clients-list 64 -trials 0 -duration $((secs + 3))s -table -profile-dir "$work/c1" >&2
  cp "$work/c1/n1.pprof" "$work/create-1node.pprof"
  "$work/benchcluster" -bin "$work/linknode" -nodes 3 -clients-list 64 -trials 0 -duration $((secs + 3))s -table -profile-dir "$work/c3" >&2
  cp "$work/c3/n1.pprof" "$work/create-3nodes.pprof"
  local what port=$((PORT + 95))
  for what in redirect create-1node create-3nodes; do
    go tool pprof -top -nodecount=40 "$work/linknode" "$work/$what.pprof" 2>/dev/null >"$out/$what-$id.txt"
    go tool pprof -top -cum -nodecount=60 "$work/linknode" "$work/$what.pprof" 2>/dev/null >"$out/$what-$id.cum.txt"
    go tool pprof -http "127.0.0.1:$port" -no_browser "$work/linknode" "$work/$what.pprof" >/dev/null 2>&1 &
    local ppid=$!
    pids+=("$ppid")
    wait_http "http://127.0.0.1:$port/ui/flamegraph"
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1600,1100 --virtual-time-budget=5000 \
      --screenshot="$out/$what-$id.png" "http://127.0.0.1:$port/ui/flamegraph" >/dev/null 2>&1
    kill "$ppid"; wait "$ppid" 2>/dev/null || true
    echo "$out/$what-$id.{txt,cum.txt,png}" >&2
  done
}

# ---------------------------------------------------------------- create, failover
create_bench() {
  need vegeta
  command -v etcd >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null; }
  go build -o "$work/benchcluster" ./scripts/benchcluster
  go build -o "$work/linknode" ./cmd/linknode
  {
    echo
    echo "## create — $(date -u '+%F %H:%M UTC'), commit $(git rev-parse --short HEAD)"
    echo
    echo "machine: $(machine); $(etcd --version | head -1)"
    echo
    echo "64 clients, closed loop (each sends its next create when the last is answered), $ROUNDS rounds of $DURATION, systems"
    echo "interleaved, medians; linknode as shipped (peer TLS, API key on every create, analytics on, 8 shards); etcd"
    echo "with its defaults (fsync on, plain HTTP between members), puts of the same URLs to fresh keys through its JSON"
    echo "gateway, from the same Go client (scripts/benchcluster -etcd)"
    echo
  } | report
  : >"$work/create-runs"
  local r n sys line
  for r in $(seq 1 "$ROUNDS"); do
    for n in 1 3; do
      for sys in linknode etcd; do
        if [ "$sys" = etcd ]; then
          line=$(once_more "round $r: the $n-node etcd run" \
            "$work/benchcluster" -etcd "$(command -v etcd)" -nodes "$n" -clients-list 64 -duration "$DURATION" -table)
        else
          line=$(once_more "round $r: the $n-node linknode run" \
            "$work/benchcluster" -bin "$work/linknode" -nodes "$n" -clients-list 64 -trials 0 -duration "$DURATION" -table)
        fi
        echo "round $r, $n $sys: $line" >&2
        # | nodes | clients | creates/s | p50 | p99 | failed | servers' CPU a create |
        echo "$line" | awk -F'|' -v s="$sys" '{gsub(/ ms| /, "", $4); gsub(/ ms| /, "", $5); gsub(/ ms| /, "", $6); print $2+0, s, $4, $5, $6, $7+0, $8+0}' >>"$work/create-runs"
      done
    done
  done
  {
    echo "| nodes | system | creates/s (median; runs) | p50 ms | p99 ms | failed | servers' CPU a create, µs (all nodes) |"
    echo "|---|---|---|---|---|---|---|"
    for n in 1 3; do
      for sys in linknode etcd; do
        pick() { awk -v n="$n" -v s="$sys" -v f="$1" '$1==n && $2==s {print $f}' "$work/create-runs"; }
        echo "| $n | $sys | $(pick 3 | median) ($(pick 3 | tr '\n' ' ' | sed 's/ $//')) | $(pick 4 | median) | $(pick 5 | median) | $(pick 6 | awk '{t+=$1} END{print t+0}') | $(pick 7 | median) |"
      done
    done
    echo
    for n in 1 3; do
      l=$(awk -v n="$n" '$1==n && $2=="linknode" {print $3}' "$work/create-runs" | median)
      e=$(awk -v n="$n" '$1==n && $2=="etcd" {print $3}' "$work/create-runs" | median)
      lc=$(awk -v n="$n" '$1==n && $2=="linknode" {print $7}' "$work/create-runs" | median)
      ec=$(awk -v n="$n" '$1==n && $2=="etcd" {print $7}' "$work/create-runs" | median)
      echo "- $n node(s): linknode/etcd creates $(awk -v a="$l" -v b="$e" 'BEGIN{printf "%.2f", a/b}')×;" \
        "CPU a create $(awk -v a="$lc" -v b="$ec" 'BEGIN{if (b > 0) printf "%.2f", a/b; else print "-"}')× etcd's ($lc / $ec µs)"
    done
    echo
  } | report
  [ -n "${CREATE_DETAIL:-}" ] || return 0
  {
    echo "linknode alone at 1, 16 and 64 clients, then open loop: vegeta offers a fixed rate whatever the answers take"
    echo "(latency of every request, failed ones included)"
    echo
    echo "| nodes | clients | creates/s | p50 | p99 | failed |"
    echo "|---|---|---|---|---|---|"
  } | report
  for nodes in 1 3; do
    "$work/benchcluster" -bin "$work/linknode" -nodes "$nodes" -clients-list "1,16,64" -open-rates "$OPEN_RATES" -vegeta "$VEGETA" \
      -duration "$DURATION" -trials 0 -table | report
  done
}

failover_bench() {
  {
    echo
    echo "## failover — $(date -u '+%F %H:%M UTC'), commit $(git rev-parse --short HEAD)"
    echo
    echo "machine: $(machine)"
    echo
  } | report
  go run ./scripts/benchcluster -nodes 3 -clients-list "" -trials 5 | report
}

analytics_bench() {
  {
    echo
    echo "## analytics on vs off — $(date -u '+%F %H:%M UTC'), commit $(git rev-parse --short HEAD)"
    echo
  } | report
  ROUNDS=${ROUNDS} DURATION=${DURATION} bash scripts/bench-analytics.sh | report
}

need none
case $WHAT in
  redirect) redirect_bench ;;
  create) create_bench ;;
  scale) scale_bench ;;
  list) list_bench ;;
  failover) failover_bench ;;
  analytics) analytics_bench ;;
  guard) shift; guard_bench "$@" ;;
  profile) shift; profile_bench "$@" ;;
  all) redirect_bench; create_bench; scale_bench; failover_bench; analytics_bench ;;
  *) echo "usage: $0 [redirect|create|scale|list|failover|analytics|profile|all] | $0 guard BASE [HEAD]" >&2; exit 2 ;;
esac
echo "results appended to $RESULTS" >&2
