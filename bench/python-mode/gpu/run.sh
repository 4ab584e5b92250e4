#!/bin/bash
# Python mode on a GPU: one torchvision ResNet-18 handler (random weights, seed 0) served by
# `kiln serve` three ways — on the CPU, on gpu0, and on gpu0 with batch_size=8 — then the
# client checks that the answers agree and alternates throughput rounds between the three.
#   KILN="npx kiln" PYTHON=python3 bash bench/python-mode/gpu/run.sh
# Needs an NVIDIA GPU and a python3 with torch (CUDA) and torchvision.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
KILN=${KILN:-npx kiln}
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d)
SERVER=
trap '[ -n "$SERVER" ] && kill $SERVER 2>/dev/null; rm -rf "$WORK"' EXIT
if ! ls /dev | grep -qE '^nvidia[0-9]+$'; then
  echo "skipped: no NVIDIA GPU here (/dev/nvidiaN)"
  exit 0
fi
ARGS=()
for spec in "rcpu:load_on_devices=cpu" "rgpu:load_on_devices=gpu0" \
  "rgpub:load_on_devices=gpu0 batch_size=8 max_batch_delay=2"; do
  name=${spec%%:*}
  mkdir -p "$WORK/$name"
  cp "$HERE/model.py" "$WORK/$name/"
  for line in ${spec#*:} "option.pythonExecutable=$(command -v "$PYTHON")"; do
    echo "$line" >>"$WORK/$name/serving.properties"
  done
  ARGS+=(-m "$name=file://$WORK/$name")
done
KILN_DISABLE_TOKEN_AUTHORIZATION=true $KILN serve "${ARGS[@]}" \
  --inference-address http://127.0.0.1:18080 --management-address http://127.0.0.1:18081 \
  --metrics-address http://127.0.0.1:18082 >"$WORK/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 1 180); do
  [ "$(grep -c READY "$WORK/server.log")" -ge 3 ] && break
  grep -q FAILED "$WORK/server.log" && break
  sleep 1
done
grep -E "READY|FAILED" "$WORK/server.log"
nvidia-smi -L
node "$HERE/client.mjs" http://127.0.0.1:18080 http://127.0.0.1:18081
curl -s http://127.0.0.1:18082/metrics | grep -E '^kiln_python_(handler|ipc)_seconds_(sum|count)'
