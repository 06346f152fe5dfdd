#!/usr/bin/env bash
# What `make test-arm64` checks: tern built for aarch64, run on this x86-64 machine under
# qemu's user-mode emulation, gives exactly what the x86-64 build gives (the kernels' batch
# invariance contract: every level equals its scalar twin bit for bit, so greedy and seeded
# outputs agree across machines). Emulation proves correctness, not speed.
# usage: scripts/test-arm64.sh ARM64_TERN X86_TERN
set -euo pipefail
arm=${1:?path to the aarch64 tern}
x86=${2:?path to the x86-64 tern}
root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=${TERN_FIXTURES:-$root/../shared/fixtures}
stories=$fixtures/stories260K/stories260K.gguf
if [ ! -f "$stories" ]; then
  echo "test-arm64: fixtures not found at $fixtures (set TERN_FIXTURES)" >&2
  exit 1
fi
# The arm64 libraries come from multiarch (/lib/ld-linux-aarch64.so.1, /usr/lib/aarch64-linux-gnu),
# which qemu finds at their own paths. Not -L /usr/aarch64-linux-gnu: with the cross toolchain's
# sysroot as the prefix, qemu 7.2 hangs any program that starts a second thread.
emulate() { qemu-aarch64-static "$arm" "$@"; }

failures=0
# Runs one command on both builds and compares what they print on stdout.
same() {
  local name=$1 want got
  shift
  want=$("$x86" "$@" 2>/dev/null)
  got=$(emulate "$@" 2>/dev/null) || { echo "test-arm64: $name: the aarch64 build failed"; failures=$((failures + 1)); return; }
  if [ "$want" != "$got" ]; then
    echo "test-arm64: $name differs"
    diff <(echo "$want") <(echo "$got") | head -20
    failures=$((failures + 1))
  elif [ -z "$want" ]; then
    echo "test-arm64: $name printed nothing"
    failures=$((failures + 1))
  else
    echo "test-arm64: $name: same"
  fi
}

# The ELF header's e_machine (bytes 18-19): 183 is EM_AARCH64.
if [ "$(od -An -tu2 -j18 -N2 "$arm" | tr -d ' ')" != 183 ]; then
  echo "test-arm64: $arm is not an aarch64 binary" >&2
  exit 1
fi
same "version" --version
same "stories260K greedy" generate --model "$stories" --prompt "Once upon a time" -n 64 --temperature 0
same "stories260K seeded" generate --model "$stories" --prompt "Lily saw a cat" -n 48 \
  --temperature 0.8 --top-k 40 --top-p 0.95 --seed 7
same "stories260K int8 KV cache" generate --model "$stories" --prompt "The little dog" -n 48 \
  --temperature 0 --kv-cache-dtype int8
same "Qwen tokenizer" tokenize --model "$fixtures/qwen-tokenizer" \
  --text "Hello, 世界! 🚀 <think>ok</think> 12345"
if [ "$failures" -ne 0 ]; then
  echo "test-arm64: $failures check(s) failed" >&2
  exit 1
fi
echo "test-arm64: ok"
