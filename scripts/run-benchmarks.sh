#!/usr/bin/env bash
# Runs every micro-benchmark of a build; medians of several repetitions, since this machine is
# noisy. usage: scripts/run-benchmarks.sh BUILD_DIR [extra Google Benchmark flags]
set -euo pipefail
build=${1:?build dir}
shift
shopt -s nullglob
benches=("$build"/*_bench)
if [ ${#benches[@]} -eq 0 ]; then
  echo "run-benchmarks: no benchmarks in $build" >&2
  exit 1
fi
for bin in "${benches[@]}"; do
  echo "== $(basename "$bin")"
  "$bin" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true "$@"
done
