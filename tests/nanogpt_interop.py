#!/usr/bin/env python3
"""nanoGPT's ckpt.pt into tinylm and back, checked with Debian's python3-torch.

1. Writes a ckpt.pt the way nanoGPT's train.py does (model, an OrderedDict with _metadata
   as state_dict() makes it, with torch.compile's _orig_mod. prefix and the tied lm_head.weight, model_args, iter_num, best_val_loss, config, and a
   real torch.optim.AdamW state after two steps in nanoGPT's two groups) and its meta.pkl,
   for a small GPT with random weights.
2. `tinylm import` makes a run of it; `tinylm eval --text` equals this script's PyTorch
   forward loss (nanoGPT's GPT, written out below) within 1e-5; `train --resume` goes on.
3. `tinylm export --format nanogpt` writes it back: torch.load reads it, its weights and
   AdamW moments equal the original bit for bit, its optimizer state loads into
   torch.optim.AdamW, and pickle.load reads its meta.pkl.
4. Importing the export gives bit-identical model.safetensors weights and the same eval.
5. Bad inputs are refused with exit 1 and a message, and write nothing.

usage: nanogpt_interop.py TINYLM SOURCE_DIR
"""
import collections
import datetime
import json
import math
import os
import pickle
import subprocess
import sys
import tempfile
import zipfile

import torch
import torch.nn.functional as F

ARGS = dict(n_layer=2, n_head=2, n_embd=16, block_size=16, bias=True, vocab_size=0, dropout=0.0)


def named_parameters(args, generator):
    """nanoGPT's GPT parameters, in its named_parameters order, random (biases too)."""
    C, V, T = args["n_embd"], args["vocab_size"], args["block_size"]
    shapes = [("transformer.wte.weight", (V, C)), ("transformer.wpe.weight", (T, C))]
    for i in range(args["n_layer"]):
        p = f"transformer.h.{i}."
        shapes += [(p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,)),
                   (p + "attn.c_attn.weight", (3 * C, C)), (p + "attn.c_attn.bias", (3 * C,)),
                   (p + "attn.c_proj.weight", (C, C)), (p + "attn.c_proj.bias", (C,)),
                   (p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,)),
                   (p + "mlp.c_fc.weight", (4 * C, C)), (p + "mlp.c_fc.bias", (4 * C,)),
                   (p + "mlp.c_proj.weight", (C, 4 * C)), (p + "mlp.c_proj.bias", (C,))]
    shapes += [("transformer.ln_f.weight", (C,)), ("transformer.ln_f.bias", (C,))]
    return {name: torch.nn.Parameter(torch.randn(shape, generator=generator) * 0.3)
            for name, shape in shapes}


def forward(w, args, idx):
    """nanoGPT's GPT.forward: logits (B, T, V) for idx (B, T)."""
    B, T = idx.shape
    C, nh = args["n_embd"], args["n_head"]
    x = w["transformer.wte.weight"][idx] + w["transformer.wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(args["n_layer"]):
        p = f"transformer.h.{i}."
        h = F.layer_norm(x, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        q, k, v = F.linear(h, w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"]).split(C, 2)
        q, k, v = (t.view(B, T, nh, C // nh).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // nh)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(y, w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"])
        h = F.layer_norm(x, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        h = F.gelu(F.linear(h, w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"]))
        x = x + F.linear(h, w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], 1e-5)
    return x @ w["transformer.wte.weight"].t()


def eval_loss(w, args, ids):
    """tinylm eval's windows: consecutive, block_size inputs, every token predicted once."""
    T, nats = args["block_size"], 0.0
    with torch.no_grad():
        for start in range(0, len(ids) - 1, T):
            x = ids[start:min(start + T, len(ids) - 1)]
            y = ids[start + 1:start + 1 + len(x)]
            logits = forward(w, args, x[None].long()).double()
            nats += F.cross_entropy(logits[0], y.long(), reduction="sum").item()
    return nats / (len(ids) - 1)


def adamw_groups(w):
    decay = [p for p in w.values() if p.dim() >= 2]
    rest = [p for p in w.values() if p.dim() < 2]
    return [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]


def run(*argv, ok=True):
    r = subprocess.run(list(argv), capture_output=True, text=True)
    if ok and r.returncode != 0:
        raise AssertionError(f"{argv} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def main():
    tinylm, source = sys.argv[1], sys.argv[2]
    corpus = os.path.join(source, "data/corpora/tinyshakespeare.txt")
    text = open(corpus, encoding="utf-8").read()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    args = dict(ARGS, vocab_size=len(chars))
    g = torch.Generator().manual_seed(5)
    w = named_parameters(args, g)
    # Two AdamW steps as nanoGPT's configure_optimizers groups them.
    opt = torch.optim.AdamW(adamw_groups(w), lr=1e-3, betas=(0.9, 0.99))
    ids = torch.tensor([stoi[c] for c in text[:2000]])
    for _ in range(2):
        x = ids[:64].view(4, 16)
        loss = F.cross_entropy(forward(w, args, x[:, :-1]).reshape(-1, len(chars)), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    # A state_dict() is an OrderedDict with _metadata, which LibTorch 1.13 cannot read as it is.
    state = collections.OrderedDict(("_orig_mod." + k, v.detach().clone()) for k, v in w.items())
    state["_orig_mod.lm_head.weight"] = state["_orig_mod.transformer.wte.weight"]
    state._metadata = collections.OrderedDict([("", {"version": 1}), ("transformer", {"version": 1})])
    ckpt = {"model": state, "optimizer": opt.state_dict(), "model_args": args, "iter_num": 2,
            "best_val_loss": torch.tensor(3.25),
            "config": {"dataset": "shakespeare_char", "learning_rate": 1e-3, "max_iters": 5000,
                       "beta2": 0.99, "batch_size": 4, "dtype": "float16", "warmup_iters": 10,
                       "lr_decay_iters": 5000, "min_lr": 1e-4, "wandb": {"project": "x"}}}

    with tempfile.TemporaryDirectory() as tmp:
        path = lambda *p: os.path.join(tmp, *p)
        torch.save(ckpt, path("ckpt.pt"))
        with open(path("meta.pkl"), "wb") as f:
            pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}, f)
        text_path = path("text.txt")
        sample = text[5000:5300]
        open(text_path, "w", encoding="utf-8").write(sample)
        sample_ids = torch.tensor([stoi[c] for c in sample])
        theirs = eval_loss(w, args, sample_ids)

        # 2. Import, eval, resume.
        run(tinylm, "import", path("ckpt.pt"), "--out", path("run"), "--meta", path("meta.pkl"),
            "--data", corpus, "--threads", "1")
        ours = json.loads(run(tinylm, "eval", path("run"), "--text", text_path, "--json",
                              "--threads", "1").stdout)["loss"]
        print(f"imported: tinylm eval {ours:.7f}, PyTorch forward {theirs:.7f}")
        assert abs(ours - theirs) < 1e-5, (ours, theirs)
        state_json = json.load(open(path("run", "state.json")))
        assert state_json["step"] == 2 and abs(state_json["best_val_loss"] - 3.25) < 1e-6, state_json
        toml = open(path("run", "config.toml")).read()
        assert "max_iters = 5000" in toml and "beta2 = 0.99" in toml, toml

        # A checkpoint whose training diverged elsewhere: its weights hold NaN. It imports (the
        # file is what it is), and every command that reads the run then says so once, by name,
        # instead of failing deep inside LibTorch.
        diverged = dict(ckpt, model=collections.OrderedDict(state))
        bad = diverged["model"]["_orig_mod.transformer.h.0.attn.c_attn.weight"].clone()
        bad[0, :3] = float("nan")
        diverged["model"]["_orig_mod.transformer.h.0.attn.c_attn.weight"] = bad
        diverged["model"]._metadata = state._metadata
        torch.save(diverged, path("nan.pt"))
        run(tinylm, "import", path("nan.pt"), "--out", path("nan"), "--meta", path("meta.pkl"),
            "--data", corpus, "--threads", "1")
        for command in (["eval"], ["sample"], ["inspect", "--heads"]):
            r = run(tinylm, command[0], path("nan"), *command[1:], "--threads", "1", ok=False)
            assert r.returncode == 1 and r.stderr.count("its weights are not finite") == 1 and \
                "transformer.h.0.attn.c_attn.weight has 3 NaN or infinite values" in r.stderr, \
                (command, r.stderr)

        # A checkpoint trained on a GPU: its storages' location is "cuda:0" (this PyTorch
        # has no CUDA to write one: the cpu ones are renamed in data.pkl, same length kept).
        with zipfile.ZipFile(path("ckpt.pt")) as z, zipfile.ZipFile(path("gpu.pt"), "w") as out:
            for item in z.infolist():
                data = z.read(item.filename)
                if item.filename.endswith("data.pkl"):
                    data = data.replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0")
                    assert b"cuda:0" in data
                out.writestr(item, data)
        with open(path("meta2.pkl"), "wb") as f:  # protocol 2, which LibTorch reads as it is
            pickle.dump(pickle.load(open(path("meta.pkl"), "rb")), f, protocol=2)
        run(tinylm, "import", path("gpu.pt"), "--out", path("gpu"), "--meta", path("meta2.pkl"),
            "--data", corpus)
        assert open(path("gpu", "model.safetensors"), "rb").read() == \
            open(path("run", "model.safetensors"), "rb").read()

        # 3. Export: torch.load, bit-identical weights and moments, AdamW loads the state.
        run(tinylm, "export", path("run"), "--format", "nanogpt", "--out", path("out", "ckpt.pt"))
        assert os.path.isdir(path("out"))  # made for it
        back = torch.load(path("out", "ckpt.pt"))
        assert back["model_args"] == args, back["model_args"]
        assert back["iter_num"] == 2 and back["config"]["dataset"] == "run", back["config"]
        for name, p in w.items():
            assert torch.equal(back["model"][name], p.detach()), name
        assert torch.equal(back["model"]["lm_head.weight"], w["transformer.wte.weight"].detach())
        assert set(back["model"]) == set(w) | {"lm_head.weight"}, sorted(back["model"])
        fresh = {k: torch.nn.Parameter(v.clone()) for k, v in back["model"].items() if k != "lm_head.weight"}
        reloaded = torch.optim.AdamW(adamw_groups(fresh), lr=1e-3)
        reloaded.load_state_dict(back["optimizer"])
        original = opt.state_dict()["state"]
        for i, s in back["optimizer"]["state"].items():
            for key in ("exp_avg", "exp_avg_sq"):
                assert torch.equal(s[key], original[i][key]), (i, key)
            assert float(s["step"]) == float(original[i]["step"]), (i, s["step"])
        meta = pickle.load(open(path("out", "meta.pkl"), "rb"))
        assert meta["itos"] == dict(enumerate(chars)) and meta["stoi"] == stoi
        masked = path("out", "masked.pt")
        run(tinylm, "export", path("run"), "--format", "nanogpt", "--out", masked, "--mask-buffers")
        mask = torch.load(masked)["model"]["transformer.h.1.attn.bias"]
        assert mask.shape == (1, 1, 16, 16) and torch.equal(mask[0, 0], torch.tril(torch.ones(16, 16)))

        # 4. The export imported again: the same weights to the bit, the same eval.
        run(tinylm, "import", path("out", "ckpt.pt"), "--out", path("again"), "--meta",
            path("out", "meta.pkl"), "--data", corpus)
        first = open(path("run", "model.safetensors"), "rb").read()
        second = open(path("again", "model.safetensors"), "rb").read()
        assert first == second, "model.safetensors differs after export and import"
        # Exact: the weights are the same bits (asserted above), and the same binary at the
        # same thread count runs the same float operations in the same order on any CPU.
        again = json.loads(run(tinylm, "eval", path("again"), "--text", text_path, "--json",
                               "--threads", "1").stdout)
        assert again["loss"] == ours, (again["loss"], ours)
        r = run(tinylm, "train", path("run", "config.toml"), "--out", path("run"), "--resume",
                "--train.max_iters=4",
                "--train.eval_interval=2", "--train.eval_iters=1", "--threads", "1")
        assert json.load(open(path("run", "state.json")))["step"] == 4, r.stderr

        # 5. Bad inputs: exit 1, a message, nothing written.
        raw = open(path("ckpt.pt"), "rb").read()
        open(path("truncated.pt"), "wb").write(raw[:len(raw) // 2])
        torch.save([1, 2, 3], path("list.pt"))
        torch.save({k: v for k, v in ckpt.items() if k != "model_args"}, path("no_args.pt"))
        torch.save(dict(ckpt, model_args=dict(args, n_embd=32)), path("shapes.pt"))
        torch.save(dict(ckpt, model_args=dict(args, rotary=True)), path("arch.pt"))
        with open(path("plain.pkl"), "wb") as f:
            pickle.dump({"model": 1}, f)
        # A dict inside itself: LibTorch's reference-counted values would never free it.
        loop = {}
        loop["self"] = loop
        torch.save(dict(ckpt, config=loop), path("cycle.pt"))
        torch.save(dict(ckpt, config={"when": datetime.date(2026, 1, 1)}), path("import.pt"))
        cases = [("truncated.pt", "not a torch.save file"), ("list.pt", "holds a GenericList"),
                 ("no_args.pt", "the checkpoint has no 'model_args'"),
                 ("shapes.pt", "transformer.wte.weight is (65, 16), model_args imply (65, 32)"),
                 ("arch.pt", "model_args has 'rotary', which nanoGPT's GPTConfig lacks"),
                 ("plain.pkl", "not a torch.save file"),
                 ("cycle.pt", "refers to one dict or list twice"),
                 ("import.pt", "imports datetime.date, which tinylm does not read")]
        meta = pickle.load(open(path("meta.pkl"), "rb"))
        bad_metas = {"meta-cycle.pkl": pickle.dumps(dict(meta, stoi=loop), protocol=4),
                     "meta-shared.pkl": pickle.dumps(dict(meta, b=meta["itos"]), protocol=2),
                     "meta-import.pkl": pickle.dumps(dict(meta, when=datetime.date(2026, 1, 1)), protocol=2),
                     "meta-dup.pkl": b"\x80\x02](2e."}  # DUP: a list inside itself
        for name, data in bad_metas.items():
            open(path(name), "wb").write(data)
        cases += [("meta-cycle.pkl", "refers to one dict or list twice"),
                  ("meta-shared.pkl", "refers to one dict or list twice"),
                  ("meta-import.pkl", "imports datetime.date, which tinylm does not read"),
                  ("meta-dup.pkl", "uses opcode 0x32")]
        for name, message in cases:
            out = path("bad-" + name)
            checkpoint, meta_file = (path("ckpt.pt"), path(name)) if name.startswith("meta-") \
                else (path(name), path("meta.pkl"))
            r = run(tinylm, "import", checkpoint, "--out", out, "--meta", meta_file,
                    "--data", corpus, ok=False)
            assert r.returncode == 1 and message in r.stderr, (name, r.returncode, r.stderr)
            assert not os.path.exists(out), f"{name}: {out} was written"
        r = run(tinylm, "import", path("ckpt.pt"), "--out", path("bad-meta"), "--data", corpus, ok=False)
        assert r.returncode == 2 and "data/shakespeare_char/meta.pkl; pass it as --meta" in r.stderr, r.stderr
        run(tinylm, "train", os.path.join(source, "configs/tiny.toml"), "--out", path("rope"),
            "--model.pos_encoding=rope", "--model.norm=rmsnorm", "--train.max_iters=1", "--threads", "1")
        r = run(tinylm, "export", path("rope"), "--format", "nanogpt", "--out", path("rope.pt"), ok=False)
        assert r.returncode == 1 and 'model.pos_encoding = "rope"' in r.stderr and \
            'model.norm = "rmsnorm"' in r.stderr, r.stderr
        assert not os.path.exists(path("rope.pt"))
    print("nanoGPT interop: import, export, round trip and bad inputs passed")


if __name__ == "__main__":
    main()
