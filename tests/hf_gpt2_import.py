#!/usr/bin/env python3
"""Hugging Face's GPT-2 into tinylm, checked against a numpy GPT-2.

1. Writes a small GPT-2 directory the way save_pretrained leaves one: config.json
   (GPT2Config), model.safetensors (random weights under Hugging Face's names, Conv1D
   weights as (in, out), the old causal-mask buffers), vocab.json and merges.txt (GPT-2's
   byte-to-unicode map and a few merges learned here from Shakespeare).
2. `tinylm import` makes a run of it; `tinylm eval --text --logits` gives logits that equal
   GPT-2's forward pass written here in numpy (float64, GELU's tanh approximation) within
   1e-5, and tokens that decode to the text. Both layouts: the Hub's names with a tied head,
   and GPT2LMHeadModel's "transformer." names with an untied lm_head.
3. The imported run samples, is inspected and fine-tunes (`train --resume`).
4. Bad inputs are refused with exit 1 and a message naming what is wrong, and write nothing.

usage: hf_gpt2_import.py TINYLM SOURCE_DIR
"""
import collections
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

CONFIG = dict(model_type="gpt2", architectures=["GPT2LMHeadModel"], n_layer=2, n_head=2,
              n_embd=16, n_positions=32, n_ctx=32, activation_function="gelu_new",
              layer_norm_epsilon=1e-5, n_inner=None, scale_attn_weights=True,
              resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1, bos_token_id=0, eos_token_id=0)


def bytes_to_unicode():
    """GPT-2's map: printable Latin-1 bytes stand for themselves, the rest move to 256+."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, moved = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + moved)
            moved += 1
    return table


def learn_merges(text, count):
    """A few BPE merges by pair frequency over space-split words (enough for a vocabulary)."""
    byte_map = bytes_to_unicode()
    words = collections.Counter()
    for i, word in enumerate(text.split(" ")):
        words[tuple(byte_map[b] for b in ((" " if i else "") + word).encode())] += 1
    merges = []
    for _ in range(count):
        pairs = collections.Counter()
        for word, n in words.items():
            for a, b in zip(word, word[1:]):
                pairs[(a, b)] += n
        (a, b), _ = pairs.most_common(1)[0]
        merges.append((a, b))
        merged = collections.Counter()
        for word, n in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += n
        words = merged
    return merges


def write_safetensors(path, tensors, dtype="F32"):
    header, blobs, offset = {}, [], 0
    np_type = {"F32": "<f4", "F16": "<f2"}[dtype]
    for name, array in tensors.items():
        blob = np.ascontiguousarray(array, dtype=np_type).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    head = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    types = {"F32": "<f4", "I64": "<i8"}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=types[e["dtype"]]).reshape(e["shape"])
    return out


def hf_weights(cfg, rng):
    """GPT-2's tensors as Hugging Face stores them: Conv1D weights (in, out)."""
    C, V, T = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
    w = {"wte.weight": rng.normal(0, 0.3, (V, C)), "wpe.weight": rng.normal(0, 0.3, (T, C)),
         "ln_f.weight": 1 + rng.normal(0, 0.1, C), "ln_f.bias": rng.normal(0, 0.1, C)}
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        w.update({p + "ln_1.weight": 1 + rng.normal(0, 0.1, C), p + "ln_1.bias": rng.normal(0, 0.1, C),
                  p + "attn.c_attn.weight": rng.normal(0, 0.3, (C, 3 * C)),
                  p + "attn.c_attn.bias": rng.normal(0, 0.1, 3 * C),
                  p + "attn.c_proj.weight": rng.normal(0, 0.3, (C, C)),
                  p + "attn.c_proj.bias": rng.normal(0, 0.1, C),
                  p + "ln_2.weight": 1 + rng.normal(0, 0.1, C), p + "ln_2.bias": rng.normal(0, 0.1, C),
                  p + "mlp.c_fc.weight": rng.normal(0, 0.3, (C, 4 * C)),
                  p + "mlp.c_fc.bias": rng.normal(0, 0.1, 4 * C),
                  p + "mlp.c_proj.weight": rng.normal(0, 0.3, (4 * C, C)),
                  p + "mlp.c_proj.bias": rng.normal(0, 0.1, C),
                  # The causal mask and -1e4 that transformers < 4.31 saved as buffers.
                  p + "attn.bias": np.tril(np.ones((T, T)))[None, None],
                  p + "attn.masked_bias": np.array(-1e4)})
    return w


def gpt2_forward(cfg, w, ids, head):
    """GPT-2's forward pass (Hugging Face's GPT2LMHeadModel) in float64: logits (T, V)."""
    C, H = cfg["n_embd"], cfg["n_head"]
    hs = C // H

    def layer_norm(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * w[p + ".weight"] + w[p + ".bias"]

    def conv1d(x, p):  # x @ W + b, W (in, out)
        return x @ w[p + ".weight"] + w[p + ".bias"]

    def gelu_new(x):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    T = len(ids)
    x = w["wte.weight"][ids] + w["wpe.weight"][:T]
    mask = np.tril(np.ones((T, T), dtype=bool))
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        q, k, v = np.split(conv1d(layer_norm(x, p + "ln_1"), p + "attn.c_attn"), 3, axis=-1)
        heads = []
        for h in range(H):
            s = slice(h * hs, (h + 1) * hs)
            scores = np.where(mask, q[:, s] @ k[:, s].T / math.sqrt(hs), -np.inf)
            a = np.exp(scores - scores.max(-1, keepdims=True))
            heads.append((a / a.sum(-1, keepdims=True)) @ v[:, s])
        x = x + conv1d(np.concatenate(heads, -1), p + "attn.c_proj")
        x = x + conv1d(gelu_new(conv1d(layer_norm(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    return layer_norm(x, "ln_f") @ head.T


def run(*argv, ok=True):
    r = subprocess.run(list(argv), capture_output=True, text=True, errors="replace")  # samples: any bytes
    if ok and r.returncode != 0:
        raise AssertionError(f"{argv} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def write_model_dir(d, cfg, weights, vocab, merges, prefix="", dtype="F32"):
    os.makedirs(d, exist_ok=True)
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=2)
    write_safetensors(os.path.join(d, "model.safetensors"),
                      {(prefix + k if k != "lm_head.weight" else k): v for k, v in weights.items()}, dtype)
    json.dump(vocab, open(os.path.join(d, "vocab.json"), "w", encoding="utf-8"), ensure_ascii=False)
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))


def main():
    tinylm, source = sys.argv[1], sys.argv[2]
    corpus = os.path.join(source, "data/corpora/tinyshakespeare.txt")
    shakespeare = open(corpus, encoding="utf-8").read()
    byte_map = bytes_to_unicode()
    merges = learn_merges(shakespeare[:20000], 40)
    vocab = {byte_map[b]: b for b in range(256)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    vocab["<|endoftext|>"] = len(vocab)  # last, as in GPT-2 (50256)
    cfg = dict(CONFIG, vocab_size=len(vocab))
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        path = lambda *p: os.path.join(tmp, *p)
        text = shakespeare[3000:3400]
        open(path("text.txt"), "w", encoding="utf-8").write(text)
        unmap = {c: b for b, c in byte_map.items()}
        inverse = {i: t for t, i in vocab.items()}

        # 1-2. Both layouts: import, logits against numpy, tokens against the text.
        layouts = [("hub", dict(cfg), "", False),
                   ("lmhead", dict(cfg, tie_word_embeddings=False), "transformer.", True)]
        weights = {}
        for name, c, prefix, untied in layouts:
            w = weights[name] = hf_weights(c, rng)
            if untied:
                w["lm_head.weight"] = rng.normal(0, 0.3, (c["vocab_size"], c["n_embd"]))
            write_model_dir(path(name), c, w, vocab, merges, prefix)
            run(tinylm, "import", path(name), "--out", path(name + "-run"), "--data", corpus)
            run(tinylm, "eval", path(name + "-run"), "--text", path("text.txt"), "--logits",
                path(name + ".logits"))
            got = read_safetensors(path(name + ".logits"))
            ids = got["tokens"].astype(np.int64)
            assert len(ids) == c["n_positions"], len(ids)  # the first window: block_size tokens
            decoded = bytes(unmap[ch] for i in ids for ch in inverse[int(i)]).decode()
            assert text.startswith(decoded), (decoded, text[:len(decoded)])
            head = w["lm_head.weight"] if untied else w["wte.weight"]
            want = gpt2_forward(c, w, ids, head)
            diff = np.abs(got["logits"] - want).max()
            assert diff < 1e-5, f"{name}: logits differ from numpy's GPT-2 by {diff:.3g}"
            print(f"{name}: {len(ids)} tokens, logits within {diff:.2g} of numpy's GPT-2 "
                  f"(logit spread {want.std():.2f})")
            state = json.load(open(path(name + "-run", "config.json")))
            assert state["mlp"] == "gelu_tanh" and state["tie_weights"] == (not untied), state

        # 3. The run samples, is inspected, and fine-tunes.
        r = run(tinylm, "sample", path("hub-run"), "--prompt", "ROMEO:", "--max-new-tokens", "12",
                "--temperature", "0")
        assert r.stdout.startswith("ROMEO:"), r.stdout
        # sample --bos starts from <|endoftext|>: the greedy bytes are numpy's GPT-2's.
        ids = [vocab["<|endoftext|>"]]
        for _ in range(8):
            logits = gpt2_forward(cfg, weights["hub"], np.array(ids), weights["hub"]["wte.weight"])
            ids.append(int(np.argmax(logits[-1])))
        want = bytes(unmap[ch] for i in ids[1:] for ch in inverse[i])
        # --bos alone: the context is <|endoftext|> alone, as run.c starts (not the run's
        # default prompt after it).
        command = [tinylm, "sample", path("hub-run"), "--bos", "--temperature", "0",
                   "--max-new-tokens", "8", "--num-samples", "1"]
        r = subprocess.run(command + ["--bytes"], capture_output=True)
        assert r.returncode == 0 and r.stdout.rstrip(b"\n") == want.rstrip(b"\n"), (r.stdout, want)
        command += ["--prompt", ""]  # the same, said in full
        # Without --bytes the text is valid UTF-8: what is not becomes U+FFFD, as Python's
        # errors="replace" writes it.
        r = subprocess.run(command, capture_output=True)
        text = want.decode("utf-8", errors="replace").encode("utf-8")
        assert r.returncode == 0 and r.stdout.rstrip(b"\n") == text.rstrip(b"\n"), (r.stdout, text)
        run(tinylm, "train", os.path.join(source, "configs/tiny.toml"), "--out", path("char-run"),
            "--train.max_iters=1", "--threads", "1")
        r = run(tinylm, "sample", path("char-run"), "--bos", ok=False)
        assert r.returncode == 2 and "has no beginning-of-sequence token" in r.stderr, r.stderr
        r = run(tinylm, "inspect", path("hub-run"), "--prompt", "First Citizen: we are", "--heads")
        # GPT-2's pieces carry their leading space (" we"): a table shows it ("\u2423we"), so no
        # piece looks blank or runs into the one before it.
        tokens = next(line for line in r.stdout.splitlines() if line.startswith("attention patterns"))
        tokens = tokens.split(":", 1)[1][1:]
        assert "\u2423" in tokens and "  " not in tokens and " \n" not in tokens, tokens
        run(tinylm, "train", path("hub-run", "config.toml"), "--out", path("hub-run"), "--resume",
            "--train.max_iters=2", "--train.batch_size=2", "--train.eval_interval=2",
            "--train.eval_iters=1", "--train.warmup_iters=1", "--train.lr_decay_iters=2",
            "--threads", "1")
        assert json.load(open(path("hub-run", "state.json")))["step"] == 2

        # 4. Bad inputs: exit 1, a message naming the problem, nothing written.
        w = hf_weights(cfg, rng)
        cases = []

        def case(label, message, c=cfg, weights=w, voc=vocab, mer=merges, edit=None):
            d = path("bad-" + label)
            write_model_dir(d, c, weights, voc, mer)
            if edit:
                edit(d)
            cases.append((label, d, message))

        case("llama", 'model_type is "llama": tinylm imports Hugging Face\'s gpt2 models',
             c=dict(cfg, model_type="llama"))
        case("relu", 'activation_function "relu" is not one tinylm has', c=dict(cfg, activation_function="relu"))
        case("eps", "layer_norm_epsilon is 1e-06, not 1e-5", c=dict(cfg, layer_norm_epsilon=1e-6))
        case("inverse", "scale_attn_by_inverse_layer_idx is true", c=dict(cfg, scale_attn_by_inverse_layer_idx=True))
        case("shape", "h.0.attn.c_attn.bias is (48), but config.json's model needs (96)",
             c=dict(cfg, n_embd=32, vocab_size=len(vocab)))
        case("missing", "lacks h.1.mlp.c_proj.bias", weights={k: v for k, v in w.items() if k != "h.1.mlp.c_proj.bias"})
        case("foreign", "holds h.0.attn.q_proj.weight, which is not a tensor of GPT-2's",
             weights=dict(w, **{"h.0.attn.q_proj.weight": np.zeros((16, 16))}))
        case("vocab", "tokens, config.json's vocab_size is", c=dict(cfg, vocab_size=len(vocab) + 1))
        case("no-merges", "merges.txt is missing", edit=lambda d: os.remove(os.path.join(d, "merges.txt")))
        case("no-weights", "model.safetensors is missing",
             edit=lambda d: os.remove(os.path.join(d, "model.safetensors")))

        def truncate(d):
            f = os.path.join(d, "model.safetensors")
            raw = open(f, "rb").read()
            open(f, "wb").write(raw[:len(raw) - 100])

        case("truncated", "model.safetensors", edit=truncate)
        case("config-json", "config.json: not valid JSON",
             edit=lambda d: open(os.path.join(d, "config.json"), "w").write("{\"n_layer\": "))
        for label, d, message in cases:
            out = path("out-" + label)
            r = run(tinylm, "import", d, "--out", out, "--data", corpus, ok=False)
            assert r.returncode == 1 and message in r.stderr, (label, r.returncode, r.stderr)
            assert not os.path.exists(out), f"{label}: {out} was written"
        r = run(tinylm, "import", path("hub"), "--out", path("out-meta"), "--data", corpus, "--meta",
                path("hub", "vocab.json"), ok=False)
        assert r.returncode == 2 and "--meta is nanoGPT's char vocabulary" in r.stderr, r.stderr
        print(f"bad inputs: {len(cases) + 1} refused")
    print("Hugging Face GPT-2 import: logits, sample, inspect, fine-tune and bad inputs passed")


if __name__ == "__main__":
    main()
