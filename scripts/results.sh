#!/usr/bin/env bash
# docs/RESULTS.md from one run of `tern bench suite`'s default matrix on this machine: the
# widened stories260K (../shared/tools/widen_gguf.py, ~1 B parameters in F16, stories260K its
# draft) through every weight type and technique, and dummy Qwen3 shapes.
# usage: scripts/results.sh BUILD_DIR [WORK_DIR]   (paths relative to the checkout)
#   WORK_DIR (default BUILD_DIR/suite-work) keeps the widened model and the weight files made
#   (~15 GB with GPTQ's importance matrix); a second run reuses them.
#   LLAMA_CPP=<llama.cpp build/bin>, IK_LLAMA_CPP=<ik_llama.cpp build/bin>: their figures beside
#   tern's (built by you beforehand; nothing is built or downloaded here).
#   DEVICE=vulkan (or vulkan:N): tern's models on that device, llama.cpp's with -ngl 99 (give
#   its Vulkan build); the page then goes to docs/RESULTS-DEVICE.md and docs/results-device/.
# Run it on a quiet machine: every figure is a speed. The commands on the page name the files
# relative to the checkout, so they run again from there.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?build dir}
work=${2:-$build/suite-work}
fixtures=${TERN_FIXTURES:-../shared/fixtures}
draft="$fixtures/stories260K/stories260K.gguf"
mkdir -p "$work"
if [ ! -f "$work/wide-f16.gguf" ]; then
  /usr/bin/python3 -c 'import numpy' 2>/dev/null ||
    { echo "results: the widening needs Debian's python3-numpy (apt-get install python3-numpy)" >&2; exit 1; }
  /usr/bin/python3 ../shared/tools/widen_gguf.py "$draft" "$work/wide-f16.gguf"
fi
others=()
[ -z "${LLAMA_CPP:-}" ] || others+=(--llama-cpp "$LLAMA_CPP")
[ -z "${IK_LLAMA_CPP:-}" ] || others+=(--ik-llama-cpp "$IK_LLAMA_CPP")
out=docs/results page=docs/RESULTS.md
if [ -n "${DEVICE:-}" ]; then
  others+=(--device "$DEVICE")
  out=docs/results-device page=docs/RESULTS-DEVICE.md
fi
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit with uncommitted changes"
TERN_FIXTURES="$fixtures" "$build/tern" bench suite --model "$work/wide-f16.gguf" --draft "$draft" \
  --out "$out" --work "$work" --page "$page" --commit "$commit" "${others[@]}"
