# Sourced by the one-node benchmark script bench-analytics.sh:
# wrk, an admin key, a node started in the background
# and ended by PID, and links made through its API. Needs HTTP (the node's
# -http-addr) set before it is sourced.

command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
key="lrk_$(head -c 32 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
pid=

# stop ends the node this script started, by PID.
stop() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi; }

# wait_ready LOG: waits up to 30 s for the node to answer with the key;
# otherwise prints LOG and exits.
wait_ready() {
  for _ in $(seq 1 300); do
    curl -fs -H "Authorization: Bearer $key" "http://$HTTP/api/v1/keys" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "node not ready"; cat "$1"; exit 1
}

# load_links N OUT: makes N links (https://example.com/r/1..N) through the
# node, 16 at a time, and writes their codes to OUT.
load_links() {
  for i in $(seq 1 "$1"); do
    printf '{"url":"https://example.com/r/%d"}\n' "$i"
  done | xargs -d '\n' -P 16 -I{} curl -fs -H 'Content-Type: application/json' -H "Authorization: Bearer $key" -d '{}' "http://$HTTP/api/v1/links" \
    | grep -o '"code":"[^"]*"' | cut -d'"' -f4 >"$2"
}
