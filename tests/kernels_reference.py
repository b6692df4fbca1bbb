#!/usr/bin/env python3
"""PyTorch's numbers for tinylm's fused CPU kernels (model/kernels/).

Reads the file tests/unit/test_fused_kernels.cpp writes: for each kernel its inputs, the
probe p, tinylm's output and its gradients of sum(output * p). Recomputes them in float64
from PyTorch's own operators and autograd, and fails when any differs by more than float32
rounding (relative 1e-5 of the largest magnitude).

usage: kernels_reference.py FILE.safetensors
"""
import json
import math
import sys

import numpy as np
import torch
import torch.nn.functional as F


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", {})
    body = data[8 + n:]
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        assert entry["dtype"] == "F32", name
        array = np.frombuffer(body[begin:end], dtype="<f4").reshape(entry["shape"])
        tensors[name] = torch.from_numpy(array.astype(np.float64))
    return tensors, metadata


def rms_norm(x, w):
    return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-5) * w


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def swiglu(gate_up):
    gate, up = gate_up.chunk(2, -1)
    return F.silu(gate) * up


def rotate(x, cos, sin):  # x (B, n, T, hs), half-split pairs (x_i, x_{i + hs/2})
    T, half = x.shape[-2], x.shape[-1] // 2
    c, s = cos[:T], sin[:T]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def attention(qkv, cos, sin, n_head, n_kv):
    B, T, width = qkv.shape
    hs = width // (n_head + 2 * n_kv)
    q, k, v = qkv.split([n_head * hs, n_kv * hs, n_kv * hs], -1)
    q = q.view(B, T, n_head, hs).transpose(1, 2)
    k = k.view(B, T, n_kv, hs).transpose(1, 2)
    v = v.view(B, T, n_kv, hs).transpose(1, 2)
    q, k = rotate(q, cos, sin), rotate(k, cos, sin)
    k = k.repeat_interleave(n_head // n_kv, 1)
    v = v.repeat_interleave(n_head // n_kv, 1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(hs)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    pattern = torch.softmax(scores.masked_fill(mask, float("-inf")), -1)
    return (pattern @ v).transpose(1, 2).reshape(B, T, n_head * hs)


def check(name, fn, t, n_inputs, extra=()):
    inputs = [t[f"{name}.in{i}"].clone().requires_grad_(True) for i in range(n_inputs)]
    out = fn(*inputs, *extra)
    grads = torch.autograd.grad((out * t[f"{name}.probe"]).sum(), inputs)
    failures = []
    for label, ours, ref in [("out", t[f"{name}.out"], out.detach())] + [
            (f"grad{i}", t[f"{name}.grad{i}"], g) for i, g in enumerate(grads)]:
        rel = (ours - ref).abs().max().item() / max(ref.abs().max().item(), 1e-30)
        print(f"{name}.{label}: relative difference {rel:.2e}")
        if not rel < 1e-5:
            failures.append(f"{name}.{label}")
    return failures


def main():
    t, meta = read_safetensors(sys.argv[1])
    failures = check("rms_norm", rms_norm, t, 2)
    failures += check("layer_norm", layer_norm, t, 3)
    failures += check("swiglu", swiglu, t, 1)
    failures += check("attention", attention, t, 1,
                      (t["attention.cos"], t["attention.sin"], int(meta["n_head"]), int(meta["n_kv"])))
    if failures:
        print("differ from PyTorch: " + ", ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
