#!/usr/bin/env python3
"""An SAE that `tinylm features` wrote, read with nothing but json and numpy, as SAELens's
layout promises (docs/FORMATS.md): cfg.json and sae_weights.safetensors. Its encoding of
hook_z, computed here from the run's weights by python_reads_run's numpy forward pass
(float64), gives the activations `tinylm inspect --features` reports at each feature's top
firings, to 1e-4 (float32 against float64 over a 32-number dot product and a 2-layer forward
pass: about 1e-6 of activations near 1).

usage: sae_reads_in_numpy.py TINYLM_BINARY SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_reads_run import forward, read_safetensors  # noqa: E402


def encode(sae, cfg, x):
    """SAELens's TopK encoding: TopK(ReLU((x - b_dec) W_enc + b_enc))."""
    pre = (x - sae["b_dec"]) @ sae["W_enc"] + sae["b_enc"]
    pre = np.maximum(pre, 0.0)
    k = cfg["activation_fn_kwargs"]["k"]
    z = np.zeros_like(pre)
    top = np.argsort(-pre, axis=-1, kind="stable")[..., :k]
    np.put_along_axis(z, top, np.take_along_axis(pre, top, -1), -1)
    return z


def main():
    binary, source = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "tiny.toml")
        with open(config, "w") as f:
            f.write('[model]\nn_layer = 2\nn_head = 2\nn_embd = 32\nblock_size = 16\npos_encoding = "rope"\n'
                    'norm = "rmsnorm"\nmlp = "swiglu"\n'
                    f'[data]\npath = "{source}/data/corpora/tinyshakespeare.txt"\ncache_dir = "cache"\n'
                    '[train]\nbatch_size = 4\nmax_iters = 30\nwarmup_iters = 2\nlr_decay_iters = 30\n'
                    'eval_interval = 30\neval_iters = 2\nlearning_rate = 3e-3\n')
        run = os.path.join(tmp, "run")
        quiet = {"stderr": subprocess.DEVNULL, "check": True}
        subprocess.run([binary, "train", config, "--out", run, "--threads", "1"], **quiet)
        sae_dir = os.path.join(tmp, "sae")
        subprocess.run([binary, "features", run, "--hook", "blocks.1.attn.hook_z", "--width", "96",
                        "--k", "6", "--tokens", "8192", "--batch", "512", "--eval-windows", "4",
                        "--out", sae_dir, "--threads", "1"], stdout=subprocess.DEVNULL, **quiet)
        cfg = json.load(open(os.path.join(sae_dir, "cfg.json")))
        sae = {k: v.astype(np.float64) for k, v in
               read_safetensors(os.path.join(sae_dir, "sae_weights.safetensors")).items()}
        assert cfg["architecture"] == "topk" and cfg["hook_name"] == "blocks.1.attn.hook_z"
        assert (cfg["d_in"], cfg["d_sae"]) == (32, 96), cfg
        assert sae["W_enc"].shape == (32, 96) and sae["W_dec"].shape == (96, 32)
        assert sae["b_enc"].shape == (96,) and sae["b_dec"].shape == (32,)
        assert np.allclose(np.linalg.norm(sae["W_dec"], axis=1), 1.0, atol=1e-5), "unit decoder rows"

        out = subprocess.run([binary, "inspect", run, "--features", sae_dir, "--tokens", "340",
                              "--json", "-", "--threads", "1"],
                             capture_output=True, text=True, check=True).stdout
        view = json.loads(out)["features"]
        model_cfg = json.load(open(os.path.join(run, "config.json")))
        weights = read_safetensors(os.path.join(run, "model.safetensors"))
        vocab = json.load(open(os.path.join(run, "tokenizer.json")))["vocab"]
        codes = []
        for window in view["windows"]:
            zs = []
            forward(weights, model_cfg, np.array([vocab.index(t) for t in window[:-1]]), zs=zs)
            codes.append(encode(sae, cfg, zs[1]))
        checked = 0
        for feature in view["features"]:
            for w, t, activation in feature["top"]:
                ours = codes[w][t, feature["index"]]
                assert abs(ours - activation) < 1e-4, (feature["index"], w, t, ours, activation)
                checked += 1
        fired = sum(int((c > 0).sum()) for c in codes)
        reported = sum(f["firings"] for f in view["features"])
        assert fired == reported, (fired, reported)
        print(f"{checked} top firings of {len(view['features'])} features agree with numpy's encoding; "
              f"{fired} firings in all on both sides")


if __name__ == "__main__":
    main()
