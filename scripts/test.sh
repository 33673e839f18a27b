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
for tag in hashicorpmetrics jepsenbugs jepsencrash; do
  pkgs=$(tagged "$tag")
  if [ -z "$pkgs" ]; then pkgs=./...; fi # not a git checkout: vet everything
  go vet -tags "$tag" $pkgs
done

step "go test -race ./... (the chaos harness's bug cases apart)"
# TestCheckersCatchBugs (a dozen 3-node chaos runs against deliberately
# broken builds) runs in the next phase, beside the fuzz targets: here it
# held one of go test's two package slots for minutes while it mostly
# waited on its clusters.
go test -race -count=1 -timeout 15m -skip '^TestCheckersCatchBugs$' ./...
# The deliberate faults of the chaos harness's checker tests (internal/bugs)
# exist only in -tags jepsenbugs builds; their switchboard is tested there.
step "linkraft's patches to the vendored raft (a module of its own: third_party/hashicorp-raft/LINKRAFT.md)"
(cd third_party/hashicorp-raft && go test -race -count=1 -run '^TestLinkraft' .)
step "the deliberate faults' switchboard (-tags jepsenbugs) and the crash points (-tags jepsencrash)"
LINKRAFT_JEPSEN_BUGS=lose-last-apply-on-restart go test -race -count=1 -tags jepsenbugs -run 'OnOnceEvery|UndoLastWrites' ./internal/bugs ./fsm
# So do the crash points (-tags jepsencrash; internal/crashpoint).
go test -race -count=1 -tags jepsencrash ./internal/crashpoint

# The chaos harness's bug cases (root: namespaces, nftables, FUSE) run
# beside the fuzz targets, which have no deadlines to miss. First the
# power-loss case (log-nosync), in a test process of its own without the
# race detector, beside one fuzz worker: it serves every node's data dir
# through FUSE (jepsen/lazyfs) from that process, and starved of CPU its
# cluster did not form (beside two fuzz workers and the other cases, in a
# CI run; beside the other packages' tests it starved the cluster tests).
# Then the dozen others, four at a time (a race-built harness).
bug_pid=
bug_dir=$(mktemp -d)
# A failure elsewhere stops the cases' go commands too (by PID).
trap 'if [ -n "$bug_pid" ]; then pkill -P "$bug_pid" 2>/dev/null || true; kill "$bug_pid" 2>/dev/null || true; fi; rm -rf "$bug_dir"' EXIT
if [ "$(id -u)" -eq 0 ]; then
  step "the chaos harness's bug cases, beside the fuzz targets"
  (
    rc=0
    LINKRAFT_JEPSEN_ALONE=1 go test -count=1 -timeout 10m -run '^TestCheckersCatchBugs$' ./jepsen >"$bug_dir/alone.log" 2>&1 || rc=1
    touch "$bug_dir/alone.done"
    go test -race -count=1 -timeout 15m -run '^TestCheckersCatchBugs$' ./jepsen >"$bug_dir/cases.log" 2>&1 || rc=1
    exit "$rc"
  ) &
  bug_pid=$!
else
  echo "NOT RUN: the chaos harness's bug cases need root (network namespaces, nftables, FUSE); CI runs them"
  touch "$bug_dir/alone.done"
fi

# Fuzz targets, each for $FUZZTIME executions (one target per invocation is
# all go test allows): one worker while the power-loss case runs, then two.
step "fuzz targets, $FUZZTIME each"
fuzz() {
  local workers=1
  if [ -e "$bug_dir/alone.done" ]; then workers=2; fi
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

if [ -n "$bug_pid" ]; then
  step "waiting for the chaos harness's bug cases"
  rc=0
  wait "$bug_pid" || rc=$?
  bug_pid=
  cat "$bug_dir/alone.log" "$bug_dir/cases.log" 2>/dev/null || true
  if [ "$rc" -ne 0 ]; then
    echo "the chaos harness's bug cases failed (above)"; exit 1
  fi
fi

# The short chaos run: a real 5-node cluster in network namespaces under
# partitions, kills and pauses (root only: namespaces and nftables).
if [ "$(id -u)" -eq 0 ]; then
  step "the short chaos run"
  bash scripts/jepsen-ci.sh
else
  echo "NOT RUN: the chaos run (scripts/jepsen-ci.sh) needs root; CI runs it"
fi
step "the container image"
bash scripts/image.sh
step "all tests passed"
