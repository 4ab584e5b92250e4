"""The Python baseline: Python torch running the same TorchScript module in a plain loop.

    python3 bench/libtorch/python_loop.py MODEL.pt THREADS BATCH [DEVICE] [COPIES] [FROZEN]
DEVICE is torch's name (cpu, cuda:0; default cpu). The input lives in host memory, as a
server receives it, and each forward's output is brought back to it. COPIES:
  plain           x.to(device), forward, .cpu(): what a plain Python server does (default)
  pinned-streams  page-locked input and output buffers, copies queued without waiting on two
                  side streams taking turns, so one forward's copies overlap the other's
                  compute (on the CPU: the same loop without pinning or streams)
FROZEN: `frozen` runs the module as torch's docs advise for inference,
`torch.jit.optimize_for_inference(torch.jit.freeze(module))`; `as-loaded` (default) as loaded.
Loads the module, prints "ready", then for each line "N" on stdin runs N forwards and prints
one JSON line {"ms": [per-forward milliseconds...]}; an empty line or EOF ends it. In
pinned-streams mode forwards overlap, so each is given the mean of the segment.
"""
import contextlib
import json
import sys
import time

import torch

path, threads, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
device = torch.device(sys.argv[4] if len(sys.argv) > 4 else "cpu")
copies = sys.argv[5] if len(sys.argv) > 5 else "plain"
if copies not in ("plain", "pinned-streams"):
    sys.exit(f"unknown copies mode {copies!r} (plain, pinned-streams)")
frozen = sys.argv[6] if len(sys.argv) > 6 else "as-loaded"
if frozen not in ("as-loaded", "frozen"):
    sys.exit(f"unknown module mode {frozen!r} (as-loaded, frozen)")
cuda = device.type == "cuda"
torch.set_num_threads(threads)
module = torch.jit.load(path, map_location=device).eval()
if frozen == "frozen":
    module = torch.jit.optimize_for_inference(torch.jit.freeze(module))
x = torch.rand(batch, 3, 224, 224)


def synchronize():
    if cuda:
        torch.cuda.synchronize(device)


def plain(count):
    times = []
    for _ in range(count):
        start = time.perf_counter()
        module(x.to(device)).cpu()
        times.append((time.perf_counter() - start) * 1000)
    return times


host_in = x.pin_memory() if cuda else x
streams = [torch.cuda.Stream(device) for _ in range(2)] if cuda else [None, None]


def on(stream):
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


def pinned_streams(count):
    start = time.perf_counter()
    in_flight = []
    for i in range(count):
        stream = streams[i % 2]
        if len(in_flight) == 2:
            done = in_flight.pop(0)
            if done is not None:
                done.synchronize()
        with on(stream):
            y = module(host_in.to(device, non_blocking=cuda))
            out = torch.empty(y.shape, dtype=y.dtype, pin_memory=cuda)
            out.copy_(y, non_blocking=cuda)
        in_flight.append(stream)
    synchronize()
    mean = (time.perf_counter() - start) * 1000 / count
    return [mean] * count


loop = plain if copies == "plain" else pinned_streams
print("ready", flush=True)
with torch.inference_mode():
    for line in sys.stdin:
        if not line.strip():
            break
        print(json.dumps({"ms": loop(int(line))}), flush=True)
