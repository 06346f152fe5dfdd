#!/usr/bin/env bash
# What `make test-arm64` checks: tern built for aarch64, run on this x86-64 machine under
# qemu's user-mode emulation, on three emulated CPUs, one per ARM level:
#   cortex-a72   ARMv8.0, Advanced SIMD only   → the neon level
#   neoverse-n1  ARMv8.2 with sdot             → dotprod
#   max          all qemu emulates, smmla too  → i8mm
# On each: tern picks that level at run time (`tern kernels`), the kernels' tests pass at the
# levels it runs, and tern's outputs equal the x86-64 build's: stories260K's greedy, seeded and
# int8-KV-cache texts, stories260K requantized to Q4_0, and a dummy Qwen3-0.6B Q4_K_M's first
# 32 greedy token ids. The ARM kernels reproduce the 16-chain arithmetic of x86's AVX-512 level
# bit for bit (generic/vec_dot_16lane.cpp), so the comparisons of quantized models need the x86
# build at that level; on an x86-64 CPU without AVX-512 only the greedy stories260K text (small
# and confident, it does not move with the float order) and the tokenizer are compared. On
# `max`, which runs all three levels, the decoder and engine tests run too.
# Emulation proves correctness, not speed.
# usage: scripts/test-arm64.sh ARM64_BUILD_DIR X86_TERN
set -euo pipefail
arm_build=${1:?the aarch64 build folder}
x86=${2:?path to the x86-64 tern}
arm=$arm_build/tern
kernel_tests=$arm_build/tern_kernel_tests
root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=${TERN_FIXTURES:-$root/../shared/fixtures}
stories=$fixtures/stories260K/stories260K.gguf
if [ ! -f "$stories" ]; then
  echo "test-arm64: fixtures not found at $fixtures (set TERN_FIXTURES)" >&2
  exit 1
fi
# The ELF header's e_machine (bytes 18-19): 183 is EM_AARCH64.
for bin in "$arm" "$kernel_tests"; do
  if [ "$(od -An -tu2 -j18 -N2 "$bin" | tr -d ' ')" != 183 ]; then
    echo "test-arm64: $bin is not an aarch64 binary" >&2
    exit 1
  fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The arm64 libraries come from multiarch (/lib/ld-linux-aarch64.so.1, /usr/lib/aarch64-linux-gnu),
# which qemu finds at their own paths. Not -L /usr/aarch64-linux-gnu: with the cross toolchain's
# sysroot as the prefix, qemu 7.2 hangs any program that starts a second thread.
cpu=max
emulate() { QEMU_CPU=$cpu qemu-aarch64-static "$@"; }

failures=0
fail() {
  echo "test-arm64: $*"
  failures=$((failures + 1))
}
# What a --json generation says that must agree: the ids, not the timings.
token_ids() { grep -o '"token_ids":\[[^]]*\]'; }
# Runs one command on both builds and compares what they print on stdout (through $filter).
filter=cat
same() {
  local name=$1 want got
  shift
  want=$("$x86" "$@" 2>/dev/null | $filter)
  got=$(emulate "$arm" "$@" 2>/dev/null | $filter) ||
    { fail "$cpu: $name: the aarch64 build failed"; return; }
  if [ "$want" != "$got" ]; then
    fail "$cpu: $name differs"
    diff <(echo "$want") <(echo "$got") | head -20
  elif [ -z "$want" ]; then
    fail "$cpu: $name printed nothing"
  else
    echo "test-arm64: $cpu: $name: same"
  fi
}

# x86's AVX-512 level is the arithmetic the ARM levels keep; without it, the comparisons of
# quantized models would compare two different float orders.
x86_level=$("$x86" kernels | sed -n 's/^instruction set: \([a-z0-9]*\).*/\1/p')
case $x86_level in
  avx512 | amx) have_avx512=1 ;;
  *)
    have_avx512=0
    echo "test-arm64: this x86-64 CPU runs $x86_level, not AVX-512: only the tests and the" \
      "scalar comparisons run"
    ;;
esac

# A dummy Qwen3-0.6B in Q4_K_M (Q4_K and Q6_K weights), made once by the x86 build.
qwen=$work/qwen3-0.6b-q4_k_m.gguf
"$x86" generate --model "$fixtures/model-configs/qwen3-0.6b" --load-format dummy --weight-type q4_k_m \
  --tokenizer "$fixtures/qwen-tokenizer" --prompt hi -n 1 --save-gguf "$qwen" >/dev/null 2>&1

same "version" --version
for pair in cortex-a72:neon neoverse-n1:dotprod max:i8mm; do
  cpu=${pair%%:*}
  level=${pair#*:}
  got=$(emulate "$arm" kernels | sed -n 's/^instruction set: \([a-z0-9]*\).*/\1/p')
  if [ "$got" != "$level" ]; then
    fail "$cpu: tern runs the ${got:-?} level, not $level"
    continue
  fi
  echo "test-arm64: $cpu: tern runs the $level level"
  if [ "$cpu" != max ]; then
    # The tests of the dot kernels and the dispatch at the levels this CPU runs (max runs every
    # level, so its Matmul tests below check each level's tiles; the rest is the same code on
    # every level).
    TERN_FIXTURES=$fixtures emulate "$kernel_tests" --gtest_brief=1 \
      --gtest_filter='VecDot*:KernelTable*:KvQuant*:Ops*' \
      >"$work/tests.log" 2>&1 || { fail "$cpu: kernel tests failed"; tail -n 30 "$work/tests.log"; }
  fi
  # stories260K's F32 weights: the x86 scalar level differs in float order from AVX-512 and
  # the ARM levels, yet its greedy text must not change (the model is small and confident);
  # at AVX-512 it must be the same bits, which the seeded runs need.
  same "stories260K greedy" generate --model "$stories" --prompt "Once upon a time" -n 64 \
    --temperature 0
  if [ "$have_avx512" -eq 1 ]; then
    same "stories260K seeded" generate --model "$stories" --prompt "Lily saw a cat" -n 48 \
      --temperature 0.8 --top-k 40 --top-p 0.95 --seed 7
    same "stories260K int8 KV cache" generate --model "$stories" --prompt "The little dog" -n 48 \
      --temperature 0 --kv-cache-dtype int8
    # Requantized at load: Q4_0's prefill goes through i8mm's tiles on `max`.
    same "stories260K as Q4_0" generate --model "$stories" --weight-type q4_0 \
      --prompt "Once upon a time there was a little girl" -n 32 --temperature 0
    # Q4_K and Q6_K: neon's kernels on cortex-a72; on max dotprod's GEMV and i8mm's tiles in the
    # prefill (neoverse-n1 would run max's GEMV again: skipped for time).
    if [ "$cpu" != neoverse-n1 ]; then
      filter=token_ids
      same "dummy Qwen3-0.6B Q4_K_M, 32 greedy tokens" generate --model "$qwen" \
        --prompt "The capital of France is" -n 32 --temperature 0 --ignore-eos --json
      filter=cat
    fi
  fi
done

cpu=max
got=$(TERN_ISA=neon emulate "$arm" kernels | sed -n 's/^instruction set: \([a-z0-9]*\).*/\1/p')
[ "$got" = neon ] || fail "max: TERN_ISA=neon runs the ${got:-?} level"
same "Qwen tokenizer" tokenize --model "$fixtures/qwen-tokenizer" \
  --text "Hello, 世界! 🚀 <think>ok</think> 12345"
echo "test-arm64: max: the kernel, decoder and engine tests"
# Less six tests that take five to six minutes of emulation between them and test nothing of
# ARM's own: the engine's three batch-invariance runs and a preemption run, the exp sweep, and the tiles' batch
# invariance (each tile output is its vec_dot, bit for bit, which
# Matmul.GemmTileIsVecDotPerElement checks here; the split of a batch into tiles is portable).
if ! TERN_FIXTURES=$fixtures emulate "$kernel_tests" --gtest_brief=1 \
  --gtest_filter='-LLMEngine.BatchInvariant*:LLMEngine.TinyCachePreemptsAndStillGivesTheSameOutputs:Lanes16.ExpWithinTwoUlpOfStdExp:Matmul.GemmTilesBatchInvariantAndMatchScalar'; then
  fail "max: tern_kernel_tests failed"
fi

if [ "$failures" -ne 0 ]; then
  echo "test-arm64: $failures check(s) failed" >&2
  exit 1
fi
echo "test-arm64: ok"
