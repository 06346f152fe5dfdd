#!/usr/bin/env python3
"""Checks deploy/llm-d/ as the cluster would read it (no cluster here, and kubeconform is not
in Debian): every file parses as YAML, the kustomization lists them, each object has the fields
its kind needs, the pods carry the labels llm-d's endpoint picker reads, the InferencePool
selects them on port 8000, probes ask /health on the port tern serves, tern's arguments are
flags `tern serve --help` knows with JSON configs tern accepts, and the metric KEDA queries is
one tern's /metrics serves.

usage: check_manifests.py DEPLOY_DIR SERVE_HELP_FILE METRICS_FILE
Prints "manifests: ok"; exits 1 naming the first problem.
"""
import json
import os
import re
import sys

import yaml

DEPLOY, HELP, METRICS = sys.argv[1], open(sys.argv[2]).read(), open(sys.argv[3]).read()
KV_EVENTS_KEYS = {"enable_kv_cache_events", "publisher", "endpoint", "replay_endpoint",
                  "buffer_steps", "hwm", "max_queue_size", "topic"}


def fail(message):
    print("manifests: " + message, flush=True)
    sys.exit(1)


def need(obj, path, what):
    node = obj
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            fail("%s has no %s" % (what, path))
        node = node[key]
    return node


kustomization = yaml.safe_load(open(os.path.join(DEPLOY, "kustomization.yaml")))
files = sorted(f for f in os.listdir(DEPLOY) if f.endswith(".yaml") and f != "kustomization.yaml")
if sorted(kustomization.get("resources", [])) != files:
    fail("kustomization resources %s are not the files %s" % (kustomization.get("resources"), files))
images = {i["name"] for i in kustomization.get("images", [])}

objects = {}
for f in files:
    for doc in yaml.safe_load_all(open(os.path.join(DEPLOY, f))):
        for field in ("apiVersion", "kind", "metadata"):
            if field not in doc:
                fail("%s: an object without %s" % (f, field))
        objects[(doc["kind"], need(doc, "metadata.name", f))] = doc
kinds = sorted(kind for kind, _ in objects)
if kinds != ["Deployment", "Deployment", "InferencePool", "PodMonitor", "ScaledObject"]:
    fail("unexpected kinds %s" % kinds)

pool = objects[("InferencePool", "tern-pool")]
if pool["apiVersion"] != "inference.networking.k8s.io/v1":
    fail("InferencePool apiVersion " + pool["apiVersion"])
selector = need(pool, "spec.selector.matchLabels", "InferencePool")
if need(pool, "spec.targetPorts", "InferencePool") != [{"number": 8000}]:
    fail("InferencePool targetPorts are not [8000]")
need(pool, "spec.endpointPickerRef.name", "InferencePool")
need(pool, "spec.endpointPickerRef.port.number", "InferencePool")


def flags_of(args):
    out = {}
    for a in args[1:]:
        if not a.startswith("--"):
            continue
        name, _, value = a.partition("=")
        out[name] = value
    return out


roles = set()
for (kind, name), d in objects.items():
    if kind != "Deployment":
        continue
    labels = need(d, "spec.template.metadata.labels", name)
    if need(d, "spec.selector.matchLabels", name).items() - labels.items():
        fail(name + "'s selector does not select its own pods")
    if selector.items() - labels.items():
        fail(name + "'s pods are not in the InferencePool")
    if labels.get("llm-d.ai/engine-type") != "vllm":
        fail(name + ": llm-d.ai/engine-type is not vllm (tern serves vLLM's metric names)")
    role = labels.get("llm-d.ai/role")
    roles.add(role)
    containers = {c["name"]: c for c in need(d, "spec.template.spec.containers", name)}
    for c in containers.values():
        if c["image"] not in images:
            fail("%s: image %s is not in the kustomization's images" % (name, c["image"]))
    tern = containers.get("tern") or fail(name + " has no tern container")
    args = tern["args"]
    if args[0] != "serve":
        fail(name + ": tern's first argument is not serve")
    flags = flags_of(args)
    for flag in flags:
        if not re.search(r"(^|[\s,])" + re.escape(flag) + r"(?=\s|$)", HELP, re.M):
            fail("%s: %s is not a flag of tern serve" % (name, flag))
    if flags.get("--metrics-compat") != "vllm":
        fail(name + ": --metrics-compat is not vllm")
    port = int(flags["--port"])
    if {"name": "http", "containerPort": port} not in tern["ports"]:
        fail("%s: tern's http port is not %d" % (name, port))
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if need(tern, probe + ".httpGet", name) != {"path": "/health", "port": port}:
            fail("%s: the %s is not GET /health on %d" % (name, probe, port))
    events = json.loads(flags["--kv-events-config"].replace("$(POD_IP)", "10.0.0.1"))
    if events.keys() - KV_EVENTS_KEYS or not events.get("enable_kv_cache_events"):
        fail(name + ": --kv-events-config " + flags["--kv-events-config"])
    if not events["topic"].startswith("kv@$(POD_IP)@".replace("$(POD_IP)", "10.0.0.1")):
        fail(name + ": the events topic is not kv@<pod ip>@<model>")
    transfer = json.loads(flags["--kv-transfer-config"].replace("$(POD_IP)", "10.0.0.1"))
    env = {e["name"] for e in tern.get("env", [])}
    if "$(POD_IP)" in " ".join(args) and "POD_IP" not in env:
        fail(name + ": $(POD_IP) without a POD_IP variable")
    if role == "prefill":
        if transfer["kv_role"] != "kv_producer" or port != 8000:
            fail(name + ": a prefill pod must be a kv_producer serving on 8000")
    elif role == "decode":
        if transfer["kv_role"] != "kv_consumer":
            fail(name + ": a decode pod must be a kv_consumer")
        sidecar = containers.get("routing-sidecar") or fail(name + " has no routing sidecar")
        s = flags_of([""] + sidecar["args"])
        if s.get("--port") != "8000" or int(s.get("--model-server-port", 0)) != port:
            fail(name + ": the sidecar must listen on 8000 and forward to tern's port")
        if s.get("--kv-connector") != "nixlv2":
            fail(name + ": the sidecar's --kv-connector is not nixlv2")
    else:
        fail("%s: llm-d.ai/role %r" % (name, role))
if roles != {"prefill", "decode"}:
    fail("roles %s" % roles)

monitor = objects[("PodMonitor", "tern")]
for endpoint in need(monitor, "spec.podMetricsEndpoints", "PodMonitor"):
    if endpoint.get("port") != "http" or endpoint.get("path") != "/metrics":
        fail("PodMonitor scrapes %s" % endpoint)

scaled = objects[("ScaledObject", "tern-decode")]
target = need(scaled, "spec.scaleTargetRef.name", "ScaledObject")
if ("Deployment", target) not in objects:
    fail("ScaledObject scales %s, which is not here" % target)
trigger = need(scaled, "spec.triggers", "ScaledObject")[0]
if trigger["type"] != "prometheus" or not isinstance(trigger["metadata"]["threshold"], str):
    fail("the KEDA trigger is not prometheus with a string threshold")
query = trigger["metadata"]["query"]
names = re.findall(r"vllm:[a-z_]+", query)
if names != ["vllm:num_requests_running"]:
    fail("KEDA's query reads %s" % names)
for n in names:
    if not re.search("^" + re.escape(n) + r"\{", METRICS, re.M):
        fail(n + " is not on tern's /metrics")
print("manifests: %d objects, roles %s" % (len(objects), sorted(roles)))
print("manifests: ok")
