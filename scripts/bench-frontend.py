#!/usr/bin/env python3
"""What a server's HTTP front end holds: /health latency while N connections sit idle (they sent
part of a request and nothing more, as a slowloris does), and while M streams run. Loopback only,
bounded in count and time. Standard library only.

  scripts/bench-frontend.py --port 8000 [--idle 100,128,200,2000] [--streams 200]
                            [--stream-tokens 64] [--probes 20]

Prints one line per load: the probes answered and their p50 / p99 / max latency in ms (a probe
waits up to 10 s)."""
import argparse
import http.client
import json
import socket
import statistics
import threading
import time


def probe(port, n, timeout=10.0):
    """n GETs of /health, 50 ms apart: latencies in ms, None for no answer within timeout."""
    out = []
    for _ in range(n):
        t0 = time.monotonic()
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            c.request("GET", "/health")
            r = c.getresponse()
            r.read()
            c.close()
            out.append((time.monotonic() - t0) * 1e3 if r.status == 200 else None)
        except OSError:
            out.append(None)
        time.sleep(0.05)
    return out


def summary(label, lat):
    ok = sorted(x for x in lat if x is not None)
    if not ok:
        return f"{label}: 0/{len(lat)} probes answered"
    p99 = ok[min(len(ok) - 1, int(0.99 * (len(ok) - 1) + 0.5))]
    return (f"{label}: {len(ok)}/{len(lat)} probes answered, p50 {statistics.median(ok):.1f} ms, "
            f"p99 {p99:.1f} ms, max {ok[-1]:.1f} ms")


def idle_load(port, n, probes):
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # never the blank line
        socks.append(s)
    time.sleep(0.5)
    lat = probe(port, probes)
    for s in socks:
        s.close()
    time.sleep(1.0)
    return lat


def stream_load(port, n, tokens, probes):
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": tokens, "ignore_eos": True,
                       "stream": True}).encode()
    done = []

    def one():
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
            c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            r = c.getresponse()
            text = r.read().decode(errors="replace")
            done.append(r.status == 200 and "[DONE]" in text)
        except OSError:
            done.append(False)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    lat = probe(port, probes)
    for t in threads:
        t.join()
    return lat, sum(done)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--idle", default="100,128,200,2000")
    p.add_argument("--streams", type=int, default=200)
    p.add_argument("--stream-tokens", type=int, default=64)
    p.add_argument("--probes", type=int, default=20)
    a = p.parse_args()
    print(summary("no load", probe(a.port, a.probes)), flush=True)
    for n in [int(x) for x in a.idle.split(",") if x]:
        print(summary(f"{n} idle connections", idle_load(a.port, n, a.probes)), flush=True)
    if a.streams:
        lat, completed = stream_load(a.port, a.streams, a.stream_tokens, a.probes)
        print(summary(f"{a.streams} streams ({completed} completed)", lat), flush=True)


if __name__ == "__main__":
    main()
