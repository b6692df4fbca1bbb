#!/usr/bin/env python3
"""A tinylm run read from Python with nothing but json and numpy.

Trains a tiny run per position encoding with the tinylm binary: the GPT-2 block (learned),
the modern one (rotary positions, RMSNorm, SwiGLU, grouped-query attention), T5's relative
and ALiBi's positions, Vaswani's sinusoids (tokens scaled by sqrt(C)) and none; then reads config.json,
tokenizer.json and model.safetensors by hand (8-byte header length, JSON header, raw
little-endian bytes), checks names and shapes against docs/FORMATS.md, runs the GPT forward pass
in numpy (float64), and checks that its loss on a text equals `tinylm eval --text` to 1e-5.
Then reads the last snapshot of the heads (snapshots/step_00000030.safetensors, float16
patterns) and checks its patterns on the text probe against the numpy forward pass's.
Checks every checksum with python3-xxhash (docs/FORMATS.md): each tensor's XXH3-64 in its
safetensors header, each file's in state.json, and state.json's own.

usage: python_reads_run.py TINYLM_BINARY SOURCE_DIR
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import xxhash


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    dtypes = {"F32": "<f4", "I64": "<i8", "F64": "<f8", "F16": "<f2", "I32": "<i4", "U8": "u1"}
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(body[begin:end], dtype=dtypes[entry["dtype"]]).reshape(entry["shape"])
    return tensors


def check_checksums(run):
    """Every checksum the run records, recomputed: tensors, files, state.json itself."""
    state = json.load(open(os.path.join(run, "state.json")))
    recorded = state.pop("checksum")
    canonical = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert xxhash.xxh3_64_hexdigest(canonical.encode()) == recorded, "state.json's own checksum"
    assert set(state["files"]) >= {"config.json", "config.toml", "tokenizer.json",
                                   "model.safetensors", "optimizer.safetensors"}
    for name, checksum in state["files"].items():
        data = open(os.path.join(run, name), "rb").read()
        assert xxhash.xxh3_64_hexdigest(data) == checksum, f"{name}'s checksum in state.json"
    snapshots = os.path.join(run, "snapshots")
    files = [os.path.join(run, "model.safetensors"), os.path.join(run, "optimizer.safetensors")]
    files += [os.path.join(snapshots, f) for f in sorted(os.listdir(snapshots))]
    for path in files:
        data = open(path, "rb").read()
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + n])
        meta = header.pop("__metadata__")
        assert len(header) > 0
        for name, entry in header.items():
            begin, end = entry["data_offsets"]
            assert xxhash.xxh3_64_hexdigest(data[8 + n + begin:8 + n + end]) == meta["xxh3_64:" + name], \
                f"{path}: {name}'s checksum"


def swiglu_hidden(C):
    return (8 * C // 3 + 7) // 8 * 8


def expected_shapes(cfg):
    C, V, L = cfg["n_embd"], cfg["vocab_size"], cfg["n_layer"]
    modern_norm, gated = cfg.get("norm") == "rmsnorm", cfg.get("mlp") == "swiglu"
    kv = (cfg.get("n_kv_head") or cfg["n_head"]) * (C // cfg["n_head"])
    H = swiglu_hidden(C) if gated else 4 * C
    norm_bias = cfg["bias"] and not modern_norm
    shapes = {"transformer.wte.weight": (V, C), "transformer.ln_f.weight": (C,)}
    if cfg["pos_encoding"] == "learned":
        shapes["transformer.wpe.weight"] = (cfg["block_size"], C)
    if cfg["pos_encoding"] == "relative":
        for i in range(L):
            shapes[f"transformer.h.{i}.attn.rel_bias.weight"] = (cfg["n_head"], cfg["num_buckets"])
    if norm_bias:
        shapes["transformer.ln_f.bias"] = (C,)
    if not cfg["tie_weights"]:
        shapes["lm_head.weight"] = (V, C)
    for i in range(L):
        p = f"transformer.h.{i}."
        shapes.update({p + "ln_1.weight": (C,), p + "ln_2.weight": (C,),
                       p + "attn.c_attn.weight": (C + 2 * kv, C), p + "attn.c_proj.weight": (C, C),
                       p + "mlp.c_fc.weight": (2 * H if gated else H, C), p + "mlp.c_proj.weight": (C, H)})
        if norm_bias:
            shapes.update({p + "ln_1.bias": (C,), p + "ln_2.bias": (C,)})
        if cfg["bias"]:
            shapes.update({p + "attn.c_attn.bias": (C + 2 * kv,), p + "attn.c_proj.bias": (C,),
                           p + "mlp.c_fc.bias": (2 * H if gated else H,), p + "mlp.c_proj.bias": (C,)})
    return shapes


def forward(w, cfg, idx, patterns=None, zs=None):
    """Logits (T, V) for one sequence of token ids, in float64; each head's pattern (T, T),
    layer by layer, appended to `patterns` when given; each layer's hook_z as c_proj reads it
    (T, n_head * head_size), to `zs`."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    T, C, nh = len(idx), cfg["n_embd"], cfg["n_head"]
    hs, n_kv = C // nh, cfg.get("n_kv_head") or nh
    erf = np.vectorize(math.erf)

    def linear(x, name):
        y = x @ w[name + ".weight"].T  # nn.Linear layout: (out_features, in_features)
        return y + w[name + ".bias"] if name + ".bias" in w else y

    def norm(x, name):
        if cfg.get("norm") == "rmsnorm":
            return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-5) * w[name + ".weight"]
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        y = (x - mu) / np.sqrt(var + 1e-5) * w[name + ".weight"]
        return y + w[name + ".bias"] if name + ".bias" in w else y

    def rope(x):  # (T, hs) at positions 0..T-1, pairs (x_i, x_{i + hs/2})
        half = hs // 2
        angle = np.arange(T)[:, None] * 10000.0 ** (-2.0 * np.arange(half) / hs)
        x1, x2 = x[:, :half], x[:, half:]
        return np.concatenate([x1 * np.cos(angle) - x2 * np.sin(angle),
                               x1 * np.sin(angle) + x2 * np.cos(angle)], -1)

    def t5_bucket(d):  # T5's causal bucket of distance d >= 0 (docs/FORMATS.md)
        nb, exact = cfg["num_buckets"], cfg["num_buckets"] // 2
        if d < exact:
            return d
        large = exact + int(math.log(d / exact) / math.log(cfg["max_distance"] / exact) * (nb - exact))
        return min(nb - 1, large)

    def alibi_slopes(n):  # the ALiBi paper's geometric slopes
        def power_of_two(m):
            return [2.0 ** (-8.0 * h / m) for h in range(1, m + 1)]
        below = 2 ** int(math.floor(math.log2(n)))
        return (power_of_two(below) + power_of_two(2 * below)[0::2])[:n]

    distance = np.maximum(np.arange(T)[:, None] - np.arange(T)[None, :], 0)  # (T, T): i - j

    def score_bias(layer, h):  # (T, T) added to head h's scores
        if cfg["pos_encoding"] == "relative":
            table = w[f"transformer.h.{layer}.attn.rel_bias.weight"][h]
            return table[np.vectorize(t5_bucket)(distance)]
        if cfg["pos_encoding"] == "alibi":
            return -alibi_slopes(nh)[h] * distance
        return 0.0

    x = w["transformer.wte.weight"][idx]
    if cfg["pos_encoding"] == "learned":
        x = x + w["transformer.wpe.weight"][:T]
    if cfg["pos_encoding"] == "sinusoidal":  # Vaswani et al. 3.4 and 3.5
        angle = np.arange(T)[:, None] / 10000.0 ** (np.arange(0, C, 2) / C)  # (T, C / 2)
        table = np.zeros((T, C))
        table[:, 0::2], table[:, 1::2] = np.sin(angle), np.cos(angle)
        x = x * math.sqrt(C) + table
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    for i in range(cfg["n_layer"]):
        p = f"transformer.h.{i}."
        qkv = linear(norm(x, p + "ln_1"), p + "attn.c_attn")
        q, k, v = qkv[:, :C], qkv[:, C:C + n_kv * hs], qkv[:, C + n_kv * hs:]
        out = []
        for h in range(nh):
            g = h // (nh // n_kv)  # this query head's key/value head
            qh, kh, vh = q[:, h * hs:(h + 1) * hs], k[:, g * hs:(g + 1) * hs], v[:, g * hs:(g + 1) * hs]
            if cfg["pos_encoding"] == "rope":
                qh, kh = rope(qh), rope(kh)
            scores = qh @ kh.T / math.sqrt(hs) + score_bias(i, h)
            scores[mask] = -np.inf
            a = np.exp(scores - scores.max(-1, keepdims=True))
            a = a / a.sum(-1, keepdims=True)
            if patterns is not None:
                patterns.append(a)
            out.append(a @ vh)
        if zs is not None:
            zs.append(np.concatenate(out, -1))
        x = x + linear(np.concatenate(out, -1), p + "attn.c_proj")
        hidden = linear(norm(x, p + "ln_2"), p + "mlp.c_fc")
        if cfg.get("mlp") == "swiglu":
            gate, up = np.split(hidden, 2, axis=-1)
            post = gate / (1 + np.exp(-gate)) * up
        elif cfg.get("mlp") == "gelu_tanh":  # GPT-2's
            post = 0.5 * hidden * (1 + np.tanh(math.sqrt(2 / math.pi) * (hidden + 0.044715 * hidden**3)))
        else:
            post = 0.5 * hidden * (1 + erf(hidden / math.sqrt(2)))
        x = x + linear(post, p + "mlp.c_proj")
    x = norm(x, "transformer.ln_f")
    head = w["lm_head.weight"] if "lm_head.weight" in w else w["transformer.wte.weight"]
    return x @ head.T


def main():
    binary, source = sys.argv[1], sys.argv[2]
    blocks = ["", 'pos_encoding = "rope"\nnorm = "rmsnorm"\nmlp = "swiglu"\nn_kv_head = 1\n',
              'pos_encoding = "relative"\nnum_buckets = 8\nmax_distance = 12\n',
              'pos_encoding = "alibi"\nn_head = 4\nmlp = "gelu_tanh"\n',
              'pos_encoding = "sinusoidal"\n', 'pos_encoding = "none"\n']
    for block in blocks:
        check_run(binary, source, block)
    print(f"{len(blocks)} passed, 0 failed")


def check_run(binary, source, block):
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "tiny.toml")
        with open(config, "w") as f:
            head = "" if "n_head" in block else "n_head = 2\n"
            f.write(f'[model]\nn_layer = 2\n{head}n_embd = 16\nblock_size = 16\n{block}'
                    f'[data]\npath = "{source}/data/corpora/tinyshakespeare.txt"\ncache_dir = "cache"\n'
                    f'[train]\nbatch_size = 4\nmax_iters = 30\nwarmup_iters = 2\nlr_decay_iters = 30\n'
                    f'eval_interval = 30\neval_iters = 2\nlearning_rate = 3e-3\n')
        run = os.path.join(tmp, "run")
        subprocess.run([binary, "train", config, "--out", run, "--threads", "1"], check=True,
                       stderr=subprocess.DEVNULL)

        check_checksums(run)
        cfg = json.load(open(os.path.join(run, "config.json")))
        scale = math.sqrt(cfg["n_embd"]) if cfg["pos_encoding"] == "sinusoidal" else 1.0
        assert cfg["token_scale"] == scale, (cfg["pos_encoding"], cfg["token_scale"])
        vocab = json.load(open(os.path.join(run, "tokenizer.json")))["vocab"]
        weights = read_safetensors(os.path.join(run, "model.safetensors"))
        shapes = {k: tuple(v.shape) for k, v in weights.items()}
        assert shapes == expected_shapes(cfg), f"names/shapes differ from docs/FORMATS.md: {shapes}"
        assert all(v.dtype == np.float32 for v in weights.values())

        text = "First Citizen:\nBefore we proceed any further, hear me speak.\n"
        text_path = os.path.join(tmp, "text.txt")
        with open(text_path, "w") as f:
            f.write(text)
        ids = np.array([vocab.index(ch) for ch in text])

        def numpy_loss(context):  # eval's windows of `context` inputs: every token once
            nats = 0.0
            for start in range(0, len(ids) - 1, context):
                inputs = ids[start:min(start + context, len(ids) - 1)]
                targets = ids[start + 1:start + 1 + len(inputs)]
                logits = forward(weights, cfg, inputs)
                logits = logits - logits.max(-1, keepdims=True)
                logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
                nats -= logp[np.arange(len(targets)), targets].sum()
            return nats / (len(ids) - 1)

        # Within block_size, and (every encoding but learned) at 3x block_size.
        block = cfg["block_size"]
        for context in [block] + ([3 * block] if cfg["pos_encoding"] != "learned" else []):
            ours = numpy_loss(context)
            out = subprocess.run([binary, "eval", run, "--text", text_path, "--json", "--threads", "1",
                                  "--context", str(context)],
                                 check=True, capture_output=True, text=True).stdout
            theirs = json.loads(out)
            print(f"{cfg['pos_encoding']}, context {context}: numpy loss {ours:.6f}, "
                  f"tinylm eval loss {theirs['loss']:.6f}, tokens {theirs['tokens']}")
            assert theirs["tokens"] == len(ids) - 1 and theirs["context"] == context
            assert abs(ours - theirs["loss"]) < 1e-5, (ours, theirs["loss"])
            assert ours < math.log(len(vocab)) - 0.3, "the run should have learned something"

        snapshot = read_safetensors(os.path.join(run, "snapshots", "step_00000030.safetensors"))
        stored = snapshot["text_pattern"]  # (L, nh, T, T) float16, from the final weights
        assert stored.dtype == np.float16 and stored.shape[:2] == (cfg["n_layer"], cfg["n_head"])
        patterns = []
        forward(weights, cfg, snapshot["text_tokens"], patterns)
        ours = np.array(patterns).reshape(stored.shape)
        worst = np.abs(ours - stored.astype(np.float64)).max()
        print(f"snapshot patterns against numpy's: largest difference {worst:.2e}")
        assert worst < 1e-3, worst


if __name__ == "__main__":
    main()
