#!/usr/bin/env bash
# The project's test command: formatting, vet, every test with the race
# detector, then each fuzz target briefly. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# report its own -fuzztime deadline as a failure ("context deadline
# exceeded", no crasher; golang/go#75804, fixed in Go 1.27), as CI saw here.
FUZZTIME=${FUZZTIME:-100000x}

# Each step says when it starts, in seconds since the script did.
start=$SECONDS
step() { echo "==> [$((SECONDS - start)) s] $*"; }

step "gofmt, go mod tidy, go vet"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
# go.mod and go.sum say exactly what the code needs.
go mod tidy -diff
go vet ./...
# The build tags change only the packages holding files under them: those
# are vetted again with the tag (the rest would be vetted twice alike).
tagged() { git grep -l "go:build.*$1" -- '*.go' 2>/dev/null | xargs -rn1 dirname | sort -u | sed 's|^|./|'; }
for tag in hashicorpmetrics jepsenbugs; do
  pkgs=$(tagged "$tag")
  if [ -z "$pkgs" ]; then pkgs=./...; fi # not a git checkout: vet everything
  go vet -tags "$tag" $pkgs
done

step "go test -race ./..."
# The jepsen package first: its chaos cases are the longest run, so it
# starts while the other packages build and test (two at a time).
go test -race -count=1 -timeout 15m ./jepsen $(go list ./... | grep -vx 'github.com/linkraft/linkraft/jepsen')
# The deliberate faults of the chaos harness's checker tests (internal/bugs)
# exist only in -tags jepsenbugs builds; their switchboard is tested there.
step "the deliberate faults' switchboard (-tags jepsenbugs)"
LINKRAFT_JEPSEN_BUGS=lose-last-apply-on-restart go test -race -count=1 -tags jepsenbugs -run 'OnOnceEvery|UndoLastWrites' ./internal/bugs ./fsm

# The power-loss bug case (log-nosync) runs beside the fuzz targets, not
# beside the other packages' tests: it serves every node's data dir through
# FUSE (jepsen/lazyfs) from its test process, a load that starved the
# cluster tests into leaderless minutes when they ran beside it. The fuzz
# targets have no deadlines to miss; the case has the core they leave.
alone_pid=
# A failure elsewhere stops the case's go command too (by its PID), so the
# script does not leave it running.
trap 'if [ -n "$alone_pid" ]; then kill "$alone_pid" 2>/dev/null || true; fi' EXIT
if [ "$(id -u)" -eq 0 ]; then
  step "the power-loss bug case (log-nosync), beside the fuzz targets"
  alone_log=$(mktemp)
  LINKRAFT_JEPSEN_ALONE=1 go test -count=1 -run TestCheckersCatchBugs ./jepsen >"$alone_log" 2>&1 &
  alone_pid=$!
fi

# Fuzz targets, each for $FUZZTIME executions (one target per invocation is
# all go test allows): one worker while the bug case runs, then two.
step "fuzz targets, $FUZZTIME each"
fuzz() {
  local workers=2
  if [ -n "$alone_pid" ] && kill -0 "$alone_pid" 2>/dev/null; then workers=1; fi
  go test -run '^$' -fuzz "^$2\$" -fuzztime "$FUZZTIME" -parallel "$workers" "$1"
}
fuzz ./idrange FuzzBase62RoundTrip
fuzz ./idrange FuzzBase62Decode
fuzz ./idrange FuzzPermutation
fuzz ./link FuzzNormalizeURL
fuzz ./link FuzzValidateAlias
fuzz ./link FuzzForwardQuery
fuzz ./command FuzzDecode
fuzz ./httpapi FuzzFastPathMatchesNetHTTP
fuzz ./httpapi/importer FuzzImport
fuzz ./internal/password FuzzCheck
fuzz ./internal/backup FuzzRead

if [ -n "$alone_pid" ]; then
  step "waiting for the power-loss bug case"
  rc=0
  wait "$alone_pid" || rc=$?
  cat "$alone_log"
  rm -f "$alone_log"
  if [ "$rc" -ne 0 ]; then
    echo "the power-loss bug case failed"; exit "$rc"
  fi
fi

# The short chaos run: a real 5-node cluster in network namespaces under
# partitions, kills and pauses (root only: namespaces and nftables).
if [ "$(id -u)" -eq 0 ]; then
  step "the short chaos run"
  bash scripts/jepsen-ci.sh
else
  echo "NOT RUN: the chaos runs (the power-loss bug case, scripts/jepsen-ci.sh) need root; CI runs them"
fi
step "the container image"
bash scripts/image.sh
step "all tests passed"
