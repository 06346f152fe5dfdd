#!/usr/bin/env bash
# Runs every libFuzzer target of a TERN_FUZZ build for a fixed time each, JOBS at a time.
# usage: scripts/run-fuzzers.sh BUILD_DIR SECONDS [JOBS]
# Seeds: fuzz/seeds/<target>/ (committed, tiny) plus the fixture files listed in
# fuzz/seeds/<target>.fixtures (paths under $TERN_FIXTURES), copied into a scratch corpus.
# A fuzzer is one process on one core, so JOBS fuzzers side by side on JOBS cores each run as
# long and as fast as alone: the same coverage in 1/JOBS of the wall time.
set -euo pipefail
build=${1:?build dir}
seconds=${2:?seconds}
jobs=${3:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=${TERN_FIXTURES:-$root/../shared/fixtures}
shopt -s nullglob
targets=("$build"/*_fuzz)
if [ ${#targets[@]} -eq 0 ]; then
  echo "run-fuzzers: no fuzz targets in $build" >&2
  exit 1
fi

# Runs one target; prints one summary line, or the tail of its log when it fails.
run_one() {
  local bin=$1 name corpus log status
  name=$(basename "$bin")
  corpus=$(mktemp -d)
  log="$corpus.log"
  if [ -d "$root/fuzz/seeds/$name" ]; then cp "$root/fuzz/seeds/$name"/* "$corpus"/ 2>/dev/null || true; fi
  if [ -f "$root/fuzz/seeds/$name.fixtures" ]; then
    while read -r rel; do
      [ -n "$rel" ] && [ -f "$fixtures/$rel" ] && cp "$fixtures/$rel" "$corpus/$(echo "$rel" | tr / _)" || true
    done < "$root/fuzz/seeds/$name.fixtures"
  fi
  set +e
  ASAN_OPTIONS=detect_leaks=1 "$bin" -max_total_time="$seconds" -rss_limit_mb=4096 \
    -max_len=2097152 -print_final_stats=1 "$corpus" >"$log" 2>&1
  status=$?
  set -e
  if [ "$status" -ne 0 ]; then
    { tail -n 60 "$log"; echo "run-fuzzers: $name FAILED (exit $status)"; } >&2
  else
    echo "run-fuzzers: $name ran ${seconds}s: $(grep -E "stat::number_of_executed_units|stat::new_units_added" "$log" | tr '\n' ' ')"
  fi
  rm -rf "$corpus" "$log"
  return "$status"
}
export -f run_one
export root fixtures seconds

echo "run-fuzzers: ${#targets[@]} targets, ${seconds}s each, $jobs at a time"
if ! printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one "$1"' _ {}; then
  echo "run-fuzzers: a target failed (its log is above)" >&2
  exit 1
fi
echo "run-fuzzers: all ${#targets[@]} targets ran ${seconds}s clean"
