#!/usr/bin/python3
"""A Llama-style decoder with seeded random weights, exported to ONNX in Hugging Face
Optimum's layout and folder as transformers.js reads it (config.json,
generation_config.json, onnx/model.onnx; llama-decoder.ts moves the weights to external
data on request), plus torch's own greedy tokens for given prompts.

Llama's parts: RMSNorm, rotary positions from position_ids, grouped-query attention (fewer
key/value heads than query heads), a SwiGLU MLP, a tied or untied LM head. Plain torch, no
transformers.

Usage: llama_decoder.py --out DIR [--layers 2 --hidden 64 --heads 4 --kv-heads 2
  --vocab 256 --max-len 128 --seed 0 --tied --merged-inputs]
  [--greedy '[[1,2,3],[4]]' --greedy-tokens 8]
Prints one JSON line: {"greedy": [[...], ...]} (new token ids per prompt).
"""

import argparse
import json
import math
import os
import sys

import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads):
        super().__init__()
        self.heads = heads
        self.kv_heads = kv_heads
        self.head_dim = hidden // heads
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)

    def forward(self, x, cos, sin, allowed, past_key, past_value):
        batch, length, _ = x.shape
        d = self.head_dim
        q = self.q_proj(x).view(batch, length, self.heads, d).transpose(1, 2)
        k = self.k_proj(x).view(batch, length, self.kv_heads, d).transpose(1, 2)
        v = self.v_proj(x).view(batch, length, self.kv_heads, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        key = torch.cat((past_key, k), dim=2)
        value = torch.cat((past_value, v), dim=2)
        # Grouped-query attention: each key/value head serves heads // kv_heads query heads.
        group = self.heads // self.kv_heads
        total = key.shape[2]
        keys = key[:, :, None].expand(batch, self.kv_heads, group, total, d)
        values = value[:, :, None].expand(batch, self.kv_heads, group, total, d)
        keys = keys.reshape(batch, self.heads, total, d)
        values = values.reshape(batch, self.heads, total, d)
        scores = torch.matmul(q, keys.transpose(2, 3)) / math.sqrt(d)
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1)
        context = torch.matmul(probs, values).transpose(1, 2).reshape(batch, length, -1)
        return self.o_proj(context), key, value


class Mlp(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x):
        gate = self.gate_proj(x)
        return self.down_proj(gate * torch.sigmoid(gate) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, hidden, heads, kv_heads, intermediate):
        super().__init__()
        self.input_layernorm = RMSNorm(hidden)
        self.self_attn = Attention(hidden, heads, kv_heads)
        self.post_attention_layernorm = RMSNorm(hidden)
        self.mlp = Mlp(hidden, intermediate)

    def forward(self, x, cos, sin, allowed, past_key, past_value):
        attended, key, value = self.self_attn(
            self.input_layernorm(x), cos, sin, allowed, past_key, past_value
        )
        x = x + attended
        return x + self.mlp(self.post_attention_layernorm(x)), key, value


class LlamaDecoder(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.head_dim = a.hidden // a.heads
        self.embed_tokens = nn.Embedding(a.vocab, a.hidden)
        self.layers = nn.ModuleList(
            Layer(a.hidden, a.heads, a.kv_heads, a.hidden * 2) for _ in range(a.layers)
        )
        self.norm = RMSNorm(a.hidden)
        self.lm_head = nn.Linear(a.hidden, a.vocab, bias=False)
        if a.tied:
            self.lm_head.weight = self.embed_tokens.weight
        inv_freq = 1.0 / (a.rope_theta ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, input_ids, attention_mask, position_ids, *pasts):
        x = self.embed_tokens(input_ids)
        freqs = position_ids[..., None].float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)[:, None]
        cos, sin = emb.cos(), emb.sin()
        length = input_ids.shape[1]
        past = pasts[0].shape[2]
        total = past + length
        # Causal over the concatenated positions, and never onto a masked (padding) one.
        query_at = torch.arange(length, device=x.device) + past
        key_at = torch.arange(total, device=x.device)
        causal = key_at[None, :] <= query_at[:, None]
        allowed = causal[None, None] & attention_mask[:, None, None, :].bool()
        presents = []
        for i, layer in enumerate(self.layers):
            x, key, value = layer(x, cos, sin, allowed, pasts[2 * i], pasts[2 * i + 1])
            presents += [key, value]
        return (self.lm_head(self.norm(x)), *presents)


class WithMergedInputs(nn.Module):
    """Takes the inputs newer exports add: `use_cache_branch` (Optimum's merged decoder picks
    its branch by it; both give the same logits here) and `num_logits_to_keep` (logits of
    only the last that many positions)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, position_ids, *rest):
        *pasts, use_cache_branch, num_logits_to_keep = rest
        logits, *presents = self.model(input_ids, attention_mask, position_ids, *pasts)
        length = input_ids.shape[1]
        kept = torch.arange(num_logits_to_keep) + (length - num_logits_to_keep)
        logits = logits.index_select(1, kept) + use_cache_branch.float().sum() * 0
        return (logits, *presents)


def empty_pasts(a, batch):
    d = a.hidden // a.heads
    return [torch.zeros(batch, a.kv_heads, 0, d) for _ in range(2 * a.layers)]


@torch.no_grad()
def greedy(model, a, prompt, count):
    """Torch's own greedy tokens: the prompt in one run, then one token a run on the cache."""
    pasts = empty_pasts(a, 1)
    ids = torch.tensor([prompt])
    seen = 0
    out = []
    for _ in range(count):
        length = ids.shape[1]
        mask = torch.ones(1, seen + length, dtype=torch.long)
        positions = torch.arange(seen, seen + length)[None]
        logits, *pasts = model(ids, mask, positions, *pasts)
        token = int(logits[0, -1].argmax())
        out.append(token)
        seen += length
        ids = torch.tensor([[token]])
    return out


def export(model, a):
    onnx_dir = os.path.join(a.out, "onnx")
    os.makedirs(onnx_dir, exist_ok=True)
    batch, length = 2, 3
    d = a.hidden // a.heads
    pasts = [torch.randn(batch, a.kv_heads, 4, d) for _ in range(2 * a.layers)]
    ids = torch.randint(0, a.vocab, (batch, length))
    mask = torch.ones(batch, 4 + length, dtype=torch.long)
    positions = torch.arange(4, 4 + length)[None].expand(batch, length)
    past_names, present_names = [], []
    for i in range(a.layers):
        for kind in ("key", "value"):
            past_names.append(f"past_key_values.{i}.{kind}")
            present_names.append(f"present.{i}.{kind}")
    axes = {
        "input_ids": {0: "batch_size", 1: "sequence_length"},
        "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
        "position_ids": {0: "batch_size", 1: "sequence_length"},
        "logits": {0: "batch_size", 1: "sequence_length"},
    }
    for name in past_names:
        axes[name] = {0: "batch_size", 2: "past_sequence_length"}
    for name in present_names:
        axes[name] = {0: "batch_size", 2: "total_sequence_length"}
    inputs = (ids, mask, positions, *pasts)
    input_names = ["input_ids", "attention_mask", "position_ids", *past_names]
    if a.merged_inputs:
        model = WithMergedInputs(model)
        inputs += (torch.tensor([True]), torch.tensor(length))
        input_names += ["use_cache_branch", "num_logits_to_keep"]
    path = os.path.join(onnx_dir, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(
            model,
            inputs,
            path,
            input_names=input_names,
            output_names=["logits", *present_names],
            dynamic_axes=axes,
            opset_version=14,
            do_constant_folding=True,
        )


def write_configs(a):
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": a.hidden,
        "intermediate_size": a.hidden * 2,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads,
        "num_hidden_layers": a.layers,
        "max_position_embeddings": a.max_len,
        "vocab_size": a.vocab,
        "rope_theta": a.rope_theta,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": a.tied,
        "bos_token_id": a.bos,
        "eos_token_id": a.eos,
        "torch_dtype": "float32",
    }
    generation = {"bos_token_id": a.bos, "eos_token_id": a.eos}
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
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--max-len", type=int, default=128)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--bos", type=int, default=1)
    p.add_argument("--eos", type=int, default=0)
    p.add_argument("--tied", action="store_true")
    p.add_argument("--merged-inputs", action="store_true", help="add use_cache_branch, num_logits_to_keep")
    p.add_argument("--greedy", default="[]", help="JSON list of prompts (token id lists)")
    p.add_argument("--greedy-tokens", type=int, default=8)
    a = p.parse_args()
    if a.hidden % a.heads or a.heads % a.kv_heads or (a.hidden // a.heads) % 2:
        sys.exit("hidden must split into heads of even size, and heads into kv-heads groups")
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    model = LlamaDecoder(a).eval()
    with torch.no_grad():
        # Wide weights: attention then sways each choice (with torch's default ones the
        # current token alone decides it, whatever the positions), and greedy choices stand
        # apart by more than rounding.
        model.embed_tokens.weight.normal_(0, 1)
        for module in model.modules():
            if isinstance(module, RMSNorm):
                module.weight.uniform_(0.5, 1.5)
            elif isinstance(module, nn.Linear) and module.weight is not model.embed_tokens.weight:
                module.weight.normal_(0, 2 / math.sqrt(module.weight.shape[1]))
    os.makedirs(a.out, exist_ok=True)
    export(model, a)
    write_configs(a)
    prompts = json.loads(a.greedy)
    print(json.dumps({"greedy": [greedy(model, a, prompt, a.greedy_tokens) for prompt in prompts]}))


if __name__ == "__main__":
    main()
