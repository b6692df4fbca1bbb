#!/usr/bin/env python3
"""`tinylm export --format llama2c` read back the way llama2.c's run.c reads it.

Trains a tiny run llama2.c can hold (rope, rmsnorm, swiglu, no biases, one key/value head,
and, a second time, an untied classifier), exports it, reads model.bin (7 int32, then the
float32 arrays in run.c's order) and tokenizer.bin with numpy, runs run.c's forward pass
(interleaved rotary pairs, RMSNorm eps 1e-5, SwiGLU w2(silu(w1 x) * w3 x)) in float64, and
checks that its loss on a text equals `tinylm eval --text` to 1e-5. A GPT-2-block run is
refused, naming the options in the way.

usage: llama2c_export.py TINYLM SOURCE_DIR
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np


def read_model(path):
    raw = open(path, "rb").read()
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = np.frombuffer(raw[:28], "<i4")
    shared = vocab > 0
    vocab = abs(vocab)
    data = np.frombuffer(raw[28:], "<f4").astype(np.float64)
    hs, at = dim // n_heads, 0

    def take(*shape):
        nonlocal at
        n = int(np.prod(shape))
        out = data[at:at + n].reshape(shape)
        at += n
        return out

    w = {"emb": take(vocab, dim), "rms_att": take(n_layers, dim),
         "wq": take(n_layers, n_heads * hs, dim), "wk": take(n_layers, n_kv * hs, dim),
         "wv": take(n_layers, n_kv * hs, dim), "wo": take(n_layers, dim, n_heads * hs),
         "rms_ffn": take(n_layers, dim), "w1": take(n_layers, hidden, dim),
         "w2": take(n_layers, dim, hidden), "w3": take(n_layers, hidden, dim),
         "rms_final": take(dim)}
    take(seq_len, hs // 2)  # the rotary tables run.c skips
    take(seq_len, hs // 2)
    w["cls"] = w["emb"] if shared else take(vocab, dim)
    assert at == len(data), f"{len(data) - at} floats left over"
    cfg = dict(dim=dim, hidden=hidden, n_layers=n_layers, n_heads=n_heads, n_kv=n_kv, vocab=vocab,
               seq_len=seq_len, shared=shared)
    return cfg, w


def read_tokenizer(path, vocab):
    raw = open(path, "rb").read()
    max_len, at, pieces = int(np.frombuffer(raw[:4], "<i4")[0]), 4, []
    for _ in range(vocab):
        score = float(np.frombuffer(raw[at:at + 4], "<f4")[0])
        n = int(np.frombuffer(raw[at + 4:at + 8], "<i4")[0])
        pieces.append(raw[at + 8:at + 8 + n])
        at += 8 + n
        assert n <= max_len and score == 0.0  # a char vocabulary has no merge scores
    assert at == len(raw)
    return pieces


def forward(cfg, w, idx):
    """run.c's forward for a whole sequence: logits (T, V)."""
    T, C, nh, kv = len(idx), cfg["dim"], cfg["n_heads"], cfg["n_kv"]
    hs = C // nh

    def rms(x, g):
        return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-5) * g

    def rope(x):  # (T, n hs): pairs (2i, 2i + 1) of each head, frequency 10000^(-2i/hs)
        x = x.reshape(T, -1, hs // 2, 2)
        angle = np.arange(T)[:, None, None] * 10000.0 ** (-2.0 * np.arange(hs // 2) / hs)[None, None, :]
        c, s = np.cos(angle), np.sin(angle)
        out = np.stack([x[..., 0] * c - x[..., 1] * s, x[..., 0] * s + x[..., 1] * c], -1)
        return out.reshape(T, -1)

    x = w["emb"][idx]
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    for l in range(cfg["n_layers"]):
        h = rms(x, w["rms_att"][l])
        q, k, v = rope(h @ w["wq"][l].T), rope(h @ w["wk"][l].T), h @ w["wv"][l].T
        heads = []
        for head in range(nh):
            g = head // (nh // kv)
            qh, kh, vh = q[:, head * hs:(head + 1) * hs], k[:, g * hs:(g + 1) * hs], v[:, g * hs:(g + 1) * hs]
            s = qh @ kh.T / math.sqrt(hs)
            s[mask] = -np.inf
            a = np.exp(s - s.max(-1, keepdims=True))
            heads.append((a / a.sum(-1, keepdims=True)) @ vh)
        x = x + np.concatenate(heads, -1) @ w["wo"][l].T
        h = rms(x, w["rms_ffn"][l])
        gate = h @ w["w1"][l].T
        x = x + ((gate / (1 + np.exp(-gate))) * (h @ w["w3"][l].T)) @ w["w2"][l].T
    return rms(x, w["rms_final"]) @ w["cls"].T


def run(*argv, ok=True):
    r = subprocess.run(list(argv), capture_output=True, text=True)
    if ok and r.returncode != 0:
        raise AssertionError(f"{argv} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def check(tinylm, source, tmp, extra):
    path = lambda *p: os.path.join(tmp, *p)
    out = path("run" + str(len(extra)))
    run(tinylm, "train", os.path.join(source, "configs/tiny.toml"), "--out", out, "--threads", "1",
        "--train.max_iters=200", "--model.pos_encoding=rope", "--model.norm=rmsnorm",
        "--model.mlp=swiglu", "--model.bias=false", "--model.n_kv_head=1", *extra)
    os.makedirs(out + "-l2c")
    run(tinylm, "export", out, "--format", "llama2c", "--out", os.path.join(out + "-l2c", "model.bin"))
    cfg, w = read_model(os.path.join(out + "-l2c", "model.bin"))
    vocab = json.load(open(os.path.join(out, "tokenizer.json")))["vocab"]
    pieces = read_tokenizer(os.path.join(out + "-l2c", "tokenizer.bin"), cfg["vocab"])
    assert pieces == [ch.encode("utf-8") for ch in vocab], "tokenizer.bin differs from the vocabulary"
    text = "ROMEO:\nBut soft, what light through yonder window breaks?\nIt is the east.\n"
    open(path("text.txt"), "w").write(text)
    ids = np.array([vocab.index(ch) for ch in text])
    T, nats = cfg["seq_len"], 0.0
    for start in range(0, len(ids) - 1, T):
        x = ids[start:min(start + T, len(ids) - 1)]
        y = ids[start + 1:start + 1 + len(x)]
        logits = forward(cfg, w, x)
        logits = logits - logits.max(-1, keepdims=True)
        nats -= (logits - np.log(np.exp(logits).sum(-1, keepdims=True)))[np.arange(len(y)), y].sum()
    ours = nats / (len(ids) - 1)
    theirs = json.loads(run(tinylm, "eval", out, "--text", path("text.txt"), "--json",
                            "--threads", "1").stdout)["loss"]
    print(f"llama2.c layout {'shared' if cfg['shared'] else 'untied'} classifier: numpy "
          f"{ours:.7f}, tinylm eval {theirs:.7f}")
    assert abs(ours - theirs) < 1e-5, (ours, theirs)
    assert ours < math.log(len(vocab)) - 0.3, "the run should have learned something"


def main():
    tinylm, source = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        check(tinylm, source, tmp, [])
        check(tinylm, source, tmp, ["--model.tie_weights=false"])
        gpt2 = os.path.join(tmp, "gpt2")
        run(tinylm, "train", os.path.join(source, "configs/tiny.toml"), "--out", gpt2,
            "--threads", "1", "--train.max_iters=1")
        r = run(tinylm, "export", gpt2, "--format", "llama2c", "--out", os.path.join(tmp, "m.bin"), ok=False)
        for phrase in ['model.pos_encoding = "learned"', 'model.norm = "layernorm"',
                       'model.mlp = "gelu"', "model.bias = true"]:
            assert r.returncode == 1 and phrase in r.stderr, (phrase, r.stderr)
        assert not os.path.exists(os.path.join(tmp, "m.bin"))
    print("llama2c export: 2 layouts read back, refusal named")


if __name__ == "__main__":
    main()
