#!/usr/bin/env bash
# What `make demo` shows: tern reading real model files and tokenizers from the fixtures.
# usage: scripts/demo.sh PATH/TO/tern
set -euo pipefail
tern=${1:?path to the tern binary}
root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=${TERN_FIXTURES:-$root/../shared/fixtures}
if [ ! -d "$fixtures" ]; then
  echo "demo: fixtures not found at $fixtures (set TERN_FIXTURES)" >&2
  exit 1
fi

run() {
  local shown="" arg
  for arg in "$@"; do
    if [[ "$arg" =~ ^[A-Za-z0-9_./=:,+-]+$ ]]; then shown+=" $arg"; else shown+=" '${arg//\'/\'\\\'\'}'"; fi
  done
  printf '\n$%s\n' "$shown"
  "$@"
}

run "$tern" inspect "$fixtures/stories260K/stories260K.gguf"
run "$tern" tokenize --model "$fixtures/stories260K/stories260K.gguf" --text "Once upon a time, there was a little girl."
run "$tern" tokenize --model "$fixtures/qwen-tokenizer" --text "Hello, 世界! 🚀 <think>ok</think>"
run "$tern" tokenize --model "$fixtures/llama3-tokenizer" --text "Llama 3 counts 12345 in threes."
run "$tern" tokenize --model "$fixtures/qwen-tokenizer" --detokenize --ids '[9707, 11, 220, 99489, 0]'
run "$tern" generate --model "$fixtures/stories260K/stories260K.gguf" --prompt "Once upon a time" -n 96 --seed 1
run "$tern" generate --model "$fixtures/stories260K/stories260K.gguf" --prompt "Lily saw a cat" -n 64 --temperature 0.8 --top-k 40 --top-p 0.95 --seed 7

# A batch: three requests with their own sampling fields, through the engine at once.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/prompts.jsonl" <<'JSONL'
{"prompt": "Once upon a time", "max_tokens": 48}
{"prompt": "The little dog", "max_tokens": 48, "temperature": 0.8, "seed": 3, "n": 2}
{"prompt": "Tom and Lily went to the park.", "max_tokens": 64, "stop": ["."]}
JSONL
run "$tern" generate --model "$fixtures/stories260K/stories260K.gguf" --prompts "$work/prompts.jsonl" --output "$work/out.jsonl"
printf '\n$ cat out.jsonl\n'
cat "$work/out.jsonl"
