#!/usr/bin/env bash
# A soak of tern serve (not in CI): mixed load with random hang-ups for DURATION seconds (default
# 1200), printing the server's RSS, open file descriptors and threads, and the minute's request
# latencies (p50 / p99), once a minute. Loopback only; the load is bounded by its concurrency.
#   scripts/soak.sh [TERN_BINARY] [MODEL] [DURATION]
# e.g. scripts/soak.sh build/tern ../shared/fixtures/stories260K/stories260K.gguf 1200
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tern=${1:-$root/build/tern}
model=${2:-$root/../shared/fixtures/stories260K/stories260K.gguf}
duration=${3:-1200}
log=$(mktemp)
"$tern" serve "$model" --port 0 --served-model-name soak --disable-log-stats >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
port=
for _ in $(seq 600); do
  port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$log" >&2; echo "soak: the server did not start" >&2; exit 1; }
echo "soak: tern serve (pid $pid) on port $port for ${duration} s"
exec python3 "$root/scripts/soak_load.py" --port "$port" --pid "$pid" --duration "$duration"
