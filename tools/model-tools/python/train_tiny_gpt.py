#!/usr/bin/env python3
"""Trains a tiny GPT-2-style language model on the King James Bible and writes a Kiln model folder.

The text comes from Debian's packages `bible-kjv` and `bible-kjv-text` (the KJV is in the
public domain): `/usr/bin/bible -f Gen1:1-Rev22:21` prints it from `/usr/lib/bible.data`, one
verse a line. `--text FILE` trains on another UTF-8 text instead.

What it writes (`--out DIR`):
  model.onnx          the decoder with a KV cache, in Hugging Face Optimum's layout:
                      input_ids, attention_mask, position_ids, past_key_values.{i}.key|value
                      -> logits, present.{i}.key|value
  vocab.json          GPT-2's byte-level BPE files, trained here on the same text
  merges.txt
  config.json         Hugging Face names (n_positions, vocab_size, eos_token_id, ...)
  serving.properties  engine=OnnxRuntime, option.rolling_batch=auto
  training.json       what was trained on, how long, the final loss, a greedy sample

Everything is seeded and runs on a fixed number of threads, so the same arguments give the
same model. Needs python3-torch (Debian); nothing is downloaded.
"""

import argparse
import collections
import json
import math
import os
import re
import subprocess
import sys
import time

import torch
from torch import nn
from torch.nn import functional as F

END_OF_TEXT = "<|endoftext|>"
BIBLE = "/usr/bin/bible"
BIBLE_DATA = "/usr/lib/bible.data"
SOURCE = "King James Version (public domain), Debian packages bible-kjv + bible-kjv-text"

# GPT-2's pre-tokenizer split, in `re` terms for the letters and digits it matches (the `regex`
# module's \p{L} and \p{N} are not in Python's `re`); the same on ASCII text.
SPLIT = re.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"""
)


def bytes_to_unicode():
    """GPT-2's table from bytes to printable characters, so that BPE tokens are strings."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_CHARS = bytes_to_unicode()


def read_bible():
    if not os.path.exists(BIBLE) or not os.path.exists(BIBLE_DATA):
        sys.exit(
            f"{BIBLE} or {BIBLE_DATA} is missing: apt-get install bible-kjv (or pass --text FILE)"
        )
    out = subprocess.run(
        [BIBLE, "-f", "Gen1:1-Rev22:21"], check=True, capture_output=True, text=True
    ).stdout
    chapters = []
    chapter = None
    current = []
    for line in out.splitlines():
        m = re.match(r"^(\S+?)(\d+):(\d+) (.*)$", line)
        if not m:
            continue
        key = (m.group(1), m.group(2))
        if key != chapter and current:
            chapters.append("\n".join(current))
            current = []
        chapter = key
        current.append(m.group(4).strip())
    if current:
        chapters.append("\n".join(current))
    # One chapter per document; the model learns to end a chapter with <|endoftext|>.
    return chapters


def train_bpe(documents, merges_wanted):
    """Byte-level BPE as GPT-2's: merges learned over pre-tokenized words, by pair frequency."""
    words = collections.Counter()
    for doc in documents:
        for piece in SPLIT.findall(doc):
            words["".join(BYTE_CHARS[b] for b in piece.encode("utf-8"))] += 1
    splits = {w: list(w) for w in words}
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for w, count in words.items():
        s = splits[w]
        for i in range(len(s) - 1):
            pairs[(s[i], s[i + 1])] += count
            where[(s[i], s[i + 1])].add(w)
    merges = []
    for _ in range(merges_wanted):
        pairs += collections.Counter()  # drops pairs whose count fell to 0
        if not pairs:
            break
        # Most frequent pair; ties broken by the pair itself, so the result never varies.
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merges.append(best)
        a, b = best
        for w in sorted(where.pop(best)):
            s = splits[w]
            count = words[w]
            for i in range(len(s) - 1):
                pairs[(s[i], s[i + 1])] -= count
                where[(s[i], s[i + 1])].discard(w)
            i = 0
            out = []
            while i < len(s):
                if i < len(s) - 1 and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            splits[w] = out
            for i in range(len(out) - 1):
                pairs[(out[i], out[i + 1])] += count
                where[(out[i], out[i + 1])].add(w)
    vocab = {BYTE_CHARS[b]: b for b in range(256)}
    for a, b in merges:
        vocab[a + b] = len(vocab)
    vocab[END_OF_TEXT] = len(vocab)
    return vocab, merges


class BpeEncoder:
    def __init__(self, vocab, merges):
        self.vocab = vocab
        self.ranks = {pair: i for i, pair in enumerate(merges)}
        self.cache = {}

    def word(self, word):
        if word in self.cache:
            return self.cache[word]
        s = list(word)
        while len(s) > 1:
            ranked = [(self.ranks.get((s[i], s[i + 1]), math.inf), i) for i in range(len(s) - 1)]
            rank, _ = min(ranked)
            if rank == math.inf:
                break
            a, b = None, None
            for i in range(len(s) - 1):
                if self.ranks.get((s[i], s[i + 1])) == rank:
                    a, b = s[i], s[i + 1]
                    break
            out = []
            i = 0
            while i < len(s):
                if i < len(s) - 1 and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            s = out
        ids = [self.vocab[t] for t in s]
        self.cache[word] = ids
        return ids

    def encode(self, text):
        ids = []
        for piece in SPLIT.findall(text):
            ids.extend(self.word("".join(BYTE_CHARS[b] for b in piece.encode("utf-8"))))
        return ids

    def decode(self, ids):
        chars = {v: k for k, v in self.vocab.items()}
        byte_of = {c: b for b, c in BYTE_CHARS.items()}
        text = "".join(chars[i] for i in ids if chars[i] != END_OF_TEXT)
        return bytes(byte_of[c] for c in text).decode("utf-8", errors="replace")


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)

    def forward(self, h, bias, past_key, past_value):
        b, t, c = h.shape
        hs = c // self.heads
        q, k, v = self.qkv(self.ln1(h)).split(c, dim=2)
        q = q.view(b, t, self.heads, hs).transpose(1, 2)
        k = torch.cat([past_key, k.view(b, t, self.heads, hs).transpose(1, 2)], dim=2)
        v = torch.cat([past_value, v.view(b, t, self.heads, hs).transpose(1, 2)], dim=2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hs) + bias
        context = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
        h = h + self.proj(context)
        h = h + self.down(F.gelu(self.up(self.ln2(h))))
        return h, k, v


class TinyGpt(nn.Module):
    """Pre-LayerNorm GPT-2 blocks. Attention is causal over past + new positions and skips the
    positions whose attention_mask is 0, as Kiln's batched KV-cache steps need."""

    def __init__(self, vocab_size, hidden, heads, layers, positions):
        super().__init__()
        self.heads = heads
        self.wte = nn.Embedding(vocab_size, hidden)
        self.wpe = nn.Embedding(positions, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.apply(self._init)

    @staticmethod
    def _init(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, input_ids, attention_mask, position_ids, pasts):
        total = attention_mask.shape[1]
        past = total - input_ids.shape[1]
        keys = torch.arange(total).unsqueeze(0)
        queries = torch.arange(total)[past:].unsqueeze(1)
        allowed = (keys <= queries).float().unsqueeze(0).unsqueeze(0)
        allowed = allowed * attention_mask.float().unsqueeze(1).unsqueeze(2)
        bias = (allowed - 1.0) * 10000.0
        h = self.wte(input_ids) + self.wpe(position_ids)
        presents = []
        for i, block in enumerate(self.blocks):
            h, k, v = block(h, bias, pasts[2 * i], pasts[2 * i + 1])
            presents += [k, v]
        logits = self.ln_f(h) @ self.wte.weight.t()
        return logits, presents

    def empty_pasts(self, batch):
        hs = self.wte.weight.shape[1] // self.heads
        return [torch.zeros(batch, self.heads, 0, hs) for _ in range(2 * len(self.blocks))]


class OnnxDecoder(nn.Module):
    """The export signature: named tensors in, logits and presents out."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, position_ids, *pasts):
        logits, presents = self.model(input_ids, attention_mask, position_ids, list(pasts))
        return (logits, *presents)


def export(model, args, path):
    layers = args.layers
    names = [f"past_key_values.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    outputs = ["logits"]
    outputs += [f"present.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    hs = args.hidden // args.heads
    past = 2
    dummy = (
        torch.tensor([[5, 6, 7]], dtype=torch.long),
        torch.ones(1, past + 3, dtype=torch.long),
        torch.tensor([[past, past + 1, past + 2]], dtype=torch.long),
        *[torch.zeros(1, args.heads, past, hs) for _ in names],
    )
    axes = {
        "input_ids": {0: "batch", 1: "sequence"},
        "attention_mask": {0: "batch", 1: "total_sequence"},
        "position_ids": {0: "batch", 1: "sequence"},
        "logits": {0: "batch", 1: "sequence"},
    }
    for n in names:
        axes[n] = {0: "batch", 2: "past_sequence"}
    for n in outputs[1:]:
        axes[n] = {0: "batch", 2: "total_sequence"}
    torch.onnx.export(
        OnnxDecoder(model).eval(),
        dummy,
        path,
        input_names=["input_ids", "attention_mask", "position_ids", *names],
        output_names=outputs,
        dynamic_axes=axes,
        opset_version=17,
        do_constant_folding=True,
    )


@torch.no_grad()
def greedy(model, encoder, prompt, tokens):
    ids = encoder.encode(prompt)
    out = []
    for _ in range(tokens):
        x = torch.tensor([ids + out], dtype=torch.long)
        t = x.shape[1]
        mask = torch.ones(1, t, dtype=torch.long)
        logits, _ = model(x, mask, torch.arange(t).unsqueeze(0), model.empty_pasts(1))
        out.append(int(logits[0, -1].argmax()))
    return encoder.decode(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="model folder to write")
    p.add_argument("--text", help="UTF-8 text to train on (default: the KJV from bible-kjv)")
    p.add_argument("--steps", type=int, default=1000, help="optimizer steps (default 1000)")
    p.add_argument("--merges", type=int, default=256, help="BPE merges (vocabulary = 257 + merges)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--context", type=int, default=64, help="training window, in tokens")
    p.add_argument("--positions", type=int, default=512, help="n_positions of the model")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()

    started = time.time()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)

    if args.text:
        with open(args.text, encoding="utf-8") as f:
            documents = [d for d in f.read().split("\n\n\n") if d.strip()]
        source = os.path.abspath(args.text)
    else:
        documents = read_bible()
        source = SOURCE
    vocab, merges = train_bpe(documents, args.merges)
    encoder = BpeEncoder(vocab, merges)
    eos = vocab[END_OF_TEXT]
    ids = []
    for doc in documents:
        ids += encoder.encode(doc) + [eos]
    data = torch.tensor(ids, dtype=torch.long)
    bpe_seconds = time.time() - started
    print(
        f"{len(documents)} documents, {len(ids)} tokens, vocabulary {len(vocab)} ({bpe_seconds:.0f} s)",
        flush=True,
    )

    model = TinyGpt(len(vocab), args.hidden, args.heads, args.layers, args.positions)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    generator = torch.Generator().manual_seed(args.seed)
    window = args.context
    losses = []
    for step in range(args.steps):
        lr = args.lr * min(1.0, (step + 1) / 50) * (0.1 + 0.9 * (1 - step / args.steps))
        for group in opt.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, len(data) - window - 1, (args.batch,), generator=generator)
        x = torch.stack([data[s : s + window] for s in starts])
        y = torch.stack([data[s + 1 : s + window + 1] for s in starts])
        positions = torch.arange(window).unsqueeze(0).expand(args.batch, window)
        logits, _ = model(x, torch.ones_like(x), positions, model.empty_pasts(args.batch))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % 100 == 0 or step == args.steps - 1:
            seconds = time.time() - started
            print(f"step {step}: loss {loss.item():.3f} ({seconds:.0f} s)", flush=True)
    model.eval()

    os.makedirs(args.out, exist_ok=True)
    export(model, args, os.path.join(args.out, "model.onnx"))
    with open(os.path.join(args.out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(args.out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    config = {
        "model_type": "gpt2",
        "vocab_size": len(vocab),
        "n_positions": args.positions,
        "n_embd": args.hidden,
        "n_layer": args.layers,
        "n_head": args.heads,
        "bos_token_id": eos,
        "eos_token_id": eos,
    }
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(args.out, "serving.properties"), "w") as f:
        f.write("engine=OnnxRuntime\noption.rolling_batch=auto\n")
    tail = losses[-50:]
    sample = greedy(model, encoder, "And God said", 24)
    info = {
        "source": source,
        "documents": len(documents),
        "tokens": len(ids),
        "vocab_size": len(vocab),
        "steps": args.steps,
        "args": {k: v for k, v in vars(args).items() if k != "out"},
        "final_loss": sum(tail) / len(tail),
        "bpe_seconds": round(bpe_seconds, 1),
        "seconds": round(time.time() - started, 1),
        "sample": {"prompt": "And God said", "greedy": sample},
    }
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump(info, f, indent=2)
    print(json.dumps(info, indent=2))


if __name__ == "__main__":
    main()
