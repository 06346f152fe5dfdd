#!/usr/bin/env bash
# Installs the Debian packages tern needs to build, test and benchmark, only those missing.
# Idempotent; runs as root or through sudo. Nothing is downloaded but Debian packages.
set -euo pipefail

packages=(
  cmake ninja-build g++ make pkg-config
  clang libclang-rt-14-dev          # libFuzzer and the sanitizer runtime
  clang-format                      # make format / format-check (CI fails on drift)
  libomp-dev                        # OpenMP for the kernels (libgomp comes with g++)
  libpcre2-dev                      # tokenizer split patterns (Unicode classes, JIT)
  libutf8proc-dev                   # NFC normalisation (Qwen tokenizer)
  nlohmann-json3-dev                # JSON
  libxxhash-dev                     # prefix-cache block keys
  libcpp-httplib-dev                # HTTP clients: tern router's backend calls, the tests
  libboost-dev                      # HTTP server: Boost.Asio's event loop, Boost.Beast's parser
  libcli11-dev                      # command line
  libgtest-dev libgmock-dev         # tests
  libbenchmark-dev                  # micro-benchmarks
  python3-jinja2                    # renders expected chat templates in test-data scripts
  libcurl4-openssl-dev              # Hugging Face hub downloads
  libucx-dev                        # KV-cache transfer between prefill and decode instances (UCX)
  libzmq3-dev libmsgpack-dev        # KV cache events (vLLM's wire format, for llm-d's routers)
  python3-zmq python3-msgpack       # the tests' subscriber of those events
  python3-prometheus-client         # the tests' endpoint picker parses /metrics with it
  python3-yaml                      # the tests read the Kubernetes manifests of deploy/
  libvulkan-dev glslc               # the Vulkan backend: loader and headers, GLSL → SPIR-V
  mesa-vulkan-drivers               # lavapipe, a Vulkan driver on the CPU: the Vulkan tests' device
  vulkan-validationlayers           # Khronos' validation layer over the Vulkan tests
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Node.js and npm run the openai-client test of tern serve. A machine may have them from
# another source (nodesource's nodejs bundles npm, and Debian's npm conflicts with it), so
# look for the commands, not the packages.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  missing+=(nodejs npm)
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
