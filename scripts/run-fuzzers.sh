#!/usr/bin/env bash
# Runs every libFuzzer target of a TERN_FUZZ build for a fixed time each.
# usage: scripts/run-fuzzers.sh BUILD_DIR SECONDS
# Seeds: fuzz/seeds/<target>/ (committed, tiny) plus the fixture files listed in
# fuzz/seeds/<target>.fixtures (paths under $TERN_FIXTURES), copied into a scratch corpus.
set -euo pipefail
build=${1:?build dir}
seconds=${2:?seconds}
root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=${TERN_FIXTURES:-$root/../shared/fixtures}
shopt -s nullglob
targets=("$build"/*_fuzz)
if [ ${#targets[@]} -eq 0 ]; then
  echo "run-fuzzers: no fuzz targets in $build" >&2
  exit 1
fi
for bin in "${targets[@]}"; do
  name=$(basename "$bin")
  corpus=$(mktemp -d)
  trap 'rm -rf "$corpus"' EXIT
  if [ -d "$root/fuzz/seeds/$name" ]; then cp "$root/fuzz/seeds/$name"/* "$corpus"/ 2>/dev/null || true; fi
  if [ -f "$root/fuzz/seeds/$name.fixtures" ]; then
    while read -r rel; do
      [ -n "$rel" ] && [ -f "$fixtures/$rel" ] && cp "$fixtures/$rel" "$corpus/$(echo "$rel" | tr / _)" || true
    done < "$root/fuzz/seeds/$name.fixtures"
  fi
  echo "run-fuzzers: $name for ${seconds}s"
  log="$corpus.log"
  set +e
  ASAN_OPTIONS=detect_leaks=1 "$bin" -max_total_time="$seconds" -rss_limit_mb=4096 \
    -max_len=2097152 -print_final_stats=1 "$corpus" >"$log" 2>&1
  status=$?
  set -e
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$log" >&2
    echo "run-fuzzers: $name FAILED (exit $status)" >&2
    rm -rf "$corpus" "$log"
    exit "$status"
  fi
  grep -E "stat::number_of_executed_units|stat::new_units_added" "$log" | tr '\n' ' ' || true
  echo
  rm -rf "$corpus" "$log"
  trap - EXIT
done
echo "run-fuzzers: all ${#targets[@]} targets ran ${seconds}s clean"
