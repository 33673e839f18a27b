#!/usr/bin/env bash
# The short chaos run CI makes (needs root): 5 nodes in network namespaces,
# 60 s of register + set + unique-ids + ryw + counter under partitions, kills,
# pauses, a hostile stranger, an anonymous flood and the operator's actions (drains, rolling
# restarts, a node replaced by one with an empty disk, faults aimed at the
# meta leader, a partition then a kill, a node cut off until it must install
# a snapshot, power cuts and crash points; a fault every 5 s) with the
# snapshot profile (snapshots every 32 entries, 16 kept: installs happen;
# 64 KiB Raft log segments: the shared log begins segments, deletes old ones
# and carries idle groups' entries forward all through the run),
# the nodes started in a random order with -bootstrap-expect 3 (a formation
# run), linknode built with the race detector and the crash points (-tags
# jepsencrash, added by the harness). The data dirs are on lazyfs (power in
# the mix): a power cut, or a node crashed at a point, loses every write not
# fsynced. Every run starts with a power cut to all nodes and two crash
# points (of log-stored, state-pending, state-committed, snapshot-persist,
# in turn from a point the seed picks); the other faults are drawn at
# random. Exits non-zero unless every checker says valid. Results:
# store/ci/latest/.
set -euo pipefail
cd "$(dirname "$0")/.."
go run ./jepsen/cmd/jepsen test -name ci -store store \
  -nodes 5 -bootstrap-expect 3 -start-jitter 2s -time-limit "${JEPSEN_TIME:-60s}" \
  -nemesis partition,kill,pause,hostile,flood,membership,restart,meta,composed,snapshot,power,crash \
  -nemesis-first power-loss,crash-point,crash-point -nemesis-interval 5s \
  -node-args "-raft-snapshot-threshold 32 -raft-trailing-logs 16 -raft-snapshot-interval 100ms -raft-log-segment-bytes 65536" \
  -workload register,set,unique-ids,ryw,counter -race "$@"
