#!/usr/bin/env bash
# The chaos soak (needs root): every nemesis group against every workload
# for CELL_TIME each, then all faults together for ALL_TIME, and a Markdown
# table of the runs (op counts, faults, verdicts) for JEPSEN.md.
#   CELL_TIME=2m ALL_TIME=10m EXTRA="-race" bash scripts/jepsen-soak.sh
set -uo pipefail
cd "$(dirname "$0")/.."
CELL_TIME=${CELL_TIME:-2m}
ALL_TIME=${ALL_TIME:-10m}
STORE=${STORE:-store/soak}
EXTRA=${EXTRA:-}
mkdir -p bin
go build -o bin/jepsen ./jepsen/cmd/jepsen || exit 255

rc=0
dirs=()
run() {
  local name=$1; shift
  # shellcheck disable=SC2086
  bin/jepsen test -name "$name" -store "$STORE" "$@" $EXTRA
  local c=$?
  [ -e "$STORE/$name/latest" ] && dirs+=("$(readlink -f "$STORE/$name/latest")")
  if [ "$c" -ne 0 ]; then echo "== $name exited $c"; rc=1; fi
}
for nem in partition kill pause loss hostile flood disk membership restart meta composed power; do
  run "soak-$nem" -nemesis "$nem" -time-limit "$CELL_TIME" -nemesis-interval 5s
done
# snapshot-install needs snapshots taken often and few entries kept behind
# them, so that a node cut off for 5 s can only catch up from a snapshot
# (and small Raft log segments, so that the shared log rotates, deletes and
# carries entries forward under the faults);
# the mix of every fault runs with that profile too, so that it holds one.
# Every run takes a backup halfway and restores it after (the backup
# checker).
snap="-raft-snapshot-threshold 32 -raft-trailing-logs 16 -raft-snapshot-interval 100ms -raft-log-segment-bytes 65536"
run soak-snapshot -nemesis snapshot -time-limit "$CELL_TIME" -nemesis-interval 5s -node-args "$snap"
# The crash points (a jepsencrash build): with the snapshot profile, so
# that snapshots are taken and sent, and on lazyfs (power in the mix), so
# that a node crashed at a point loses what it had not synced.
run soak-crash -nemesis crash,power -time-limit "$CELL_TIME" -nemesis-interval 5s -node-args "$snap"
run soak-all -nemesis all,crash -time-limit "$ALL_TIME" -nemesis-interval 5s -node-args "$snap"

echo
bin/jepsen table "${dirs[@]}"
exit $rc
