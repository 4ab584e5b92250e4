#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine with Node 20 for Kiln: the Debian packages the engines and
# tests use, then the npm workspace (which builds the native addons when their libraries exist).
set -euo pipefail
cd "$(dirname "$0")/.."

export DEBIAN_FRONTEND=noninteractive
# onnxruntime-node's install script would fetch GPU providers from outside the npm registry.
export ONNXRUNTIME_NODE_INSTALL=skip

packages=(
  cmake g++ make         # native addons (cmake-js)
  libtorch-dev           # LibTorch engine
  libopenblas0-pthread   # faster BLAS for LibTorch's non-oneDNN paths
  python3-torch python3-torchvision python3-numpy python3-pil  # TorchScript fixtures, Python baselines, numpy clients
  chromium               # headless check of the benchmark's HTML report
  wrk                    # HTTP load client for bench/server
  curl                   # the client the README and the streaming tests use
  prometheus             # promtool, which checks the /metrics exposition
  python3-grpcio python3-grpc-tools  # independent v2 gRPC client (stubs generated in tests)
  python3-fastapi python3-uvicorn    # bench/python-mode's FastAPI + uvicorn baseline
  haproxy                # load balancer of the scale-out check (deploy/scale-out)
  bible-kjv              # public-domain training text of the tiny GPT (tools/model-tools)
  libjemalloc2 libtcmalloc-minimal4  # allocators cpu_launcher_args / option.allocator preload
)
if [ "${KILN_SKIP_APT:-}" != "1" ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  missing=()
  for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ "${#missing[@]}" -gt 0 ]; then
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

npm ci --no-audit --no-fund
