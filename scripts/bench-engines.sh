#!/usr/bin/env bash
# tern against llama.cpp (and ik_llama.cpp) on the same GGUF files: prefill (pp) and decode (tg)
# as llama-bench measures them, the engines alternating within each round, medians of ROUNDS
# rounds, then a table of tern's speed as a ratio of each other engine's at the same threads.
#
# What the numbers mean, alike for both tools: pp = one forward of -p random tokens on an empty
# cache (llama-bench's pp512: one batch of 512), tg = -n forwards of one token each on an empty
# cache, both after an unmeasured warm-up run, -t threads, each run's figure the mean over -r
# repetitions within it.
#
# A busy machine: BUSY lists how many cores are kept busy by other programs (a shell loop each,
# as a build or a browser would) while a set of rounds runs; each level gets its own rows.
#
# usage: scripts/bench-engines.sh TERN_BIN FILE.gguf...
#   env LLAMA_CPP=<llama.cpp build/bin>, IK_LLAMA_CPP=<ik_llama.cpp build/bin>, TERN_BASE=<another
#   tern binary, e.g. main before a change> (each optional),
#   ROUNDS (3), THREADS (2; a list such as "1 2": every engine at each), BUSY (0; a list such as
#   "0 1 2"), PP (512), TG (64), REPS (3), RTR (1: ik_llama.cpp runs with -rtr 1, its weights
#   repacked at load), OUT (results as JSON lines; default a temporary file).
# Needs python3 for the medians.
set -euo pipefail
tern=${1:?tern binary}
shift
[ $# -gt 0 ] || { echo "usage: $0 TERN_BIN FILE.gguf..." >&2; exit 2; }
rounds=${ROUNDS:-3} thread_counts=${THREADS:-2} busy_levels=${BUSY:-0}
pp=${PP:-512} tg=${TG:-64} reps=${REPS:-3}
out=${OUT:-$(mktemp)}
: >"$out"

# One JSON line {engine, file, round, pp, tg} per run.
run_tern() {  # BIN FILE THREADS
  "$1" bench-model -m "$2" -p "$pp" -n "$tg" -r "$reps" -t "$3" --json 2>/dev/null |
    tail -1 | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(json.dumps({"pp": d["pp_tokens_per_s"], "tg": d["tg_tokens_per_s"]}))'
}
run_llama_bench() {  # BIN_DIR FILE THREADS [extra flags]
  local bin=$1 file=$2 threads=$3
  shift 3
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
# Keeps N cores busy until stop_busy: what another program on the machine does.
busy_pids=()
start_busy() {
  for _ in $(seq "$1"); do
    sh -c 'while :; do :; done' &
    busy_pids+=($!)
  done
}
stop_busy() {
  [ ${#busy_pids[@]} -eq 0 ] && return
  kill "${busy_pids[@]}" 2>/dev/null || true
  wait "${busy_pids[@]}" 2>/dev/null || true
  busy_pids=()
}
trap stop_busy EXIT

for busy in $busy_levels; do
  start_busy "$busy"
  for round in $(seq "$rounds"); do
    for file in "$@"; do
      for threads in $thread_counts; do
        for engine in "${engines[@]}"; do
          case $engine in
            tern) r=$(run_tern "$tern" "$file" "$threads") ;;
            tern-base) r=$(run_tern "$TERN_BASE" "$file" "$threads") ;;
            llama.cpp) r=$(run_llama_bench "$LLAMA_CPP" "$file" "$threads") ;;
            ik_llama.cpp)
              flags=()
              [ "${RTR:-1}" = 1 ] && flags=(-rtr 1)
              r=$(run_llama_bench "$IK_LLAMA_CPP" "$file" "$threads" "${flags[@]}")
              ;;
          esac
          echo "{\"engine\": \"$engine\", \"file\": \"$(basename "$file")\", \"busy\": $busy, \"threads\": $threads, \"round\": $round, \"run\": $r}" |
            tee -a "$out"
        done
      done
    done
  done
  stop_busy
done

python3 - "$out" "$rounds" "$pp" "$tg" <<'EOF'
import json, statistics, sys
path, rounds, pp, tg = sys.argv[1:]
runs = [json.loads(l) for l in open(path)]
files = list(dict.fromkeys(r["file"] for r in runs))
busy = list(dict.fromkeys(r["busy"] for r in runs))
threads = list(dict.fromkeys(r["threads"] for r in runs))
engines = list(dict.fromkeys(r["engine"] for r in runs))
def median(f, b, e, t, k):
    xs = [r["run"][k] for r in runs
          if (r["file"], r["busy"], r["engine"], r["threads"]) == (f, b, e, t) and k in r["run"]]
    return statistics.median(xs) if xs else None
print(f"\nmedians of {rounds} alternating rounds, tok/s (pp{pp}, tg{tg}); busy: cores kept busy "
      "by a shell loop each")
head = ["file", "busy"]
for k in ("tg", "pp"):
    head += [f"{e} t{t} {k}" for t in threads for e in engines]
    head += [f"tern/{e} t{t} {k}" for t in threads for e in engines[1:]]
print("| " + " | ".join(head) + " |")
print("|" + " --- |" * len(head))
for f in files:
    for b in busy:
        row = [f, str(b)]
        for k in ("tg", "pp"):
            row += [f"{m:.1f}" if (m := median(f, b, e, t, k)) else "-"
                    for t in threads for e in engines]
            for t in threads:
                for e in engines[1:]:
                    n, o = median(f, b, "tern", t, k), median(f, b, e, t, k)
                    row.append(f"**{n / o:.2f}x**" if n and o else "-")
        print("| " + " | ".join(row) + " |")
EOF
