#!/bin/bash
# The GPU kit: on a machine with an NVIDIA GPU and a Python torch built with CUDA, in one run
# (about 9½ minutes at most):
#   1. builds the LibTorch addon against that torch and runs the PyTorch engine's conformance
#      suite on the GPU;
#   2. ResNet-50 through Kiln against Python torch on the same GPU (bench/gpu/resnet.ts);
#   3. the pinning bench (bench/tuning/pinning.ts), when this tree has it;
#   4. rolling against request-level batching on a Llama-style torch decoder in a Python step
#      handler on the GPU (bench/rolling-batch/run.ts --python);
#   5. prints every figure again at the end, one `figure:` line each: what ÷ what, its
#      setting, median [min–max].
# Elsewhere it prints `skipped: <reason>` and exits 0.
#
#   bash bench/gpu/run.sh              # on the GPU machine (after bench/gpu/prepare.sh here)
#   bash bench/gpu/run.sh --cpu        # the same steps on the CPU, small, to check the kit
#
# Options: --cpu (= KILN_GPU_KIT_DEVICE=cpu), --build (rebuild the addon on the CPU too; on a
# GPU it is always built), --help. Environment: KILN_GPU_KIT_DEVICE (cuda:0), KILN_GPU_KIT_PYTHON
# (the first of python3, /usr/bin/python3 that imports torch), KILN_GPU_KIT_NODE=kit (use the
# carried Node even when one is installed), KILN_GPU_KIT_BUILD_SECONDS (the build's limit: 240
# on a GPU machine, 900 on the CPU), KILN_GPU_KIT_SECONDS (the whole run's: 570 on a GPU
# machine, 1800 on the CPU). A GPU machine that cannot reach npm needs
# bench/gpu/kit/ from prepare.sh (carried by the device tool; see bench/README, "GPU kit").
# Logs go to $OUT when set (the device tool brings that folder back), else a temporary folder.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
KIT=$HERE/kit
DEVICE=${KILN_GPU_KIT_DEVICE:-cuda:0}
BUILD=auto

for arg in "$@"; do
  case $arg in
    --cpu) DEVICE=cpu ;;
    --build) BUILD=always ;;
    -h | --help)
      sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "run.sh: unknown argument $arg (--cpu, --build, --help)" >&2
      exit 2
      ;;
  esac
done
case $DEVICE in
  cpu | cuda:[0-9]*) ;;
  *)
    echo "run.sh: KILN_GPU_KIT_DEVICE must be cpu or cuda:N, not $DEVICE" >&2
    exit 2
    ;;
esac

skip() {
  echo "skipped: $*"
  exit 0
}

# --- What the machine has: a GPU, a Python torch with CUDA, and its LibTorch. -------------
if [ "$DEVICE" != cpu ]; then
  command -v nvidia-smi >/dev/null || skip "no nvidia-smi on PATH: no NVIDIA GPU here (bash bench/gpu/run.sh --cpu checks the kit on the CPU)"
  nvidia-smi -L >/dev/null 2>&1 || skip "nvidia-smi finds no GPU: $(nvidia-smi -L 2>&1 | head -1)"
fi
pythons=${KILN_GPU_KIT_PYTHON:-python3 /usr/bin/python3}
PYTHON=
for candidate in $pythons; do
  if "$candidate" -c 'import torch' >/dev/null 2>&1; then
    PYTHON=$(command -v "$candidate")
    break
  fi
done
if [ "$DEVICE" != cpu ]; then
  [ -n "$PYTHON" ] || skip "no Python with torch (tried: $pythons; set KILN_GPU_KIT_PYTHON)"
  index=${DEVICE#cuda:}
  "$PYTHON" -c "import sys, torch; sys.exit(0 if torch.version.cuda and torch.cuda.device_count() > $index else 1)" 2>/dev/null ||
    skip "$PYTHON's torch $("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null) has no CUDA or does not see $DEVICE"
else
  [ -n "$PYTHON" ] || skip "no Python with torch (tried: $pythons; set KILN_GPU_KIT_PYTHON)"
fi
TORCH_CMAKE=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
if [ "$DEVICE" != cpu ] && [ ! -f "$TORCH_CMAKE/Torch/TorchConfig.cmake" ]; then
  skip "no CUDA LibTorch: $PYTHON's torch has no $TORCH_CMAKE/Torch/TorchConfig.cmake"
fi

WORK=$(mktemp -d)
LOGS=${OUT:-$WORK}
mkdir -p "$LOGS"
exec > >(tee "$LOGS/gpu-kit.log") 2>&1
TEE_PID=$!
# The log is whole only once tee has drained: close our end and wait for it.
trap 'exec >&- 2>&-; wait "$TEE_PID" 2>/dev/null; rm -rf "$WORK"' EXIT

# --- Node and node_modules: the machine's, or the kit's (npm is out of reach there). -------
unxz_to() { # unxz_to FILE.xz DEST: with xz, or Python's lzma where xz is missing
  if command -v xz >/dev/null; then
    xz -dc "$1" >"$2"
  else
    "$PYTHON" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"
  fi
}
node_fits() { command -v node >/dev/null && node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'; }
if [ "${KILN_GPU_KIT_NODE:-}" = kit ] || ! node_fits; then
  [ -s "$KIT/node.xz" ] || { echo "run.sh: no Node ≥ 20.19 here and no $KIT/node.xz (run bench/gpu/prepare.sh where npm works, carry bench/gpu/kit)"; exit 1; }
  mkdir -p "$WORK/bin"
  unxz_to "$KIT/node.xz" "$WORK/bin/node" && chmod +x "$WORK/bin/node"
  export PATH="$WORK/bin:$PATH"
  echo "node: the kit's $(node --version)"
fi
if [ ! -d "$ROOT/node_modules" ]; then
  [ -s "$KIT/node_modules.tar.xz" ] || { echo "run.sh: no node_modules and no $KIT/node_modules.tar.xz (run bench/gpu/prepare.sh where npm works, carry bench/gpu/kit)"; exit 1; }
  if command -v xz >/dev/null; then
    tar -xJf "$KIT/node_modules.tar.xz" -C "$ROOT"
  else
    "$PYTHON" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$KIT/node_modules.tar.xz" "$ROOT"
  fi
  echo "node_modules: unpacked from the kit"
fi
cd "$ROOT" || exit 1
TS=(node -C @kiln/source --import tsx)

# LibTorch from a pip torch finds CUDA's libraries (nvidia-* wheels) through Python's import
# hooks; a Node process needs them on the loader's path.
NVIDIA_LIBS=$("$PYTHON" -c '
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
print(":".join(sorted({os.path.dirname(p) for p in glob.glob(os.path.join(site, "nvidia", "**", "lib*.so*"), recursive=True)})))' 2>/dev/null)
[ -n "$NVIDIA_LIBS" ] && export LD_LIBRARY_PATH="$NVIDIA_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KILN_BENCH_PYTHON=$PYTHON
# A CUDA LibTorch's CMake files look for the CUDA toolkit (images often leave nvcc off PATH)
# and for the GPU's architecture, which naming spares a probe.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="$PATH:/usr/local/cuda/bin" CUDACXX=/usr/local/cuda/bin/nvcc
fi
if [ "$DEVICE" != cpu ] && [ -z "${TORCH_CUDA_ARCH_LIST:-}" ]; then
  TORCH_CUDA_ARCH_LIST=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
  [ -n "$TORCH_CUDA_ARCH_LIST" ] && export TORCH_CUDA_ARCH_LIST
fi

echo "== GPU kit on $DEVICE: $(nproc) cores, Node $(node --version), $("$PYTHON" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)') ($PYTHON)"
[ "$DEVICE" = cpu ] && echo "== RAN ON THE CPU (--cpu): this checks the kit's steps end to end; its figures are not GPU figures"
[ "$DEVICE" != cpu ] && nvidia-smi -L
failed=()
# Every step's output also goes to steps.log, whose `figure:` lines are printed again at the end.
STEPS_LOG=$WORK/steps.log
: >"$STEPS_LOG"
# The whole run fits 9½ minutes (within one command's 10 on the device machine); a step gets its own limit or
# what is left, whichever is less, and none starts with under 15 s left.
budget=${KILN_GPU_KIT_SECONDS:-$([ "$DEVICE" = cpu ] && echo 1800 || echo 570)}
step() { # step NAME SECONDS COMMAND...: runs COMMAND with a time limit, noting a failure
  local name=$1 limit=$2
  shift 2
  local left=$((budget - SECONDS))
  if [ "$left" -lt 15 ]; then
    echo "== $name: not run, under 15 s of the run's ${budget} s are left"
    failed+=("$name (not run: out of time)")
    return 124
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name"
  local started=$SECONDS
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$STEPS_LOG"
  local rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc after $((SECONDS - started)) s"
  [ "$rc" -eq 0 ] || failed+=("$name (exit $rc)")
  return "$rc"
}
figure() { echo "figure: $*" | tee -a "$STEPS_LOG"; }

# --- 1. The addon against this machine's LibTorch, then the conformance suite on DEVICE. ---
ADDON=$ROOT/native/libtorch/build/Release/kiln_libtorch.node
# A pip torch holds its LibTorch's CMake files; Debian's python3-torch does not (its
# libtorch-dev does, where the build script looks by itself).
torch_source=()
[ -f "$TORCH_CMAKE/Torch/TorchConfig.cmake" ] && torch_source=(KILN_LIBTORCH_PYTHON="$PYTHON")
built=yes
# 16 cores build it in a minute or two; a 2-core machine shared with other work needs more.
build_limit=${KILN_GPU_KIT_BUILD_SECONDS:-$([ "$DEVICE" = cpu ] && echo 900 || echo 240)}
if [ "$DEVICE" != cpu ] || [ "$BUILD" = always ] || [ ! -f "$ADDON" ]; then
  step "1a. build the LibTorch addon against ${torch_source[*]:-the system LibTorch}" "$build_limit" \
    env "${torch_source[@]}" KILN_BUILD_JOBS="$(nproc)" node native/libtorch/scripts/build.mjs --force ||
    built=no
else
  echo "== 1a. build: the CPU check uses the addon already built here, $ADDON (--build rebuilds it)"
fi
export KILN_LIBTORCH_ADDON=$ADDON
if [ $built = no ]; then
  echo "== 1b, 1c and 2 skipped: no addon was built"
elif step "1b. probe the engine" 60 "${TS[@]}" bench/gpu/probe.ts "$DEVICE"; then
  before=$(wc -l <"$STEPS_LOG")
  step "1c. PyTorch engine conformance suite on $DEVICE" 120 \
    env -C packages/engine-libtorch KILN_REQUIRE_ENGINES=PyTorch KILN_CONFORMANCE_DEVICE="$DEVICE" \
    node "$ROOT/node_modules/vitest/vitest.mjs" run src/conformance.test.ts
  tests=$(tail -n +"$((before + 1))" "$STEPS_LOG" | sed 's/\x1b\[[0-9;]*m//g' | grep -E '^ *Tests ' | tail -1 | tr -s ' ')
  figure "PyTorch engine conformance suite ($DEVICE, LibTorch of ${torch_source[*]:-the system}):${tests:- no summary, see above}"

  # --- 2. ResNet-50 through Kiln against Python torch on the same device. -------------------
  if [ "$DEVICE" = cpu ]; then
    resnet=(--device cpu --arch resnet18 --batch 2 --large-batch 4 --segments 2 --forwards 2 --threads 2)
  else
    resnet=(--device "$DEVICE" --arch resnet50 --batch 32 --large-batch 128 --segments 10 --forwards 8 --threads 4)
  fi
  step "2. ResNet through Kiln and Python torch" 200 "${TS[@]}" bench/gpu/resnet.ts "${resnet[@]}"
fi

# --- 3. The pinning bench on this machine's cores. ------------------------------------------
if [ -f bench/tuning/pinning.ts ]; then
  step "3. pinning bench (bench/tuning/pinning.ts) on $(nproc) cores" 100 "${TS[@]}" bench/tuning/pinning.ts
else
  echo "== 3. skipped: bench/tuning/pinning.ts is not in this tree"
fi

# --- 4. Rolling against request-level batching on a Python torch decoder on DEVICE. ---------
# The Llama-style decoder of bench/rolling-batch/python-decoder/model.py (random weights,
# float16 on the GPU) as a Python step handler: rolling batching (max 8 and 16) through a
# generation pool, request-level batching (8) and one at a time stepping it in process; the
# same 64 requests and arrival times for each. The row: rolling 16 ÷ request-level 8 ≥ 3×.
if [ "$DEVICE" = cpu ]; then
  llm=(--layers 2 --hidden 64 --heads 4 --kv-heads 2 --vocab 256 --requests 8 --rounds 1 --device cpu)
else
  llm=(--layers 16 --hidden 2048 --heads 16 --kv-heads 8 --vocab 16000 --requests 64 --rounds 2 --device "gpu${DEVICE#cuda:}")
fi
before=$(wc -l <"$STEPS_LOG")
if step "4. rolling vs request-level batching, a Python torch decoder on $DEVICE" 170 \
  "${TS[@]}" bench/rolling-batch/run.ts --python "${llm[@]}"; then
  rolling=$(tail -n +"$((before + 1))" "$STEPS_LOG" | grep -a -E '^rolling \(max 16\) vs request-level \(batch 8\), tokens/s' | tail -1)
  figure "${rolling:-rolling vs request-level: no ratio printed, see above} (${llm[*]})"
fi

# --- 5. Every figure together, for bench/README's GPU rows. ---------------------------------
echo "== figures on $DEVICE$([ "$DEVICE" = cpu ] && echo ', RAN ON THE CPU: not GPU figures')"
grep -a '^figure:' "$STEPS_LOG"
if [ ${#failed[@]} -gt 0 ]; then
  printf '== failed: %s\n' "${failed[@]}"
  exit 1
fi
echo "== done"
