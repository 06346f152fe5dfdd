#!/usr/bin/env bash
# Installs what cross-building tern for 64-bit ARM (make build-arm64) and running it under
# user-mode emulation (make test-arm64) need, from Debian only: the aarch64 cross compiler,
# qemu-user-static, and tern's libraries for arm64 through multiarch (dpkg's foreign
# architecture). Idempotent; runs as root or through sudo.
set -euo pipefail

packages=(
  g++-aarch64-linux-gnu qemu-user-static
  libc6:arm64 libstdc++6:arm64 libgomp1:arm64   # what the emulated binary loads at run time
  libpcre2-dev:arm64 libutf8proc-dev:arm64 libxxhash-dev:arm64 libcpp-httplib-dev:arm64
  libcurl4-openssl-dev:arm64 libucx-dev:arm64 libzmq3-dev:arm64 libmsgpack-dev:arm64
  libgtest-dev:arm64   # the kernel tests that run emulated
)

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-arm64-deps: all packages present"
  exit 0
fi

echo "install-arm64-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  "${sudo_cmd[@]}" dpkg --add-architecture arm64
fi
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
