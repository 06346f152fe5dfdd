#!/usr/bin/env python3
"""The load of scripts/soak.sh: 16 clients, each looping over a random request (streamed or not,
8 to 128 tokens, chat or completion), a quarter of which hang up midway; once a minute, the
server's RSS, file descriptors and threads (from /proc) and the minute's latencies. Standard
library only; loopback only."""
import argparse
import http.client
import json
import os
import random
import threading
import time

lock = threading.Lock()
latencies, counts = [], {"ok": 0, "cut": 0, "failed": 0}


def one_request(port, rng):
    streamed = rng.random() < 0.6
    body = {"max_tokens": rng.choice([8, 32, 128]), "ignore_eos": True, "stream": streamed,
            "prompt": "Once upon a time " * rng.randint(1, 40)}
    cut = rng.random() < 0.25
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        if cut and not streamed:
            time.sleep(rng.random() * 0.2)
            return "cut", None
        r = c.getresponse()
        if cut:
            r.read(rng.randint(1, 200))
            return "cut", None
        r.read()
        return ("ok" if r.status == 200 else "failed"), (time.monotonic() - t0) * 1e3
    except OSError:
        return "failed", None
    finally:
        c.close()


def client(port, seed, stop):
    rng = random.Random(seed)
    while not stop.is_set():
        kind, ms = one_request(port, rng)
        with lock:
            counts[kind] += 1
            if ms is not None:
                latencies.append(ms)


def proc_stats(pid):
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    rss_mib = int(status["VmRSS"].split()[0]) / 1024
    return rss_mib, len(os.listdir(f"/proc/{pid}/fd")), int(status["Threads"])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--duration", type=float, default=1200)
    p.add_argument("--clients", type=int, default=16)
    a = p.parse_args()
    stop = threading.Event()
    threads = [threading.Thread(target=client, args=(a.port, i, stop)) for i in range(a.clients)]
    for t in threads:
        t.start()
    start = time.monotonic()
    print("minute  rss_mib  fds  threads  ok  cut  failed  p50_ms  p99_ms", flush=True)
    minute = 0
    while time.monotonic() - start < a.duration:
        time.sleep(min(60, a.duration - (time.monotonic() - start)))
        minute += 1
        with lock:
            lat = sorted(latencies)
            latencies.clear()
            c = dict(counts)
            for k in counts:
                counts[k] = 0
        rss, fds, nthreads = proc_stats(a.pid)
        p50 = lat[len(lat) // 2] if lat else float("nan")
        p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan")
        print(f"{minute:6d}  {rss:7.1f}  {fds:3d}  {nthreads:7d}  {c['ok']:3d}  {c['cut']:3d}  "
              f"{c['failed']:6d}  {p50:6.0f}  {p99:6.0f}", flush=True)
    stop.set()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
