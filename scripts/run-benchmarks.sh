#!/usr/bin/env bash
# Runs every micro-benchmark of a build (medians of several repetitions: this machine is
# noisy), then decode and prefill of a real-shaped model (Qwen3-0.6B, random Q4_0 weights)
# the way llama-bench measures them, and the machine's memory read bandwidth, their ceiling.
# usage: scripts/run-benchmarks.sh BUILD_DIR [extra Google Benchmark flags]
set -euo pipefail
build=${1:?build dir}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=${TERN_FIXTURES:-$root/../shared/fixtures}
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

config="$fixtures/model-configs/qwen3-0.6b"
if [ -d "$config" ]; then
  for dtype in q4_0 q4_k q8_0; do
    echo "== tern bench-model qwen3-0.6b (dummy $dtype weights), $(nproc) threads"
    "$build/tern" bench-model "$config" --load-format dummy --weight-type "$dtype" \
      --tokenizer "$fixtures/qwen-tokenizer" -p 512 -n 128 -r 3 --threads "$(nproc)"
  done
else
  echo "run-benchmarks: $config not found, model benchmarks skipped (set TERN_FIXTURES)" >&2
fi
