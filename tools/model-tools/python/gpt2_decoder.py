#!/usr/bin/python3
"""A GPT-2-style decoder with seeded random weights (train_tiny_gpt.py's model: learned
positions, pre-LayerNorm blocks, GELU MLP, multi-head attention, tied LM head), exported to
ONNX in Hugging Face Optimum's layout and folder as transformers.js reads it (config.json
with model_type gpt2, generation_config.json, onnx/model.onnx), plus torch's own greedy
tokens for given prompts. Plain torch, no transformers.

Usage: gpt2_decoder.py --out DIR [--layers 2 --hidden 64 --heads 4 --vocab 512
  --positions 128 --seed 0 --eos 256] [--greedy '[[1,2,3],[4]]' --greedy-tokens 8]
Prints one JSON line: {"greedy": [[...], ...]} (new token ids per prompt).
"""

import argparse
import json
import math
import os

import torch
from torch import nn

from train_tiny_gpt import TinyGpt, export


@torch.no_grad()
def greedy(model, prompt, count):
    """Torch's own greedy tokens: the prompt in one run, then one token a run on the cache."""
    pasts = model.empty_pasts(1)
    ids = torch.tensor([prompt])
    seen = 0
    out = []
    for _ in range(count):
        length = ids.shape[1]
        mask = torch.ones(1, seen + length, dtype=torch.long)
        positions = torch.arange(seen, seen + length)[None]
        logits, pasts = model(ids, mask, positions, pasts)
        token = int(logits[0, -1].argmax())
        out.append(token)
        seen += length
        ids = torch.tensor([[token]])
    return out


def write_configs(a):
    config = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": a.vocab,
        "n_positions": a.positions,
        "n_ctx": a.positions,
        "n_embd": a.hidden,
        "n_layer": a.layers,
        "n_head": a.heads,
        "n_inner": None,
        "activation_function": "gelu",
        "layer_norm_epsilon": 1e-5,
        "tie_word_embeddings": True,
        "bos_token_id": a.eos,
        "eos_token_id": a.eos,
        "torch_dtype": "float32",
    }
    generation = {"bos_token_id": a.eos, "eos_token_id": a.eos}
    for name, value in (("config.json", config), ("generation_config.json", generation)):
        with open(os.path.join(a.out, name), "w") as f:
            json.dump(value, f, indent=2)
            f.write("\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--positions", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eos", type=int, default=256)
    p.add_argument("--greedy", default="[]", help="JSON list of prompts (token id lists)")
    p.add_argument("--greedy-tokens", type=int, default=8)
    a = p.parse_args()
    if a.hidden % a.heads:
        raise SystemExit("hidden must split into heads")
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    model = TinyGpt(a.vocab, a.hidden, a.heads, a.layers, a.positions).eval()
    with torch.no_grad():
        # Wide weights, so that greedy choices stand apart by more than rounding (torch's
        # small initial ones give near-flat logits).
        model.wte.weight.normal_(0, 1)
        model.wpe.weight.normal_(0, 0.5)
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
                module.bias.normal_(0, 0.1)
            elif isinstance(module, nn.Linear):
                module.weight.normal_(0, 2 / math.sqrt(module.weight.shape[1]))
                module.bias.normal_(0, 0.1)
    onnx_dir = os.path.join(a.out, "onnx")
    os.makedirs(onnx_dir, exist_ok=True)
    export(model, a, os.path.join(onnx_dir, "model.onnx"))
    write_configs(a)
    prompts = json.loads(a.greedy)
    print(json.dumps({"greedy": [greedy(model, prompt, a.greedy_tokens) for prompt in prompts]}))


if __name__ == "__main__":
    main()
