#!/usr/bin/env bash
# Release archives: bash scripts/release.sh [--snapshot]
# Runs goreleaser v2.15.1 (fetched by exact version; newer ones need a newer
# Go) on .goreleaser.yaml: dist/ gets linknode for linux amd64 and arm64 as
# tar.gz archives with LICENSE, NOTICE, README.md and the systemd unit, and
# dist/checksums.txt (SHA-256). --snapshot builds from an untagged tree.
set -euo pipefail
cd "$(dirname "$0")/.."
go run github.com/goreleaser/goreleaser/v2@v2.15.1 release --clean "$@"
