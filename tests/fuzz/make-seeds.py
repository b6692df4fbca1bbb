#!/usr/bin/python3
"""Writes the fuzz targets' seed inputs (tests/fuzz/seeds/TARGET/): small valid files of each
format, made by their reference writers where there is one (PyTorch's torch.save, pickle,
spm_train) and from a tinylm run for the rest. Usage: make-seeds.py TINYLM SOURCE_DIR.
Findings are added by hand beside them (named finding-*), and never regenerated."""
import collections, json, os, pickle, shutil, struct, subprocess, sys, tempfile

import numpy as np
import torch
import xxhash

tinylm, source = sys.argv[1], sys.argv[2]
seeds = os.path.join(source, "tests/fuzz/seeds")


def put(target, name, data):
    os.makedirs(os.path.join(seeds, target), exist_ok=True)
    with open(os.path.join(seeds, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata):
    """The format by its specification, with tinylm's per-tensor checksums."""
    header, blobs, offset = {}, [], 0
    meta = dict(metadata)
    for name, (dtype, array) in tensors.items():
        raw = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        meta["xxh3_64:" + name] = xxhash.xxh3_64_hexdigest(raw)
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


with tempfile.TemporaryDirectory() as tmp:
    config = os.path.join(tmp, "tiny.toml")
    with open(config, "w") as f:
        f.write(f'[model]\nn_layer = 1\nn_head = 1\nn_embd = 4\nblock_size = 4\n'
                f'[data]\npath = "{source}/data/corpora/tinyshakespeare.txt"\n'
                f'cache_dir = "{tmp}/cache"\n[train]\nbatch_size = 1\nmax_iters = 1\n'
                f'warmup_iters = 0\nlr_decay_iters = 1\neval_interval = 1\neval_iters = 1\n')
    run = os.path.join(tmp, "run")
    subprocess.run([tinylm, "train", config, "--out", run, "--threads", "1"], check=True,
                   stderr=subprocess.DEVNULL)
    put("safetensors", "model.safetensors", open(f"{run}/model.safetensors", "rb").read())
    put("config_json", "config.json", open(f"{run}/config.json").read())
    state = open(f"{run}/state.json").read()
    put("state_json", "state.json", state)
    legacy = json.loads(state)
    for key in ("files", "checksum"):
        legacy.pop(key)
    legacy["format"] = 1
    put("state_json", "state-format-1.json", json.dumps(legacy, indent=2))
    put("tokenizer_json", "char.json", open(f"{run}/tokenizer.json").read())
    put("toml_config", "run.toml", open(f"{run}/config.toml").read())
    # A token file: the header of the cache's, cut to 8 tokens.
    cached = [os.path.join(d, f) for d, _, fs in os.walk(f"{tmp}/cache") for f in fs
              if f.endswith(".bin")][0]
    head = bytearray(open(cached, "rb").read(64 + 16))
    head[16:24] = struct.pack("<Q", 8)
    put("token_file", "train.bin", bytes(head))

put("safetensors", "dtypes.safetensors", safetensors(
    {"f32": ("F32", np.arange(6, dtype=np.float32).reshape(2, 3)),
     "i64": ("I64", np.array([1, -2], dtype=np.int64)),
     "u8": ("U8", np.zeros((0, 3), dtype=np.uint8)),
     "bf16": ("BF16", np.array([0x3f80, 0xc000], dtype=np.uint16))}, {"step": "3"}))
put("config_json", "rope.json", json.dumps(
    {"n_layer": 2, "n_head": 4, "n_embd": 32, "block_size": 64, "vocab_size": 100,
     "dropout": 0.0, "bias": False, "tie_weights": True, "pos_encoding": "rope",
     "norm": "rmsnorm", "mlp": "swiglu"}))
put("tokenizer_json", "byte.json", '{"type":"byte"}\n')
for name in ("tiny.toml", "shakespeare_char.toml", "shakespeare_bpe.toml", "induction.toml"):
    put("toml_config", name, open(os.path.join(source, "configs", name)).read())

put("nanogpt_meta", "meta.pkl", pickle.dumps(
    {"vocab_size": 3, "itos": {0: "a", 1: "b", 2: "\n"}, "stoi": {"a": 0, "b": 1, "\n": 2}}))
args = dict(n_layer=1, n_head=1, n_embd=4, block_size=4, bias=True, vocab_size=3, dropout=0.0)
g = torch.Generator().manual_seed(1)
C, V, T = 4, 3, 4
shapes = [("transformer.wte.weight", (V, C)), ("transformer.wpe.weight", (T, C))]
p = "transformer.h.0."
shapes += [(p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,)),
           (p + "attn.c_attn.weight", (3 * C, C)), (p + "attn.c_attn.bias", (3 * C,)),
           (p + "attn.c_proj.weight", (C, C)), (p + "attn.c_proj.bias", (C,)),
           (p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,)),
           (p + "mlp.c_fc.weight", (4 * C, C)), (p + "mlp.c_fc.bias", (4 * C,)),
           (p + "mlp.c_proj.weight", (C, 4 * C)), (p + "mlp.c_proj.bias", (C,)),
           ("transformer.ln_f.weight", (C,)), ("transformer.ln_f.bias", (C,))]
state = collections.OrderedDict((n, torch.randn(s, generator=g)) for n, s in shapes)
state["lm_head.weight"] = state["transformer.wte.weight"]
state._metadata = collections.OrderedDict([("", {"version": 1})])
with tempfile.TemporaryDirectory() as tmp:
    torch.save({"model": state, "model_args": args, "iter_num": 1,
                "best_val_loss": torch.tensor(2.5), "config": {"dataset": "x"}},
               os.path.join(tmp, "ckpt.pt"))
    put("nanogpt_checkpoint", "ckpt.pt", open(os.path.join(tmp, "ckpt.pt"), "rb").read())

vocab = {"!": 0, "a": 1, "b": 2, "Ġ": 3, "ab": 4, "Ġa": 5, "<|endoftext|>": 6}
put("gpt2_vocabulary", "tiny", json.dumps(vocab) + "\0#version: 0.2\na b\nĠ a\n")

with tempfile.TemporaryDirectory() as tmp:
    text = os.path.join(tmp, "text.txt")
    with open(text, "w") as f:
        f.write(open(os.path.join(source, "data/corpora/tinyshakespeare.txt")).read()[:20000])
    prefix = os.path.join(tmp, "m")
    subprocess.run(["spm_train", f"--input={text}", f"--model_prefix={prefix}",
                    "--vocab_size=80", "--model_type=bpe", "--character_coverage=1.0", "--normalization_rule_name=identity"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    put("sentencepiece", "bpe80.model", open(prefix + ".model", "rb").read())
    subprocess.run(["spm_train", f"--input={text}", f"--model_prefix={prefix}",
                    "--vocab_size=100", "--model_type=unigram", "--character_coverage=1.0", "--normalization_rule_name=identity"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    put("sentencepiece", "unigram100.model", open(prefix + ".model", "rb").read())
