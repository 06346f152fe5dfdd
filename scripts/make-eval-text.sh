#!/usr/bin/env bash
# Makes the evaluation texts of `tern perplexity`, reproducibly (there is no text corpus in
# the fixtures):
#   OUTDIR/stories-eval.txt   stories260K's own distribution: stories sampled at temperature 1
#                             from BOS alone, seeds 1..128 (~48K tokens of its tokenizer)
#   OUTDIR/stories-calib.txt  the same with seeds 100001..100128, for imatrix calibration, so
#                             calibration and evaluation never share a story
#   OUTDIR/docs-eval.txt      real English prose, out of the model's distribution: this
#                             checkout's README.md and docs/*.md, concatenated in name order
# usage: scripts/make-eval-text.sh OUTDIR [TERN]   (TERN: the tern binary, default build/tern)
#
# Each story is one request of `tern generate --prompts`: prompt "" (BOS only), temperature 1,
# no top-k/top-p, its own seed, up to 512 tokens, ending at the next BOS (stories260K starts a
# new story with BOS and rarely emits EOS). A seeded request gives the same tokens alone or in
# any batch and with any thread count; TERN_ISA=scalar (unless set) keeps the matmuls from
# depending on the CPU's instruction set.
# Stories are separated by a blank line.
set -euo pipefail
out=${1:?usage: make-eval-text.sh OUTDIR [TERN]}
root=$(cd "$(dirname "$0")/.." && pwd)
tern=${2:-$root/build/tern}
fixtures=${TERN_FIXTURES:-$root/../shared/fixtures}
model=$fixtures/stories260K/stories260K.gguf
stories=${EVAL_STORIES:-128}  # fewer only where a test wants the files' form quickly
[ -x "$tern" ] || { echo "make-eval-text: no tern binary at $tern" >&2; exit 1; }
[ -f "$model" ] || { echo "make-eval-text: $model not found (set TERN_FIXTURES)" >&2; exit 1; }
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export TERN_ISA=${TERN_ISA:-scalar}

# sample FIRST_SEED FILE: $stories stories with seeds FIRST_SEED, FIRST_SEED + 1, ...
sample() {
  local first=$1 dest=$2 seed
  for ((seed = first; seed < first + stories; ++seed)); do
    printf '{"prompt": "", "temperature": 1.0, "seed": %d, "max_tokens": 512, "stop_token_ids": [1]}\n' "$seed"
  done >"$work/requests.jsonl"
  "$tern" generate --model "$model" --prompts "$work/requests.jsonl" --output "$work/out.jsonl" \
    --max-num-seqs 64 >&2
  /usr/bin/python3 - "$work/out.jsonl" "$dest" <<'PY'
import json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    texts = [json.loads(line)["text"].strip() for line in f if line.strip()]
with open(sys.argv[2], "w", encoding="utf-8") as f:
    f.write("\n\n".join(texts) + "\n")
PY
  echo "make-eval-text: $dest: $stories stories, $(wc -c <"$dest") bytes" >&2
}

sample 1 "$out/stories-eval.txt"
sample 100001 "$out/stories-calib.txt"
cat "$root/README.md" "$root"/docs/*.md >"$out/docs-eval.txt"
echo "make-eval-text: $out/docs-eval.txt: $(wc -c <"$out/docs-eval.txt") bytes" >&2
