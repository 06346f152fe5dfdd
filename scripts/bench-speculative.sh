#!/usr/bin/env bash
# Speculative decoding, measured on a target that is bandwidth bound and still writes real
# text: stories260K widened to ~1 B parameters by ../shared/tools/widen_gguf.py (it computes
# what stories260K computes), quantized by tern, with stories260K itself as the draft.
#   - verify cost: one target step of 1 + K tokens of one sequence, K = 0…8, against K = 0;
#   - tern generate: plain, draft model (adaptive, fixed K = 4 and 8), n-gram, at temperature
#     0 and 0.8, the runs of one round alternating, RUNS rounds, medians;
#   - a useless draft: a dummy Qwen3-0.6B shape drafting for a dummy Qwen3-1.7B shape (Q4_0);
#   - tern serve with and without the draft under `tern bench serve` at concurrency 1 and 4;
#   - with LLAMA_CPP=<llama.cpp build/bin>: llama-bench tg, llama-speculative and llama-server
#     (-md, --spec-type draft-simple) on the same files.
# usage: scripts/bench-speculative.sh BUILD_DIR WORK_DIR [RUNS]
#   WORK_DIR gets the widened models (~4 GB) and results.jsonl (one JSON object per run).
# Needs Debian's python3-numpy for the widening (run by /usr/bin/python3).
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
work=${2:?work dir}
runs=${3:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=${TERN_FIXTURES:-$root/../shared/fixtures}
tern="$build/tern"
draft="$fixtures/stories260K/stories260K.gguf"
widen="$root/../shared/tools/widen_gguf.py"
threads=${THREADS:-2}
tokens=${TOKENS:-256}
prompt="Once upon a time"
mkdir -p "$work"
results="$work/results.jsonl"
: >"$results"

for noise in 0 0.1; do
  name=wide$([ "$noise" = 0 ] || echo "-noise${noise/./}")
  [ -f "$work/$name-f16.gguf" ] || /usr/bin/python3 "$widen" "$draft" "$work/$name-f16.gguf" --noise "$noise"
  for dtype in q4_0 q8_0; do
    [ -f "$work/$name-$dtype.gguf" ] ||
      "$tern" generate -m "$work/$name-f16.gguf" --weight-type "$dtype" --save-gguf "$work/$name-$dtype.gguf" >/dev/null
  done
done

# One JSON line per run: the case's name, then what `tern generate --json` says.
record() {
  local label=$1
  shift
  local out
  out=$("$@" 2>/dev/null | tail -n 1)
  /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.argv[2]); d["case"]=sys.argv[1]; print(json.dumps(d))' \
    "$label" "$out" >>"$results"
}

target="$work/wide-q4_0.gguf"
echo "== verify cost, $target, $threads threads"
"$tern" bench-model "$target" -p 0 -n 0 --verify 8 --verify-depth 128 -r 5 --threads "$threads"
"$tern" bench-model "$draft" -p 0 -n 64 -r 5 --threads "$threads"
"$tern" bench-model "$target" -p 0 -n 64 -r 5 --threads "$threads"

for round in $(seq "$runs"); do
  for temp in 0 0.8; do
    for file in wide-q4_0 wide-q8_0 wide-noise01-q4_0; do
      model="$work/$file.gguf"
      base=(generate -m "$model" -p "$prompt" -n "$tokens" --ignore-eos --threads "$threads" --json
            --temperature "$temp" --seed "$round")
      record "$file T=$temp plain" "$tern" "${base[@]}"
      record "$file T=$temp draft adaptive K<=8" "$tern" "${base[@]}" \
        --speculative-model "$draft" --num-speculative-tokens 8
      for k in 4 8; do
        record "$file T=$temp draft fixed K=$k" "$tern" "${base[@]}" --speculative-config \
          "{\"model\":\"$draft\",\"num_speculative_tokens\":$k,\"adaptive\":false}"
      done
      record "$file T=$temp ngram adaptive K<=8" "$tern" "${base[@]}" --speculative-config \
        '{"method":"ngram","num_speculative_tokens":8,"prompt_lookup_max":4,"prompt_lookup_min":2}'
    done
  done
done

/usr/bin/python3 - "$results" <<'EOF'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    rows.setdefault(d["case"], []).append(d)
print("| case | runs | decode tok/s (median) | vs plain | acceptance | mean acceptance length |")
print("|---|---:|---:|---:|---:|---:|")
for case, ds in rows.items():
    tps = statistics.median(d["timings"]["decode_tokens_per_s"] for d in ds)
    plain = rows.get(case.split(" T=")[0] + " T=" + case.split(" T=")[1].split(" ")[0] + " plain")
    ratio = tps / statistics.median(d["timings"]["decode_tokens_per_s"] for d in plain) if plain else float("nan")
    spec = [d["speculative"] for d in ds if "speculative" in d]
    acc = statistics.median(s["acceptance_rate"] for s in spec) if spec else None
    length = statistics.median(s["mean_acceptance_length"] for s in spec) if spec else None
    print(f"| {case} | {len(ds)} | {tps:.1f} | {ratio:.2f}x | "
          f"{'' if acc is None else f'{100 * acc:.1f}%'} | {'' if length is None else f'{length:.2f}'} |")
EOF

echo "== a useless draft: dummy qwen3-0.6b for dummy qwen3-1.7b, Q4_0, $threads threads"
for round in $(seq "$runs"); do
  useless=(generate -m "$fixtures/model-configs/qwen3-1.7b" --load-format dummy --weight-type q4_0
           --tokenizer "$fixtures/qwen-tokenizer" -p "$prompt" -n 128 --ignore-eos --threads "$threads" --json)
  record "useless plain" "$tern" "${useless[@]}"
  record "useless draft adaptive K<=4" "$tern" "${useless[@]}" --speculative-config \
    "{\"model\":\"$fixtures/model-configs/qwen3-0.6b\",\"num_speculative_tokens\":4}"
done
grep '"case": "useless' "$results" | /usr/bin/python3 -c '
import json, statistics, sys
runs = {}
for line in sys.stdin:
    d = json.loads(line)
    runs.setdefault(d["case"], []).append(d["timings"]["decode_tokens_per_s"])
plain = statistics.median(runs["useless plain"])
for case, tps in runs.items():
    print("%s: median %.2f tok/s of %s, %.3fx plain" % (case, statistics.median(tps), [round(t, 2) for t in tps],
                                                       statistics.median(tps) / plain))'

echo "== tern serve $target (--disable-log-stats), tern bench serve: random 64 in / 128 out, 16 prompts"
port=18231
for round in $(seq "$runs"); do
  for spec in none draft; do
    flags=()
    [ "$spec" = draft ] && flags=(--speculative-model "$draft" --num-speculative-tokens 8)
    "$tern" serve "$target" --port "$port" --threads "$threads" --served-model-name wide \
      --disable-log-stats "${flags[@]}" 2>/dev/null &
    server=$!
    for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.2; done
    for concurrency in 1 4; do
      echo "-- round $round, speculation: $spec, concurrency $concurrency"
      "$tern" bench serve --base-url "http://127.0.0.1:$port" --model wide --tokenizer "$target" \
        --dataset-name random --random-input-len 64 --random-output-len 128 --num-prompts 16 \
        --max-concurrency "$concurrency" --temperature 0 --seed "$round" --disable-tqdm |
        grep -E "Output token throughput|Median TPOT|Median TTFT|Acceptance (rate|length)"
    done
    kill "$server"
    wait "$server" || true
  done
done

[ -n "${LLAMA_CPP:-}" ] || exit 0
echo "== llama.cpp ($LLAMA_CPP), same files"
for temp in 0 0.8; do
  for round in $(seq "$runs"); do
    "$LLAMA_CPP/llama-bench" -m "$target" -p 0 -n "$tokens" -t "$threads" -r 1 -o json 2>/dev/null |
      /usr/bin/python3 -c 'import json,sys; print("llama-bench tg: %.1f tok/s" % json.load(sys.stdin)[0]["avg_ts"])'
    "$LLAMA_CPP/llama-speculative" -m "$target" -md "$draft" -p "$prompt" -n "$tokens" -t "$threads" \
      --temp "$temp" --top-k 0 --top-p 1 --min-p 0 --seed "$round" --spec-draft-n-max 8 2>&1 |
      grep -E "decoded|accept  " || true
  done
done
echo "== llama-server, same files: plain and -md --spec-type draft-simple --spec-draft-n-max 8"
for round in $(seq "$runs"); do
  for spec in none draft; do
    flags=()
    [ "$spec" = draft ] && flags=(-md "$draft" --spec-type draft-simple --spec-draft-n-max 8)
    "$LLAMA_CPP/llama-server" -m "$target" --port "$port" -t "$threads" "${flags[@]}" >/dev/null 2>&1 &
    server=$!
    for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.2; done
    curl -s "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
      -d "{\"prompt\": \"$prompt\", \"max_tokens\": $tokens, \"temperature\": 0, \"ignore_eos\": true}" |
      /usr/bin/python3 -c 'import json,sys; t=json.load(sys.stdin)["timings"]; print("llama-server '"$spec"': %.1f tok/s, drafted %s, accepted %s" % (t["predicted_per_second"], t.get("draft_n"), t.get("draft_n_accepted")))'
    kill "$server"
    wait "$server" || true
  done
done
