/**
 * Bench (c)'s model.py: a numpy MLP (64 → hidden → hidden → 10, float32, seeded weights) whose
 * handler stacks `get_batches()` into one matmul and answers each request as JSON.
 */
export const MLP_HANDLER = (hidden: number): string => `
import io
import numpy as np
from djl_python import Input, Output

rng = np.random.default_rng(0)
H = ${hidden}
W = [rng.standard_normal((64, H), dtype=np.float32) / 8,
     rng.standard_normal((H, H), dtype=np.float32) / 16,
     rng.standard_normal((H, 10), dtype=np.float32) / 16]

def mlp(x):
    for w in W[:-1]:
        x = np.maximum(x @ w, 0)
    return x @ W[-1]

def handle(inputs: Input):
    if inputs.is_empty():
        return None
    requests = inputs.get_batches()
    x = np.concatenate([r.get_as_numpy()[0].reshape(1, 64) for r in requests])
    y = mlp(x)
    if not inputs.is_batch():
        return Output().add_as_json(y[0].tolist())
    out = Output()
    for i in range(len(requests)):
        out.add_as_json(y[i].tolist(), batch_index=i)
    return out
`;
