"""The Python baseline: Debian's torch running the same TorchScript module in a plain loop.

    /usr/bin/python3 bench/libtorch/python_loop.py MODEL.pt THREADS BATCH
Loads the module, prints "ready", then for each line "N" on stdin runs N forwards and prints
one JSON line {"ms": [per-forward milliseconds...]}; an empty line or EOF ends it.
"""
import json
import sys
import time

import torch

path, threads, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
module = torch.jit.load(path).eval()
x = torch.rand(batch, 3, 224, 224)
print("ready", flush=True)
with torch.inference_mode():
    for line in sys.stdin:
        if not line.strip():
            break
        times = []
        for _ in range(int(line)):
            start = time.perf_counter()
            module(x)
            times.append((time.perf_counter() - start) * 1000)
        print(json.dumps({"ms": times}), flush=True)
