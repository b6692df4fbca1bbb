#!/usr/bin/env python3
"""A tinylm run read from Python with nothing but json and numpy.

Trains a tiny run with the tinylm binary, then reads config.json, tokenizer.json and
model.safetensors by hand (8-byte header length, JSON header, raw little-endian bytes),
checks names and shapes against DESIGN.md, runs the GPT forward pass in numpy (float64),
and checks that its loss on a text equals `tinylm eval --text` to 1e-5.

usage: python_reads_run.py TINYLM_BINARY SOURCE_DIR
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    dtypes = {"F32": "<f4", "I64": "<i8", "F64": "<f8", "I32": "<i4", "U8": "u1"}
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(body[begin:end], dtype=dtypes[entry["dtype"]]).reshape(entry["shape"])
    return tensors


def expected_shapes(cfg):
    C, V, L = cfg["n_embd"], cfg["vocab_size"], cfg["n_layer"]
    shapes = {"transformer.wte.weight": (V, C), "transformer.ln_f.weight": (C,)}
    if cfg["pos_encoding"] == "learned":
        shapes["transformer.wpe.weight"] = (cfg["block_size"], C)
    if cfg["bias"]:
        shapes["transformer.ln_f.bias"] = (C,)
    if not cfg["tie_weights"]:
        shapes["lm_head.weight"] = (V, C)
    for i in range(L):
        p = f"transformer.h.{i}."
        shapes.update({p + "ln_1.weight": (C,), p + "ln_2.weight": (C,),
                       p + "attn.c_attn.weight": (3 * C, C), p + "attn.c_proj.weight": (C, C),
                       p + "mlp.c_fc.weight": (4 * C, C), p + "mlp.c_proj.weight": (C, 4 * C)})
        if cfg["bias"]:
            shapes.update({p + "ln_1.bias": (C,), p + "ln_2.bias": (C,),
                           p + "attn.c_attn.bias": (3 * C,), p + "attn.c_proj.bias": (C,),
                           p + "mlp.c_fc.bias": (4 * C,), p + "mlp.c_proj.bias": (C,)})
    return shapes


def forward(w, cfg, idx):
    """Logits (T, V) for one sequence of token ids, in float64."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    T, C, nh = len(idx), cfg["n_embd"], cfg["n_head"]
    hs = C // nh
    erf = np.vectorize(math.erf)

    def linear(x, name):
        y = x @ w[name + ".weight"].T  # nn.Linear layout: (out_features, in_features)
        return y + w[name + ".bias"] if name + ".bias" in w else y

    def layer_norm(x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        y = (x - mu) / np.sqrt(var + 1e-5) * w[name + ".weight"]
        return y + w[name + ".bias"] if name + ".bias" in w else y

    x = w["transformer.wte.weight"][idx]
    if cfg["pos_encoding"] == "learned":
        x = x + w["transformer.wpe.weight"][:T]
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    for i in range(cfg["n_layer"]):
        p = f"transformer.h.{i}."
        q, k, v = np.split(linear(layer_norm(x, p + "ln_1"), p + "attn.c_attn"), 3, axis=-1)
        heads = [slice(h * hs, (h + 1) * hs) for h in range(nh)]
        out = []
        for h in heads:
            scores = q[:, h] @ k[:, h].T / math.sqrt(hs)
            scores[mask] = -np.inf
            a = np.exp(scores - scores.max(-1, keepdims=True))
            out.append((a / a.sum(-1, keepdims=True)) @ v[:, h])
        x = x + linear(np.concatenate(out, -1), p + "attn.c_proj")
        hidden = linear(layer_norm(x, p + "ln_2"), p + "mlp.c_fc")
        x = x + linear(0.5 * hidden * (1 + erf(hidden / math.sqrt(2))), p + "mlp.c_proj")
    x = layer_norm(x, "transformer.ln_f")
    head = w["lm_head.weight"] if "lm_head.weight" in w else w["transformer.wte.weight"]
    return x @ head.T


def main():
    binary, source = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "tiny.toml")
        with open(config, "w") as f:
            f.write(f'[model]\nn_layer = 2\nn_head = 2\nn_embd = 16\nblock_size = 16\n'
                    f'[data]\npath = "{source}/data/corpora/tinyshakespeare.txt"\ncache_dir = "cache"\n'
                    f'[train]\nbatch_size = 4\nmax_iters = 30\nwarmup_iters = 2\nlr_decay_iters = 30\n'
                    f'eval_interval = 30\neval_iters = 2\nlearning_rate = 3e-3\n')
        run = os.path.join(tmp, "run")
        subprocess.run([binary, "train", config, "--out", run, "--threads", "1"], check=True,
                       stderr=subprocess.DEVNULL)

        cfg = json.load(open(os.path.join(run, "config.json")))
        vocab = json.load(open(os.path.join(run, "tokenizer.json")))["vocab"]
        weights = read_safetensors(os.path.join(run, "model.safetensors"))
        shapes = {k: tuple(v.shape) for k, v in weights.items()}
        assert shapes == expected_shapes(cfg), f"names/shapes differ from DESIGN.md: {shapes}"
        assert all(v.dtype == np.float32 for v in weights.values())

        text = "First Citizen:\nBefore we proceed any further, hear me speak.\n"
        text_path = os.path.join(tmp, "text.txt")
        with open(text_path, "w") as f:
            f.write(text)
        ids = np.array([vocab.index(ch) for ch in text])
        block, nats = cfg["block_size"], 0.0
        for start in range(0, len(ids) - 1, block):  # eval's windows: every token once
            inputs = ids[start:min(start + block, len(ids) - 1)]
            targets = ids[start + 1:start + 1 + len(inputs)]
            logits = forward(weights, cfg, inputs)
            logits = logits - logits.max(-1, keepdims=True)
            logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
            nats -= logp[np.arange(len(targets)), targets].sum()
        ours = nats / (len(ids) - 1)

        out = subprocess.run([binary, "eval", run, "--text", text_path, "--json", "--threads", "1"],
                             check=True, capture_output=True, text=True).stdout
        theirs = json.loads(out)
        print(f"numpy loss {ours:.6f}, tinylm eval loss {theirs['loss']:.6f}, tokens {theirs['tokens']}")
        assert theirs["tokens"] == len(ids) - 1
        assert abs(ours - theirs["loss"]) < 1e-5, (ours, theirs["loss"])
        assert ours < math.log(len(vocab)) - 0.3, "the run should have learned something"
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
