#!/usr/bin/env bash
# Inspection at GPT-2 small's size: makes a Hugging Face GPT-2 directory of GPT-2 small's
# shape (12 layers x 12 heads, n_embd 768, block 1024, vocabulary 50257) with random weights,
# imports it, and runs `tinylm bench --inspect` on the run, then measures the peak resident
# memory (GNU time's %M) of `eval` and `inspect` on it.
#
#   scripts/bench-inspect-gpt2.sh [WORKDIR] [-- BENCH_FLAGS...]
#       (default /tmp/tinylm-gpt2-shaped; BENCH_FLAGS default --windows 2 --probes 1 --repeats 1)
#
# The vocabulary is GPT-2's 256 byte tokens, 50000 merges of byte pairs (made up: the
# shape, not GPT-2's merges) and <|endoftext|>. Weights are N(0, 0.02), LayerNorms 1 and 0,
# as GPT-2 starts. Needs build/tinylm and Debian's python3 with numpy (or $PYTHON).
# WORKDIR must not exist (the default is replaced); it is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
work=/tmp/tinylm-gpt2-shaped
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  work=$1
  shift
  [ ! -e "$work" ] || { echo "$work exists: give a directory to create" >&2; exit 1; }
fi
if [ "${1:-}" = "--" ]; then shift; fi
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--windows 2 --probes 1 --repeats 1)
tinylm=./build/tinylm
[ -x "$tinylm" ] || { echo "build tinylm first (make build)" >&2; exit 1; }
corpus=data/corpora/tinyshakespeare.txt
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

PYTHONPATH=tests "${PYTHON:-/usr/bin/python3}" - "$work/hf" <<'PY'
import sys

import numpy as np

from hf_gpt2_import import CONFIG, bytes_to_unicode, write_model_dir

byte_map = bytes_to_unicode()
symbols = [byte_map[b] for b in range(256)]
merges = [(a, b) for a in symbols for b in symbols][:50000]  # each join a new token
vocab = {s: i for i, s in enumerate(symbols)}
for a, b in merges:
    vocab[a + b] = len(vocab)
vocab["<|endoftext|>"] = len(vocab)  # 50256, as in GPT-2
cfg = dict(CONFIG, n_layer=12, n_head=12, n_embd=768, n_positions=1024, n_ctx=1024,
           vocab_size=len(vocab))
C, V, T, rng = 768, len(vocab), 1024, np.random.default_rng(1)
normal = lambda *shape: rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
w = {"wte.weight": normal(V, C), "wpe.weight": normal(T, C),
     "ln_f.weight": np.ones(C, np.float32), "ln_f.bias": np.zeros(C, np.float32)}
for i in range(cfg["n_layer"]):
    p = f"h.{i}."
    for name, shape in [("attn.c_attn", (C, 3 * C)), ("attn.c_proj", (C, C)),
                        ("mlp.c_fc", (C, 4 * C)), ("mlp.c_proj", (4 * C, C))]:
        w[p + name + ".weight"], w[p + name + ".bias"] = normal(*shape), np.zeros(shape[1], np.float32)
    for ln in ("ln_1", "ln_2"):
        w[p + ln + ".weight"], w[p + ln + ".bias"] = np.ones(C, np.float32), np.zeros(C, np.float32)
write_model_dir(sys.argv[1], cfg, w, vocab, merges)
print(f"wrote {sys.argv[1]}: {sum(a.size for a in w.values())} parameters, vocabulary {V}")
PY
"$tinylm" import "$work/hf" --out "$work/run" --data "$corpus"
"$tinylm" bench --inspect "$work/run" "${flags[@]}"
head -c 20000 "$corpus" > "$work/text.txt"  # about ten windows of 1024 tokens
for cmd in "eval $work/run --text $work/text.txt" "inspect $work/run --heads --ablate --windows 2 --probes 1"; do
  /usr/bin/time -f "peak resident memory of tinylm ${cmd%% *}: %M KiB, %e s" \
    "$tinylm" $cmd > /dev/null
done
