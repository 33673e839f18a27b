#!/usr/bin/env bash
# Superseded by `bash scripts/bench.sh guard BASE [HEAD]` (which adds 3-node
# creates, the p99s, the noise and a verdict); kept so that the commands in
# BENCHMARKS.md's older sections still run. LINKS is passed on as GUARD_LINKS.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 BASE [HEAD]  (now: bash scripts/bench.sh guard BASE [HEAD])" >&2; exit 2; }
GUARD_LINKS=${LINKS:-10000} exec bash scripts/bench.sh guard "$@"
