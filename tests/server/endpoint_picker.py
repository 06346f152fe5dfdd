#!/usr/bin/env python3
"""An endpoint picker's view of one tern pod, written from the Gateway API Inference
Extension's model server protocol (docs/proposals/003-model-server-protocol) and llm-d's
core metrics extractor: /metrics is polled every 50 ms while a burst of streams runs, every
scrape is parsed by prometheus_client's text parser (what production-stack's router uses;
one unparsable line fails the scrape, as the EPP's expfmt parser does), and the vLLM names
the EPP reads must be there, with values that follow the load.

usage: endpoint_picker.py PORT MODEL_NAME NUM_GPU_BLOCKS STREAMS MAX_TOKENS
Prints "endpoint picker: ok" and a summary; exits 1 naming the first broken expectation.
"""
import http.client
import json
import sys
import threading
import time

from prometheus_client.parser import text_string_to_metric_families

PORT, MODEL = int(sys.argv[1]), sys.argv[2]
NUM_GPU_BLOCKS, STREAMS, MAX_TOKENS = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
POLL_SECONDS = 0.05  # the EPP's --refresh-metrics-interval default (and minimum)


def fail(message):
    print("endpoint picker: " + message, flush=True)
    sys.exit(1)


def scrape():
    """One poll: the page's families by name, and how long the scrape took."""
    start = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    conn.request("GET", "/metrics")
    response = conn.getresponse()
    text = response.read().decode("utf-8")
    conn.close()
    seconds = time.monotonic() - start
    if response.status != 200:
        fail("/metrics answered %d" % response.status)
    if not response.getheader("Content-Type", "").startswith("text/plain; version=0.0.4"):
        fail("/metrics is not text format 0.0.4: " + response.getheader("Content-Type", ""))
    try:
        families = {f.name: f for f in text_string_to_metric_families(text)}
    except Exception as e:  # the parser's ValueError and friends: a saturated pod to the EPP
        fail("unparsable scrape (%s):\n%s" % (e, text))
    for f in families.values():
        if f.type == "unknown":
            fail("%s has no # TYPE" % f.name)
        for s in f.samples:
            if f.name.startswith("vllm:") and s.labels.get("model_name") != MODEL:
                fail("%s without model_name=%s: %s" % (s.name, MODEL, s.labels))
    return families, seconds


def value(families, name, **labels):
    """The EPP's rule: the first series of `name` whose labels include `labels` (a counter's
    family is named without _total by the parser; its samples keep it)."""
    for family in families.values():
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s
    fail("no %s series with %s on /metrics" % (name, labels))


def stream_one(index, errors):
    body = json.dumps({"model": MODEL, "prompt": "Once upon a time %d" % index,
                       "max_tokens": MAX_TOKENS, "ignore_eos": True, "stream": True})
    try:
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=600)
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read().decode("utf-8")
        if response.status != 200 or not data.rstrip().endswith("data: [DONE]"):
            errors.append("stream %d: %d %s" % (index, response.status, data[-200:]))
    except Exception as e:
        errors.append("stream %d: %s" % (index, e))


def main():
    families, _ = scrape()
    cache = value(families, "vllm:cache_config_info")
    if int(cache.labels["num_gpu_blocks"]) != NUM_GPU_BLOCKS:
        fail("num_gpu_blocks %s, the engine has %d" % (cache.labels["num_gpu_blocks"],
                                                       NUM_GPU_BLOCKS))
    if int(cache.labels["block_size"]) != 16:
        fail("block_size " + cache.labels["block_size"])

    errors = []
    streams = [threading.Thread(target=stream_one, args=(i, errors)) for i in range(STREAMS)]
    for t in streams:
        t.start()
    polls = []  # (waiting, running, usage, queries, seconds)
    while any(t.is_alive() for t in streams):
        families, seconds = scrape()
        polls.append((value(families, "vllm:num_requests_waiting").value,
                      value(families, "vllm:num_requests_running").value,
                      value(families, "vllm:kv_cache_usage_perc").value,
                      value(families, "vllm:prefix_cache_queries_total").value, seconds))
        time.sleep(POLL_SECONDS)
    for t in streams:
        t.join()
    if errors:
        fail("; ".join(errors))

    if len(polls) < 5:
        fail("only %d scrapes while the streams ran" % len(polls))
    for waiting, running, usage, _, _ in polls:
        if not 0.0 <= usage <= 1.0:
            fail("kv_cache_usage_perc %g outside [0, 1]" % usage)
        if waiting < 0 or running < 0:
            fail("negative gauges")
    if max(p[0] for p in polls) <= 0:
        fail("num_requests_waiting never above 0 under a burst of %d" % STREAMS)
    if max(p[1] for p in polls) <= 0 or max(p[2] for p in polls) <= 0:
        fail("num_requests_running or kv_cache_usage_perc never above 0 under load")
    queries = [p[3] for p in polls]
    if queries != sorted(queries):
        fail("prefix_cache_queries_total went down")

    families, _ = scrape()
    if value(families, "vllm:num_requests_running").value != 0 or \
            value(families, "vllm:num_requests_waiting").value != 0:
        fail("requests still counted after the streams ended")
    done = value(families, "vllm:request_success_total", finished_reason="length").value
    if done != STREAMS:
        fail("request_success_total{finished_reason=length} %g, expected %d" % (done, STREAMS))
    for histogram in ("vllm:time_to_first_token_seconds", "vllm:request_prompt_tokens",
                      "vllm:request_generation_tokens", "vllm:e2e_request_latency_seconds",
                      "vllm:request_time_per_output_token_seconds"):
        if families[histogram].type != "histogram":
            fail(histogram + " is not a histogram")
        if value(families, histogram + "_count").value != STREAMS:
            fail(histogram + "_count is not %d" % STREAMS)
        if value(families, histogram + "_bucket", le="+Inf").value != STREAMS:
            fail(histogram + "_bucket{le=+Inf} is not %d" % STREAMS)
    generated = value(families, "vllm:request_generation_tokens_sum").value
    if generated != STREAMS * MAX_TOKENS:
        fail("request_generation_tokens_sum %g, expected %d" % (generated, STREAMS * MAX_TOKENS))
    # Each decode step gives each stream one token: MAX_TOKENS - 1 gaps per stream.
    gaps = value(families, "vllm:time_per_output_token_seconds_count").value
    if gaps != STREAMS * (MAX_TOKENS - 1):
        fail("time_per_output_token_seconds_count %g" % gaps)
    if value(families, "vllm:prefix_cache_queries_total").value <= 0:
        fail("no prefix cache queries counted")

    seconds = sorted(p[4] for p in polls)
    print("endpoint picker: %d scrapes, max waiting %d, max running %d, max usage %.3f, "
          "scrape median %.1f ms, max %.1f ms" % (
              len(polls), max(p[0] for p in polls), max(p[1] for p in polls),
              max(p[2] for p in polls), 1000 * seconds[len(seconds) // 2], 1000 * seconds[-1]))
    print("endpoint picker: ok")


main()
