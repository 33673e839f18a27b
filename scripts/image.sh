#!/usr/bin/env bash
# The container image: bash scripts/image.sh [TAG] builds the Dockerfile with
# docker or podman, whichever has a working engine here, and says so when
# neither has (a docker client without a daemon counts as none). The
# Dockerfile's stages pull golang:1.26-bookworm; an engine that cannot reach
# a registry fails here, and says why.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-linkraft:local}
for tool in docker podman; do
  if command -v "$tool" >/dev/null 2>&1 && "$tool" info >/dev/null 2>&1; then
    echo "building $tag with $tool"
    exec "$tool" build -t "$tag" --build-arg VERSION="$(git describe --tags --always 2>/dev/null || echo dev)" .
  fi
done
echo "NOT BUILT: the container image (no docker or podman engine here; the Dockerfile is built where one runs)"
