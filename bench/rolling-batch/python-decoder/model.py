"""A Llama-style decoder as a Kiln step handler (option.rolling_batch): RMSNorm, rotary
positions, grouped-query attention and SwiGLU, random weights from a fixed seed, on
`cuda:{device_id}` when torch sees that GPU (float16 there; option.dtype=fp32 keeps float32),
else on the CPU. Its vocabulary is the folder's vocab.json (a list of characters). Sizes come
from the model's options: layers, hidden, heads, kv_heads, ffn, max_len.

Each request keeps its keys and values per layer. A step prefills each prompt chunk alone and
decodes every other request in one batch, its pasts left-padded to the longest and masked.
Requests that do not sample get the most likely token, chosen here; the others, logits."""

import json
import math
import os

import torch
import torch.nn.functional as F


class StepHandler:
    def __init__(self, properties):
        def size(key, default):
            return int(properties.get(key, default))

        with open(os.path.join(properties["model_dir"], "vocab.json")) as f:
            self.vocab_size = len(json.load(f))
        self.layers = size("layers", 8)
        hidden = size("hidden", 512)
        self.heads = size("heads", 8)
        self.kv_heads = size("kv_heads", 4)
        self.head_dim = hidden // self.heads
        ffn = size("ffn", 2 * hidden)
        self.max_sequence_length = size("max_len", 512)
        threads = size("threads", 0)
        if threads > 0:
            torch.set_num_threads(threads)
        device_id = int(properties.get("device_id", "-1"))
        gpu = device_id >= 0 and torch.cuda.is_available() and device_id < torch.cuda.device_count()
        self.device = torch.device(f"cuda:{device_id}" if gpu else "cpu")
        self.dtype = torch.float16 if gpu and properties.get("dtype", "fp16") == "fp16" else torch.float32
        self.cache_bytes_per_token = (
            self.layers * 2 * self.kv_heads * self.head_dim * (2 if self.dtype == torch.float16 else 4)
        )

        generator = torch.Generator().manual_seed(int(properties.get("seed", "0")))

        def weight(rows, cols):
            w = torch.randn(rows, cols, generator=generator) / math.sqrt(rows)
            return w.to(self.device, self.dtype)

        self.embed = weight(self.vocab_size, hidden) * math.sqrt(self.vocab_size)
        self.blocks = [
            {
                "q": weight(hidden, self.heads * self.head_dim),
                "k": weight(hidden, self.kv_heads * self.head_dim),
                "v": weight(hidden, self.kv_heads * self.head_dim),
                "o": weight(self.heads * self.head_dim, hidden),
                "gate": weight(hidden, ffn),
                "up": weight(hidden, ffn),
                "down": weight(ffn, hidden),
            }
            for _ in range(self.layers)
        ]
        self.head = weight(hidden, self.vocab_size)
        half = self.head_dim // 2
        self.inv_freq = 1.0 / (10000 ** (torch.arange(half, device=self.device) / half))
        # request id -> per layer (keys, values), each [kv_heads, length, head_dim]
        self.caches = {}
        self.greedy = set()

    @torch.no_grad()
    def step(self, batch):
        for request_id in batch.finished:
            self.caches.pop(request_id, None)
            self.greedy.discard(request_id)
        for request in batch.new_requests:
            self.caches[request.id] = None
            if not request.parameters.get("do_sample"):
                self.greedy.add(request.id)
        feeds = list(batch.feeds)
        if not feeds:
            return []
        logits = [None] * len(feeds)
        decode = [i for i, f in enumerate(feeds) if len(f.tokens) == 1 and self.caches[f.request_id]]
        if decode:
            rows = self.run([feeds[i] for i in decode])
            for k, i in enumerate(decode):
                logits[i] = rows[k]
        for i, feed in enumerate(feeds):
            if logits[i] is None:
                logits[i] = self.run([feed])[0]
        stacked = torch.stack(logits).float()
        chosen = stacked.argmax(dim=1).tolist()
        return [
            int(chosen[i]) if feed.request_id in self.greedy else stacked[i].cpu()
            for i, feed in enumerate(feeds)
        ]

    def run(self, feeds):
        """The next token's logits for each feed, its keys and values appended to its cache."""
        rows, fresh = len(feeds), max(len(f.tokens) for f in feeds)
        pasts = [self.caches[f.request_id] for f in feeds]
        lengths = [0 if p is None else p[0][0].shape[1] for p in pasts]
        past = max(lengths)
        tokens = torch.zeros(rows, fresh, dtype=torch.long)
        positions = torch.zeros(rows, fresh, dtype=torch.long)
        # attend[r, t, j]: query t of row r sees key j (the past, left-padded, then the new ones).
        attend = torch.zeros(rows, fresh, past + fresh, dtype=torch.bool)
        causal = torch.ones(fresh, fresh, dtype=torch.bool).tril()
        for r, feed in enumerate(feeds):
            n = len(feed.tokens)
            tokens[r, :n] = torch.tensor(feed.tokens)
            positions[r] = lengths[r] + torch.arange(fresh)
            attend[r, :, past - lengths[r] : past] = True
            attend[r, :, past:] = causal
        tokens, positions = tokens.to(self.device), positions.to(self.device)
        mask = attend.to(self.device).unsqueeze(1)
        angles = positions.unsqueeze(-1).to(torch.float32) * self.inv_freq
        cos = torch.cat([angles.cos(), angles.cos()], -1).to(self.dtype).unsqueeze(1)
        sin = torch.cat([angles.sin(), angles.sin()], -1).to(self.dtype).unsqueeze(1)
        x = self.embed[tokens]
        for layer, w in enumerate(self.blocks):
            h = rms_norm(x)
            q = (h @ w["q"]).view(rows, fresh, self.heads, self.head_dim).transpose(1, 2)
            k = (h @ w["k"]).view(rows, fresh, self.kv_heads, self.head_dim).transpose(1, 2)
            v = (h @ w["v"]).view(rows, fresh, self.kv_heads, self.head_dim).transpose(1, 2)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            keys = torch.cat([self.gather(pasts, lengths, past, layer, 0), k], 2)
            values = torch.cat([self.gather(pasts, lengths, past, layer, 1), v], 2)
            for r, feed in enumerate(feeds):
                n = len(feed.tokens)
                mine = (k[r, :, :n], v[r, :, :n])
                if pasts[r] is None:
                    pasts[r] = [None] * self.layers
                old = pasts[r][layer]
                pasts[r][layer] = mine if old is None else tuple(torch.cat([o, m], 1) for o, m in zip(old, mine))
            groups = self.heads // self.kv_heads
            out = attention(q, keys.repeat_interleave(groups, 1), values.repeat_interleave(groups, 1), mask)
            x = x + out.transpose(1, 2).reshape(rows, fresh, -1) @ w["o"]
            h = rms_norm(x)
            x = x + (F.silu(h @ w["gate"]) * (h @ w["up"])) @ w["down"]
        for r, feed in enumerate(feeds):
            self.caches[feed.request_id] = pasts[r]
        last = torch.tensor([len(f.tokens) - 1 for f in feeds], device=self.device)
        return rms_norm(x[torch.arange(rows, device=self.device), last]) @ self.head

    def gather(self, pasts, lengths, past, layer, which):
        """Layer `layer`'s keys (0) or values (1) of every row, [rows, kv_heads, past, head_dim]."""
        out = torch.zeros(len(pasts), self.kv_heads, past, self.head_dim, device=self.device, dtype=self.dtype)
        for r, cache in enumerate(pasts):
            if cache is not None and lengths[r] > 0:
                out[r, :, past - lengths[r] :] = cache[layer][which]
        return out


def attention(q, k, v, mask):
    """softmax(q kᵀ / √d, masked) v: torch's fused kernel where it has one (torch ≥ 2.0)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v


def rms_norm(x):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype)


def rotate(x, cos, sin):
    first, second = x.chunk(2, -1)
    return x * cos + torch.cat([-second, first], -1) * sin
