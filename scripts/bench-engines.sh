#!/usr/bin/env bash
# tern against llama.cpp (and ik_llama.cpp) on the same GGUF files: prefill (pp) and decode (tg)
# as llama-bench measures them, the engines alternating within each round, medians of ROUNDS
# rounds, then a table of tern's speed as a ratio of each other engine's.
#
# What the numbers mean, alike for both tools: pp = one forward of -p random tokens on an empty
# cache (llama-bench's pp512: one batch of 512), tg = -n forwards of one token each on an empty
# cache, both after an unmeasured warm-up run, -t threads, each run's figure the mean over -r
# repetitions within it.
#
# usage: scripts/bench-engines.sh TERN_BIN FILE.gguf...
#   env LLAMA_CPP=<llama.cpp build/bin>, IK_LLAMA_CPP=<ik_llama.cpp build/bin>, TERN_BASE=<another
#   tern binary, e.g. main before a change> (each optional),
#   ROUNDS (3), THREADS (2), PP (512), TG (64), REPS (3), RTR (1: ik_llama.cpp runs with -rtr 1,
#   its weights repacked at load), OUT (results as JSON lines; default a temporary file).
# Needs python3 for the medians.
set -euo pipefail
tern=${1:?tern binary}
shift
[ $# -gt 0 ] || { echo "usage: $0 TERN_BIN FILE.gguf..." >&2; exit 2; }
rounds=${ROUNDS:-3} threads=${THREADS:-2} pp=${PP:-512} tg=${TG:-64} reps=${REPS:-3}
out=${OUT:-$(mktemp)}
: >"$out"

# One JSON line {engine, file, round, pp, tg} per run.
run_tern() {  # BIN FILE
  "$1" bench-model -m "$2" -p "$pp" -n "$tg" -r "$reps" -t "$threads" --json 2>/dev/null |
    tail -1 | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(json.dumps({"pp": d["pp_tokens_per_s"], "tg": d["tg_tokens_per_s"]}))'
}
run_llama_bench() {  # BIN_DIR FILE [extra flags]
  local bin=$1 file=$2
  shift 2
  "$bin/llama-bench" -m "$file" -p "$pp" -n "$tg" -r "$reps" -t "$threads" -o json "$@" \
    2>/dev/null | python3 -c '
import json, sys
runs = json.load(sys.stdin)
out = {}
for r in runs:
    out["pp" if r["n_prompt"] > 0 else "tg"] = r["avg_ts"]
print(json.dumps(out))'
}

engines=(tern)
[ -n "${TERN_BASE:-}" ] && engines+=(tern-base)
[ -n "${LLAMA_CPP:-}" ] && engines+=(llama.cpp)
[ -n "${IK_LLAMA_CPP:-}" ] && engines+=(ik_llama.cpp)
for round in $(seq "$rounds"); do
  for file in "$@"; do
    for engine in "${engines[@]}"; do
      case $engine in
        tern) r=$(run_tern "$tern" "$file") ;;
        tern-base) r=$(run_tern "$TERN_BASE" "$file") ;;
        llama.cpp) r=$(run_llama_bench "$LLAMA_CPP" "$file") ;;
        ik_llama.cpp)
          flags=()
          [ "${RTR:-1}" = 1 ] && flags=(-rtr 1)
          r=$(run_llama_bench "$IK_LLAMA_CPP" "$file" "${flags[@]}")
          ;;
      esac
      echo "{\"engine\": \"$engine\", \"file\": \"$(basename "$file")\", \"round\": $round, \"run\": $r}" |
        tee -a "$out"
    done
  done
done

python3 - "$out" "$rounds" "$threads" "$pp" "$tg" <<'EOF'
import json, statistics, sys
path, rounds, threads, pp, tg = sys.argv[1:]
runs = [json.loads(l) for l in open(path)]
files = list(dict.fromkeys(r["file"] for r in runs))
engines = list(dict.fromkeys(r["engine"] for r in runs))
med = {}
for f in files:
    for e in engines:
        for k in ("pp", "tg"):
            xs = [r["run"][k] for r in runs if r["file"] == f and r["engine"] == e and k in r["run"]]
            med[f, e, k] = statistics.median(xs) if xs else None
print(f"\nmedians of {rounds} alternating rounds, {threads} threads, tok/s (pp{pp}, tg{tg})")
head = ["file"]
for k in ("tg", "pp"):
    head += [f"{e} {k}" for e in engines] + [f"tern/{e} {k}" for e in engines[1:]]
print("| " + " | ".join(head) + " |")
print("|" + " --- |" * len(head))
for f in files:
    row = [f]
    for k in ("tg", "pp"):
        row += [f"{med[f, e, k]:.1f}" if med[f, e, k] else "-" for e in engines]
        for e in engines[1:]:
            t, o = med[f, "tern", k], med[f, e, k]
            row.append(f"**{t / o:.2f}x**" if t and o else "-")
    print("| " + " | ".join(row) + " |")
EOF
