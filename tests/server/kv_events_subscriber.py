#!/usr/bin/env python3
"""A prefix-aware router's subscriber of one tern pod's KV cache events, written from vLLM's
wire format (vllm/distributed/kv_events.py) and llm-d's consumer (pkg/kvevents): a ZMQ SUB
socket, 3-frame messages [topic, 8-byte big-endian sequence, msgpack payload] decoded by
python3-msgpack, a DEALER on the replay endpoint for what was sent before it joined, and an
index of the pod's cached blocks rebuilt from BlockStored / BlockRemoved / AllBlocksCleared.

After each request, the index must hold the chain of the prompt's full blocks with the
prompt's tokens; after POST /reset_prefix_cache it must be empty; the live messages must come
without a gap and equal their replay.

usage: kv_events_subscriber.py PORT ENDPOINT REPLAY_ENDPOINT TOPIC
Prints "kv events subscriber: ok"; exits 1 naming the first broken expectation.
"""
import http.client
import json
import random
import sys
import time

import msgpack
import zmq

PORT, ENDPOINT, REPLAY, TOPIC = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
BLOCK_SIZE = 16


def fail(message):
    print("kv events subscriber: " + message, flush=True)
    sys.exit(1)


def post(path, body):
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    if response.status != 200:
        fail("%s answered %d: %s" % (path, response.status, data[:300]))
    return json.loads(data) if data else None


class Index:
    def __init__(self):
        self.blocks = {}  # hash -> (parent or None, tokens)
        self.cleared = 0

    def apply(self, payload):
        batch = msgpack.unpackb(payload, raw=False)
        if not (isinstance(batch, list) and len(batch) == 3 and isinstance(batch[0], float)
                and isinstance(batch[1], list) and batch[2] == 0):
            fail("not an event batch [ts, events, data_parallel_rank]: %r" % (batch,))
        for event in batch[1]:
            tag = event[0]
            if tag == "BlockStored":
                hashes, parent, tokens, block_size, lora_id, medium, lora_name = event[1:]
                if block_size != BLOCK_SIZE or len(tokens) != len(hashes) * block_size:
                    fail("BlockStored with %d tokens for %d blocks of %d" % (
                        len(tokens), len(hashes), block_size))
                if lora_id is not None or lora_name is not None or medium != "CPU":
                    fail("BlockStored's lora_id, medium, lora_name: %r" % (event[5:],))
                for i, h in enumerate(hashes):
                    if not 0 <= h < 2 ** 64:
                        fail("hash %r is not an unsigned 64-bit integer" % h)
                    self.blocks[h] = (parent, tokens[i * block_size:(i + 1) * block_size])
                    parent = h
            elif tag == "BlockRemoved":
                if event[2] != "CPU":
                    fail("BlockRemoved's medium %r" % event[2])
                for h in event[1]:
                    if self.blocks.pop(h, None) is None:
                        fail("BlockRemoved of a block never stored: %d" % h)
            elif tag == "AllBlocksCleared":
                self.blocks.clear()
                self.cleared += 1
            else:
                fail("unknown event %r" % (event,))

    def holds_chain(self, tokens):
        """Whether the index has every full block of `tokens`, chained from a prompt start."""
        children = {}
        for h, (parent, block) in self.blocks.items():
            children[(parent, tuple(block))] = h
        parent = None
        for start in range(0, len(tokens) - len(tokens) % BLOCK_SIZE, BLOCK_SIZE):
            h = children.get((parent, tuple(tokens[start:start + BLOCK_SIZE])))
            if h is None:
                return False
            parent = h
        return True


def frames_of_live(frames):
    if len(frames) != 3 or len(frames[1]) != 8:
        fail("a live message of %d frames" % len(frames))
    if frames[0].decode() != TOPIC:
        fail("topic %r, expected %r" % (frames[0], TOPIC))
    return int.from_bytes(frames[1], "big"), frames[2]


def replay(context, start):
    dealer = context.socket(zmq.DEALER)
    dealer.connect(REPLAY)
    dealer.send_multipart([b"", start.to_bytes(8, "big")])
    out = {}
    while True:
        if not dealer.poll(10000):
            fail("no answer from the replay endpoint")
        # [empty, topic, sequence, payload]; the end: [empty, empty, -1, empty]
        frames = dealer.recv_multipart()
        if len(frames) != 4 or frames[0] != b"" or len(frames[2]) != 8:
            fail("a replay message of %d frames" % len(frames))
        if frames[2] == (2 ** 64 - 1).to_bytes(8, "big") and frames[3] == b"":
            break
        if frames[1].decode() != TOPIC:
            fail("replayed topic %r" % frames[1])
        out[int.from_bytes(frames[2], "big")] = frames[3]
    dealer.close()
    return out


def main():
    context = zmq.Context()
    sub = context.socket(zmq.SUB)
    sub.connect(ENDPOINT)
    sub.setsockopt(zmq.SUBSCRIBE, b"kv@")
    time.sleep(0.2)

    live = {}  # seq -> payload
    def drain(wait_ms):
        while sub.poll(wait_ms):
            seq, payload = frames_of_live(sub.recv_multipart())
            if live and seq != max(live) + 1:
                fail("a gap: %d after %d" % (seq, max(live)))
            live[seq] = payload
            wait_ms = 100

    rng = random.Random(7)
    shared = [rng.randrange(3, 500) for _ in range(40)]
    prompts = []
    for i in range(12):
        head = shared if i % 3 == 0 else []
        prompts.append(head + [rng.randrange(3, 500) for _ in range(rng.randrange(1, 90))])
    for prompt in prompts:
        post("/v1/completions", {"prompt": prompt, "max_tokens": 4, "temperature": 0})
        drain(2000 if len(prompt) >= BLOCK_SIZE else 100)

    # What was published before the subscription took: the replay fills it in, as llm-d's
    # subscriber asks for it when it joins mid-stream.
    kept = replay(context, 0)
    for seq, payload in live.items():
        if kept.get(seq) != payload:
            fail("replay of %d differs from the live message" % seq)
    if sorted(kept) != list(range(len(kept))):
        fail("replay sequence numbers are not 0..%d" % (len(kept) - 1))
    index = Index()
    for seq in sorted(kept):
        index.apply(kept[seq])
    for i, prompt in enumerate(prompts):
        if not index.holds_chain(prompt):
            fail("the index lacks prompt %d's full blocks" % i)
    if len(index.blocks) < sum(len(p) // BLOCK_SIZE for p in prompts[1:3]):
        fail("too few blocks indexed")

    post("/reset_prefix_cache", {})
    last = max(kept)
    drain(2000)
    for seq in sorted(live):
        if seq > last:
            index.apply(live[seq])
    if index.cleared != 1 or index.blocks:
        fail("after the reset the index holds %d blocks" % len(index.blocks))
    print("kv events subscriber: %d batches (%d live), %d prompts indexed" % (
        len(kept), len(live), len(prompts)))
    print("kv events subscriber: ok")


main()
