#!/bin/bash
# Packs what bench/gpu/run.sh needs on a GPU machine that cannot reach npm into bench/gpu/kit/
# (ignored by git, carried by the device tool): the node_modules the kit runs with (tsx,
# vitest, cmake-js, node-addon-api and what the engine's packages need; the @kiln/* links
# point into the working tree) and this machine's Node binary, both xz-compressed. Fails when
# the kit and the working tree together pass the device tool's 64 MiB.
#   bash bench/gpu/prepare.sh [PACKAGE...]   # after npm ci, on an x86-64 Linux machine
# PACKAGEs are packed too, with what they need: what a step needs beyond the engine's
# packages (e.g. onnxruntime-node or @kiln/server for a pinning bench that serves through them).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
KIT=$HERE/kit
LIMIT=$((64 * 1024 * 1024))
cd "$ROOT"

[ -d node_modules ] || { echo "prepare: no node_modules here; run npm ci first" >&2; exit 1; }
[ "$(uname -sm)" = "Linux x86_64" ] || { echo "prepare: the GPU machine is x86-64 Linux; pack there-compatible binaries from such a machine" >&2; exit 1; }
mkdir -p "$KIT"

# The packages the kit runs: tsx runs the TypeScript sources, vitest the conformance suite,
# cmake-js and node-addon-api build the addon; the @kiln/* roots bring their npm dependencies
# (the Python engine and the model tools for the rolling-batch step on a Python decoder).
node --import tsx "$HERE/closure.ts" "$ROOT" tsx vitest cmake-js node-addon-api \
  @kiln/engine-libtorch @kiln/testing @kiln/worker-pool @kiln/engine-python @kiln/model-tools \
  "$@" >"$KIT/node_modules.list"
echo "prepare: packing $(wc -l <"$KIT/node_modules.list") node_modules entries"
# Types, source maps, docs and other platforms' binaries are not run there; leaving them out
# keeps the kit small.
tar -cf - --exclude='*.map' --exclude='*.d.ts' --exclude='*.d.mts' --exclude='*.d.cts' \
  --exclude='*.md' --exclude='.vite' --exclude='*/bin/napi-v*/darwin' \
  --exclude='*/bin/napi-v*/win32' --exclude='*/bin/napi-v*/linux/arm64' -T "$KIT/node_modules.list" |
  xz -T0 -6 >"$KIT/node_modules.tar.xz.tmp"
mv "$KIT/node_modules.tar.xz.tmp" "$KIT/node_modules.tar.xz"

# Node itself: the image has none. Compressing takes minutes, so an unchanged one is kept.
NODE_BIN=$(command -v node)
if [ "$(cat "$KIT/node.version" 2>/dev/null)" != "$(node --version)" ] || [ ! -s "$KIT/node.xz" ]; then
  echo "prepare: compressing $NODE_BIN ($(node --version)); this takes a few minutes"
  xz -T0 -6 -c "$NODE_BIN" >"$KIT/node.xz.tmp"
  mv "$KIT/node.xz.tmp" "$KIT/node.xz"
  node --version >"$KIT/node.version"
fi

kit_bytes=$(du -sb "$KIT" | cut -f1)
tree_bytes=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
total=$((kit_bytes + tree_bytes))
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "prepare: kit $(mib "$kit_bytes") + working tree $(mib "$tree_bytes") = $(mib "$total") of the device tool's 64 MiB"
if [ "$total" -gt "$LIMIT" ]; then
  echo "prepare: too large to carry" >&2
  exit 1
fi
echo 'prepare: ready. Device tool: run(command="bash bench/gpu/run.sh", carry=["bench/gpu/kit"], timeout_s=540)'
