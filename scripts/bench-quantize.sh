#!/usr/bin/env bash
# Quantization quality and speed, tern beside llama.cpp on the same inputs.
#   - importance matrices of MODEL over the calibration text, by `tern imatrix` and by
#     llama-imatrix (same windows: CTX tokens, CALIB_CHUNKS of them);
#   - for every TYPE, without and with each tool's own importance matrix: the file by `tern
#     quantize` and by llama-quantize, its size and bits per weight, and the seconds it took;
#     and tern's GPTQ file, from an importance matrix with second moments (`tern imatrix
#     --hessian`, same windows), which llama.cpp has no counterpart of;
#   - every file measured by both tools against MODEL itself: llama-perplexity --kl-divergence
#     and tern perplexity --kl-divergence (each against its own base file of MODEL's
#     log-probabilities over the evaluation text, CHUNKS windows of CTX): PPL, mean KLD, same top.
# The texts are scripts/make-eval-text.sh's (stories260K sampled at temperature 1; calibration
# and evaluation from disjoint seeds), made in WORK_DIR/eval when absent.
# usage: LLAMA_CPP=<llama.cpp build/bin> scripts/bench-quantize.sh BUILD_DIR WORK_DIR MODEL [CHUNKS]
#   TYPES (default "q8_0 q6_k q5_k_m q4_k_m q4_0"), CTX (512), CALIB_CHUNKS (CHUNKS), THREADS (2).
#   Appends one JSON object per measurement to WORK_DIR/results.jsonl and prints the table.
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
work=${2:?work dir}
model=${3:?model (F16/F32 GGUF)}
chunks=${4:-40}
llama=${LLAMA_CPP:?set LLAMA_CPP to llama.cpp build/bin}
root=$(cd "$(dirname "$0")/.." && pwd)
tern="$build/tern"
types=${TYPES:-q8_0 q6_k q5_k_m q4_k_m q4_0}
ctx=${CTX:-512}
calib_chunks=${CALIB_CHUNKS:-$chunks}
threads=${THREADS:-2}
mkdir -p "$work"
results="$work/results.jsonl"
[ -f "$work/eval/stories-eval.txt" ] || "$root/scripts/make-eval-text.sh" "$work/eval" "$tern"
eval_text="$work/eval/stories-eval.txt"
calib_text="$work/eval/stories-calib.txt"
name=$(basename "$model" .gguf)

record() { echo "$1" >>"$results"; echo "$1" >&2; }

# kld_llama FILE → {"ppl":…,"kld":…,"same_top":…} from llama-perplexity's report
kld_llama() {
  "$llama/llama-perplexity" -m "$1" --kl-divergence-base "$work/$name.llama.kld" --kl-divergence \
    -t "$threads" 2>&1 | /usr/bin/python3 -c '
import json, re, sys
text = sys.stdin.read()
def num(label):
    m = re.search(label + r"\s*:\s*([-0-9.]+)", text)
    return float(m.group(1)) if m else None
print(json.dumps({"ppl": num(r"Mean PPL\(Q\)"), "kld": num(r"Mean    KLD"), "same_top": num(r"Same top p")}))'
}
kld_tern() {
  "$tern" perplexity -m "$1" --kl-divergence-base "$work/$name.tern.kld" --kl-divergence --json \
    --threads "$threads" 2>/dev/null | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
print(json.dumps({"ppl": d["ppl_q"]["value"], "kld": d["kld"]["value"], "same_top": 100 * d["same_top"]["value"]}))'
}

# Base files: MODEL's own log-probabilities, one per tool.
[ -f "$work/$name.llama.kld" ] || "$llama/llama-perplexity" -m "$model" -f "$eval_text" -c "$ctx" \
  --chunks "$chunks" --kl-divergence-base "$work/$name.llama.kld" -t "$threads" >/dev/null 2>&1
[ -f "$work/$name.tern.kld" ] || "$tern" perplexity -m "$model" -f "$eval_text" --ctx "$ctx" \
  --chunks "$chunks" --kl-divergence-base "$work/$name.tern.kld" --threads "$threads" >/dev/null 2>&1

# Importance matrices, one per tool, over the same windows.
[ -f "$work/$name.tern.imatrix.gguf" ] || "$tern" imatrix -m "$model" -f "$calib_text" --ctx "$ctx" \
  --chunks "$calib_chunks" -o "$work/$name.tern.imatrix.gguf" --threads "$threads" >/dev/null 2>&1
[ -f "$work/$name.llama.imatrix.gguf" ] || "$llama/llama-imatrix" -m "$model" -f "$calib_text" -c "$ctx" \
  --chunks "$calib_chunks" -o "$work/$name.llama.imatrix.gguf" -t "$threads" --no-ppl >/dev/null 2>&1
[ -f "$work/$name.tern.hessian.gguf" ] || "$tern" imatrix -m "$model" -f "$calib_text" --ctx "$ctx" \
  --chunks "$calib_chunks" --hessian -o "$work/$name.tern.hessian.gguf" --threads "$threads" >/dev/null 2>&1

seconds() { /usr/bin/python3 -c 'import time; print(time.time())'; }
for type in $types; do
  upper=$(echo "$type" | tr a-z A-Z)
  for imatrix in none own gptq; do
    for tool in tern llama; do
      [ "$imatrix" = gptq ] && [ "$tool" = llama ] && continue
      out="$work/$name.$type.$tool.$imatrix.gguf"
      start=$(seconds)
      if [ "$tool" = tern ]; then
        args=()
        [ "$imatrix" = own ] && args=(--imatrix "$work/$name.tern.imatrix.gguf")
        [ "$imatrix" = gptq ] && args=(--imatrix "$work/$name.tern.hessian.gguf")
        "$tern" quantize "${args[@]}" --threads "$threads" "$model" "$out" "$type" >/dev/null 2>&1 || { echo "tern quantize $type failed" >&2; continue; }
      else
        args=()
        [ "$imatrix" = own ] && args=(--imatrix "$work/$name.llama.imatrix.gguf")
        "$llama/llama-quantize" "${args[@]}" "$model" "$out" "$upper" "$threads" >/dev/null 2>&1 || { echo "llama-quantize $upper failed" >&2; continue; }
      fi
      secs=$(/usr/bin/python3 -c "print(round($(seconds) - $start, 2))")
      bytes=$(stat -c %s "$out")
      for measure in llama tern; do
        m=$([ "$measure" = llama ] && kld_llama "$out" || kld_tern "$out")
        record "{\"model\":\"$name\",\"type\":\"$type\",\"imatrix\":\"$imatrix\",\"quantizer\":\"$tool\",\"measured_by\":\"$measure\",\"bytes\":$bytes,\"quantize_seconds\":$secs,\"result\":$m}"
      done
    done
  done
done

/usr/bin/python3 - "$results" "$name" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if r["model"] == sys.argv[2]]
print("| type | imatrix | quantizer | MiB | KLD (llama.cpp) | KLD (tern) | same top % (llama.cpp / tern) | PPL (llama.cpp / tern) | quantize s |")
print("|---|---|---|---|---|---|---|---|---|")
keys = []
for r in rows:
    k = (r["type"], r["imatrix"], r["quantizer"])
    if k not in keys: keys.append(k)
for k in keys:
    by = {r["measured_by"]: r for r in rows if (r["type"], r["imatrix"], r["quantizer"]) == k}
    l, t = by.get("llama", {}).get("result", {}), by.get("tern", {}).get("result", {})
    any_r = next(iter(by.values()))
    f = lambda v, p: ("%." + str(p) + "f") % v if isinstance(v, (int, float)) else "-"
    print(f"| {k[0]} | {k[1]} | {k[2]} | {any_r['bytes']/2**20:.1f} | {f(l.get('kld'),5)} | {f(t.get('kld'),5)} | {f(l.get('same_top'),2)} / {f(t.get('same_top'),2)} | {f(l.get('ppl'),4)} / {f(t.get('ppl'),4)} | {any_r['quantize_seconds']} |")
PY
