#!/usr/bin/env bash
# Vendors the web UI's three front-end libraries into
# httpapi/webui/static/vendor, from the npm registry that npm is configured
# with, each pinned by version and by the sha256 of its package tarball.
# The files are committed: installing or building linknode never runs this,
# needs npm, or reaches a network. Run it only to move a pin (change the
# version and the checksum below together, read the library's changelog,
# and run the web UI tests).
#
#   bash scripts/vendor-ui.sh          fetch, verify, and rewrite the files
#   bash scripts/vendor-ui.sh -check   verify the committed files only
set -euo pipefail
cd "$(dirname "$0")/.."
out=httpapi/webui/static/vendor

# package@version  tarball sha256  file in the package -> name in $out ...
pins=(
  "htmx.org@2.0.11 165a2655073e9e6e55e307a7c74e8ebcdb76afb7701f9c16cfd106a13add408e package/dist/htmx.min.js=htmx.min.js package/LICENSE=htmx.LICENSE"
  "@picocss/pico@2.1.1 4affbb56f49df6d5325610b06762156f1dcdbc6ef57cea5c136d7e8a00a8cd24 package/css/pico.min.css=pico.min.css package/LICENSE.md=pico.LICENSE"
  "uplot@1.6.32 4b8a8191e425658e3ea8c8c1314b0fc679c861ee3a1af2b20c7b16ba50b5133d package/dist/uPlot.iife.min.js=uPlot.iife.min.js package/dist/uPlot.min.css=uPlot.min.css package/LICENSE=uPlot.LICENSE"
)

if [ "${1:-}" = -check ]; then
  (cd "$out" && sha256sum --quiet -c SHA256SUMS)
  echo "vendored files match $out/SHA256SUMS"
  exit 0
fi

command -v npm >/dev/null || { echo "vendor-ui: needs npm (apt-get install npm)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sums=()
for pin in "${pins[@]}"; do
  read -r spec want files <<<"$pin"
  mkdir -p "$tmp/$spec"
  tgz=$(cd "$tmp/$spec" && npm pack --silent "$spec")
  got=$(sha256sum "$tmp/$spec/$tgz" | cut -d' ' -f1)
  if [ "$got" != "$want" ]; then
    echo "vendor-ui: $spec: tarball sha256 $got, pinned $want: refusing it" >&2
    exit 1
  fi
  tar -xzf "$tmp/$spec/$tgz" -C "$tmp/$spec"
  for f in $files; do
    cp "$tmp/$spec/${f%%=*}" "$out/${f#*=}"
    sums+=("${f#*=}")
  done
  echo "vendor-ui: $spec (tarball sha256 $want)"
done
(cd "$out" && sha256sum "${sums[@]}" >SHA256SUMS)
echo "vendor-ui: wrote $out and its SHA256SUMS"
