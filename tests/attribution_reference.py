#!/usr/bin/env python3
"""Ablation and attribution patching against PyTorch, the way TransformerLens computes them.

Trains a tiny GPT-2-style run with the tinylm binary, loads model.safetensors into a GPT
written here in PyTorch (float64) whose every head's z passes a hook, and checks tinylm's
`inspect --json` numbers to 1e-4:
  - ablation (--exact all): each head's change in loss when zeroed and when replaced by its
    mean z over the windows, on the windows and on the probe's repeat; and the first-order
    estimates, -sum g.z and sum g.(mean - z), from the gradient of the mean loss;
  - activation patching: each head's exact `restored` and the attribution-patching
    estimate sum (z_clean - z_corrupt) . dLD/dz at the corrupted run, over LD's span.
Then checks that a wrong reference (the gradient taken at the clean run) is told apart.

usage: attribution_reference.py TINYLM_BINARY SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

TOLERANCE = 1e-4


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    out = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        assert entry["dtype"] == "F32", (name, entry["dtype"])
        array = np.frombuffer(body[begin:end], dtype="<f4").reshape(entry["shape"])
        out[name] = torch.tensor(array, dtype=torch.float64, requires_grad=True)  # graphs for z
    return out


class Gpt:
    """nanoGPT's GPT-2 block (learned positions, LayerNorm, exact GELU, tied head) in
    float64, with a hook on each layer's z (B, nh, T, hs) as TransformerLens's hook_z."""

    def __init__(self, weights, cfg):
        self.w, self.cfg = weights, cfg

    def forward(self, idx, z_hook=None):
        w, cfg = self.w, self.cfg
        B, T = idx.shape
        C, nh = cfg["n_embd"], cfg["n_head"]
        hs = C // nh

        def ln(x, name):
            return torch.nn.functional.layer_norm(x, (C,), w[name + ".weight"], w.get(name + ".bias"), 1e-5)

        def linear(x, name):
            y = x @ w[name + ".weight"].T
            return y + w[name + ".bias"] if name + ".bias" in w else y

        x = w["transformer.wte.weight"][idx] + w["transformer.wpe.weight"][:T]
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        for l in range(cfg["n_layer"]):
            p = f"transformer.h.{l}."
            q, k, v = linear(ln(x, p + "ln_1"), p + "attn.c_attn").split(C, dim=-1)
            q, k, v = (t.view(B, T, nh, hs).transpose(1, 2) for t in (q, k, v))
            scores = (q @ k.transpose(-1, -2)) / hs ** 0.5
            pattern = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
            z = pattern @ v  # (B, nh, T, hs)
            if z_hook:
                z = z_hook(l, z)
            x = x + linear(z.transpose(1, 2).reshape(B, T, C), p + "attn.c_proj")
            h = linear(ln(x, p + "ln_2"), p + "mlp.c_fc")
            x = x + linear(torch.nn.functional.gelu(h), p + "mlp.c_proj")
        x = ln(x, "transformer.ln_f")
        return x @ w["transformer.wte.weight"].T  # (B, T, V)


def token_nats(logits, targets):  # (B, T, V), (B, T) -> (B, T)
    return torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")


def check_ablation(model, windows, probe, doc):
    L, nh = model.cfg["n_layer"], model.cfg["n_head"]
    T, R = windows.shape[1] - 1, probe.shape[1] // 2
    # (inputs, targets, counted positions) of the windows and of the probe's repeat.
    probe_targets = torch.cat([probe[:, 1:], torch.zeros_like(probe[:, :1])], 1)
    sets = {"": (windows[:, :T], windows[:, 1:], slice(0, T)),
            "probe_": (probe, probe_targets, slice(R, 2 * R - 1))}
    zs = {}
    with torch.no_grad():
        model.forward(windows[:, :T], lambda l, z: zs.setdefault(l, z))
    means = {l: z.mean(dim=(0, 2)) for l, z in zs.items()}  # (nh, hs) over rows and positions

    def loss(kind, hook=None):
        x, y, span = sets[kind]
        return token_nats(model.forward(x, hook), y)[:, span].mean()

    rows = {(r["layer"], r["head"]): r for r in doc["heads"]}
    assert len(rows) == L * nh and all(r["exact"] for r in rows.values())
    worst = 0.0
    for kind in sets:
        # The gradient of the mean loss with respect to each z, through hooks that keep z.
        kept = {}

        def keep(l, z):
            z.retain_grad()
            kept[l] = z
            return z
        clean = loss(kind, keep)
        clean.backward()
        for (l, h), row in rows.items():
            g, z = kept[l].grad[:, h], kept[l].detach()[:, h]  # (B, T, hs)
            estimates = {"zero": -(g * z).sum().item(), "mean": (g * (means[l][h] - z)).sum().item()}
            with torch.no_grad():
                for how, value in (("zero", torch.zeros_like(means[l][h])), ("mean", means[l][h])):
                    def ablate(layer, z_all, l=l, h=h, value=value):
                        if layer != l:
                            return z_all
                        z_all = z_all.clone()
                        z_all[:, h] = value
                        return z_all
                    exact = (loss(kind, ablate) - clean).item()
                    ours = row[kind + how]
                    theirs = row["estimate"][kind + how]
                    worst = max(worst, abs(exact - ours), abs(estimates[how] - theirs))
                    assert abs(exact - ours) < TOLERANCE, (l, h, kind + how, exact, ours)
                    assert abs(estimates[how] - theirs) < TOLERANCE, (l, h, kind + how, estimates[how], theirs)
    print(f"ablation: {L * nh} heads x 4 changes and their estimates, worst difference {worst:.2e}")


def check_patching(model, clean, corrupt, doc, vocab):
    L, nh = model.cfg["n_layer"], model.cfg["n_head"]
    P = doc["position"]
    a, b = vocab.index(doc["clean_answer"]), vocab.index(doc["corrupt_answer"])

    def diff(logits):
        return logits[0, P, a] - logits[0, P, b]
    zc = {}
    with torch.no_grad():
        clean_diff = diff(model.forward(clean, lambda l, z: zc.setdefault(l, z))).item()
    kept = {}

    def keep(l, z):
        z.retain_grad()
        kept[l] = z
        return z
    corrupt_diff = diff(model.forward(corrupt, keep))
    corrupt_diff.backward()
    span = clean_diff - corrupt_diff.item()
    assert abs(clean_diff - doc["clean_logit_diff"]) < TOLERANCE
    assert abs(corrupt_diff.item() - doc["corrupt_logit_diff"]) < TOLERANCE
    worst, wrong = 0.0, 0.0
    clean_grads = {}

    def keep_clean(l, z):
        z.retain_grad()
        clean_grads[l] = z
        return z
    diff(model.forward(clean, keep_clean)).backward()
    for l in range(L):
        for h in range(nh):
            dz = zc[l][0, h] - kept[l].detach()[0, h]  # (T, hs)
            estimate = (dz * kept[l].grad[0, h]).sum().item() / span
            at_clean = (dz * clean_grads[l].grad[0, h]).sum().item() / span

            def patch(layer, z, l=l, h=h):
                if layer != l:
                    return z
                z = z.clone()
                z[:, h] = zc[l][:, h]
                return z
            with torch.no_grad():
                exact = (diff(model.forward(corrupt, patch)).item() - corrupt_diff.item()) / span
            ours, theirs = doc["heads"][l][h], doc["estimate"]["heads"][l][h]
            worst = max(worst, abs(exact - ours), abs(estimate - theirs))
            wrong = max(wrong, abs(at_clean - theirs))
            assert abs(exact - ours) < TOLERANCE, (l, h, exact, ours)
            assert abs(estimate - theirs) < TOLERANCE, (l, h, estimate, theirs)
    # The check can fail: the gradient at the clean run (a plausible slip) is told apart.
    assert wrong > 100 * TOLERANCE, f"a wrong reference agrees too ({wrong:.2e}): the check is blind"
    print(f"patching: {L * nh} heads exact and estimated, worst difference {worst:.2e} "
          f"(the gradient at the clean run would be off by {wrong:.2e})")


def main():
    binary, source = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "tiny.toml")
        with open(config, "w") as f:
            f.write(f'[model]\nn_layer = 2\nn_head = 2\nn_embd = 16\nblock_size = 16\n'
                    f'[data]\npath = "{source}/data/corpora/tinyshakespeare.txt"\ncache_dir = "cache"\n'
                    f'[train]\nbatch_size = 8\nmax_iters = 60\nwarmup_iters = 2\nlr_decay_iters = 60\n'
                    f'eval_interval = 60\neval_iters = 2\nlearning_rate = 1e-2\nsnapshots = false\n')
        run = os.path.join(tmp, "run")
        subprocess.run([binary, "train", config, "--out", run, "--threads", "1"], check=True,
                       stderr=subprocess.DEVNULL, cwd=tmp)
        cfg = json.load(open(os.path.join(run, "config.json")))
        vocab = json.load(open(os.path.join(run, "tokenizer.json")))["vocab"]
        model = Gpt(read_safetensors(os.path.join(run, "model.safetensors")), cfg)

        text = open(os.path.join(source, "data/corpora/tinyshakespeare.txt")).read()[:3000]
        text_path = os.path.join(tmp, "text.txt")
        with open(text_path, "w") as f:
            f.write(text)
        ids = torch.tensor([vocab.index(ch) for ch in text])

        def inspect(*flags):
            out = subprocess.run([binary, "inspect", run, "--json", "-", "--threads", "1", *flags],
                                 check=True, capture_output=True, text=True).stdout
            return json.loads(out)

        doc = inspect("--ablate", "--exact", "all", "--text", text_path, "--windows", "6",
                      "--probes", "3", "--seed", "5")["ablation"]
        T = cfg["block_size"]
        windows = torch.stack([ids[s:s + T + 1] for s in doc["window_starts"]])
        probe = torch.tensor(doc["probe"], dtype=torch.int64)
        check_ablation(model, windows, probe, doc)

        # Pairs of one length within block_size; the first whose answers differ is patched.
        pairs = [("ROMEO:\nI will ", "JULIET:\nI will"), ("the king is de", "the queen is d"),
                 ("First Citizen:", "Second Citizen"), ("my lord, I am ", "my lady, I am ")]
        for clean, corrupt in pairs:
            try:
                doc = inspect("--patch", "--clean", clean, "--corrupt", corrupt)["patching"]
                break
            except subprocess.CalledProcessError:
                continue
        else:
            sys.exit("no pair of texts with different answers to patch")
        as_ids = lambda s: torch.tensor([[vocab.index(ch) for ch in s]])
        check_patching(model, as_ids(clean), as_ids(corrupt), doc, vocab)
    print("2 passed, 0 failed")


if __name__ == "__main__":
    main()
