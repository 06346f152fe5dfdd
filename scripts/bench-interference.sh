#!/usr/bin/env bash
# The interference experiment of prefill/decode disaggregation (issue 16): short streams at a
# steady rate while long prompts arrive now and then, on the same two cores in every setup:
#   whole      one instance, whole prefill (--no-enable-chunked-prefill), both cores
#   chunkedN   one instance, chunked prefill at a budget of N tokens (--max-step-ms 0), both cores
#   stepN      chunked512 with each step sized to about N ms as well (--max-step-ms N; tern
#              serve's default, auto, is step200 here)
#   pd         a prefill and a decode instance, one core each, behind tern router
#   pdshared   the same two instances on both cores, two threads each, the prefill instance's
#              compute at a lower CPU priority (--compute-nice PD_NICE, 19 unless set): decode
#              takes the cores when it has work, prefill the time decode leaves (or, at a
#              smaller nice value, a share of it); its KV transfers keep the normal priority
#   pdshort    pdshared, with the router sending prompts under PD_MIN_PROMPT tokens (512 unless
#              set) straight to the decode instance (--disagg-min-prompt-tokens): the short
#              streams are prefilled there, in one step each, and only the long prompts move
#   replicas   two `both` instances, one core each, behind tern router (least outstanding)
# Each setup's `tern bench serve` report (TTFT, ITL p50/p99 and the worst gap of the streams,
# the long prompts' TTFT), its result JSON and ITL timeline SVG go to WORK_DIR/<setup>.*; the
# KV transfer's bytes and seconds come from the instances' /metrics.
# usage: scripts/bench-interference.sh BUILD_DIR MODEL.gguf WORK_DIR
#   e.g. a Qwen3-0.6B shape with dummy Q4_0 weights (its prefill of 3,000 tokens takes seconds).
# Env: SHORT (50 streams), RATE (0.2/s), SHORT_IN/SHORT_OUT (128/64), LONG (3), LONG_IN (2000),
#      LONG_OUT (16), LONG_RATE (0.0125/s), BUDGETS ("512 128"), PD_NICE (19), PD_MIN_PROMPT
#      (512), PD_PREFILL_THREADS (the prefill instance's threads in pdshared/pdshort; 2), SETUPS
#      (all).
# The defaults are a load two cores carry (~12 output tokens/s, ~5 minutes a setup): at 0.25
# requests/s of 128 out, a Qwen3-0.6B shape in Q4_0 queued 39 of 40 requests at once, and the
# figures then measure the queue rather than the interference. Since decode runs at ~15 ms a
# token (AVX-512 VNNI), a default stream lasts about a second and a long prefill often meets no
# stream to stall; RATE=0.5 SHORT=125 SHORT_OUT=128 (~7 minutes a setup) keeps up to 9-20
# streams in flight on one instance and 24 on P + D's one decode core.
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
model=${2:?model}
work=${3:?work dir}
tern="$build/tern"
mkdir -p "$work"
short=${SHORT:-50} rate=${RATE:-0.2} short_in=${SHORT_IN:-128} short_out=${SHORT_OUT:-64}
long=${LONG:-3} long_in=${LONG_IN:-2000} long_out=${LONG_OUT:-16} long_rate=${LONG_RATE:-0.0125}
budgets=${BUDGETS:-512 128}
setups=${SETUPS:-whole $(for b in $budgets; do printf 'chunked%s ' "$b"; done)pd pdshared pdshort replicas}
common=(--max-model-len 4096 --kv-cache-memory 2GiB --disable-log-stats --served-model-name m)
pids=()

wait_healthy() {
  for _ in $(seq 600); do curl -sf "http://127.0.0.1:$1/health" >/dev/null && return; sleep 0.2; done
  echo "bench-interference: nothing answers on port $1" >&2
  exit 1
}
# start CORES PORT ARGS…: a tern serve pinned to CORES, with $threads threads (one per core
# unless set)
start() {
  local cores=$1 port=$2
  shift 2
  taskset -c "$cores" "$tern" serve "$model" --port "$port" \
    --threads "${threads:-$(($(tr -cd , <<<"$cores" | wc -c) + 1))}" "${common[@]}" "$@" \
    2>>"$work/servers.log" &
  pids+=($!)
  wait_healthy "$port"
}
stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
trap stop_all EXIT
bench() {  # bench NAME URL
  "$tern" bench serve --base-url "$2" --model m --tokenizer "$model" --num-prompts "$short" \
    --request-rate "$rate" --random-input-len "$short_in" --random-output-len "$short_out" \
    --long-num-prompts "$long" --long-input-len "$long_in" --long-output-len "$long_out" \
    --long-request-rate "$long_rate" --metric-percentiles 50,99 --disable-tqdm \
    --result-filename "$work/$1.json" --plot-itl-timeline "$work/$1.svg" | tee "$work/$1.txt"
}
router() {  # router ARGS…: tern router on port 8100
  "$tern" router "$@" --port 8100 2>>"$work/servers.log" &
  pids+=($!)
  wait_healthy 8100
}
kv_metrics() {  # kv_metrics NAME PORT…: the transfer's counters of each instance
  for port in "${@:2}"; do
    echo "== $1 :$port" >>"$work/kv-metrics.txt"
    curl -s "http://127.0.0.1:$port/metrics" | grep -E '^tern:kv_transfer_' >>"$work/kv-metrics.txt" || true
  done
}

for setup in $setups; do
  echo "== $setup"
  case $setup in
    whole)
      start 0,1 8101 --no-enable-chunked-prefill
      bench whole http://127.0.0.1:8101 ;;
    chunked*)
      start 0,1 8101 --max-num-batched-tokens "${setup#chunked}" --max-step-ms 0
      bench "$setup" http://127.0.0.1:8101 ;;
    step*)
      start 0,1 8101 --max-num-batched-tokens 512 --max-step-ms "${setup#step}"
      bench "$setup" http://127.0.0.1:8101 ;;
    pd)
      start 0 8101 --kv-transfer-config '{"kv_connector":"UcxConnector","kv_role":"kv_producer","kv_port":14579}'
      start 1 8102 --role decode
      router --prefill http://127.0.0.1:8101 --decode http://127.0.0.1:8102
      bench pd http://127.0.0.1:8100
      kv_metrics pd 8101 8102 ;;
    pdshared | pdshort)
      threads=${PD_PREFILL_THREADS:-} start 0,1 8101 --compute-nice "${PD_NICE:-19}" \
        --kv-transfer-config '{"kv_connector":"UcxConnector","kv_role":"kv_producer","kv_port":14579}'
      start 0,1 8102 --role decode
      if [ "$setup" = pdshort ]; then
        router --prefill http://127.0.0.1:8101 --decode http://127.0.0.1:8102 \
          --disagg-min-prompt-tokens "${PD_MIN_PROMPT:-512}"
      else
        router --prefill http://127.0.0.1:8101 --decode http://127.0.0.1:8102
      fi
      bench "$setup" http://127.0.0.1:8100
      kv_metrics "$setup" 8101 8102 ;;
    replicas)
      start 0 8101
      start 1 8102
      router --backend http://127.0.0.1:8101 http://127.0.0.1:8102 --policy least_outstanding
      bench replicas http://127.0.0.1:8100 ;;
    *) echo "bench-interference: unknown setup $setup" >&2; exit 1 ;;
  esac
  stop_all
done
