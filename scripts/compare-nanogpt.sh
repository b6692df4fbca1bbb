#!/usr/bin/env bash
# tinylm's default recipe against nanoGPT's CPU recipe, side by side on each corpus in one
# sitting: the wall time of each whole process (start-up, data, training, evals, checkpoints)
# and the val loss of what each wrote, both scored by `tinylm eval` on the whole val split
# (nanoGPT's checkpoint through `tinylm import`). One markdown table row per corpus.
#
#   scripts/compare-nanogpt.sh NANOGPT CORPUS...
#
# NANOGPT is a checkout of https://github.com/karpathy/nanoGPT (train.py, model.py,
# configurator.py, config/); it runs on PYTHON (default /usr/bin/python3, with Debian's
# python3-torch). Nothing of it is in this project. Its recipe is the README's "baby" model on
# the CPU: 4 layers, 4 heads, n_embd 128, block 64, batch 12, 2000 iterations, float32, its
# evals of 20 batches every 250 iterations, its data prepared as its char-level prepare.py
# does (sorted characters, the first 90% to train).
#
# Environment: SEEDS (tinylm's train.seed values, default "1337"), CONFIG (default
# configs/shakespeare_char.toml), TINYLM_ARGS (more --section.key=value overrides), THREADS
# (both sides' threads, default all cores), NANOGPT_ITERS (default 2000), KEEP (a directory to
# keep the runs in instead of a temporary one).
set -euo pipefail
usage="usage: compare-nanogpt.sh NANOGPT CORPUS..."
nanogpt=$(cd "${1:?$usage}" && pwd)
shift
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
[ -f "$nanogpt/train.py" ] || { echo "compare-nanogpt: $nanogpt has no train.py" >&2; exit 1; }
here=$(cd "$(dirname "$0")/.." && pwd)
tinylm=${TINYLM:-$here/build/tinylm}
config=${CONFIG:-$here/configs/shakespeare_char.toml}
seeds=${SEEDS:-1337}
threads=${THREADS:-$(nproc)}
python=${PYTHON:-/usr/bin/python3}  # Debian's, which has numpy and torch
iters=${NANOGPT_ITERS:-2000}
read -r -a extra <<< "${TINYLM_ARGS:-}"
if [ -n "${KEEP:-}" ]; then
  work=$KEEP
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

now() { date +%s.%N; }
fail() { echo "compare-nanogpt: $1 failed; its log:" >&2; tail -20 "$2" >&2; exit 1; }
val_loss() {  # RUN -> the whole val split's loss
  "$tinylm" eval "$1" --json --threads "$threads" > "$1.eval.json" 2> "$1.eval.err" ||
    fail "tinylm eval of $1" "$1.eval.err"
  "$python" -c 'import json,sys; print("%.4f" % json.load(open(sys.argv[1]))["loss"])' "$1.eval.json"
}

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), family $(grep -m1 'cpu family' \
  /proc/cpuinfo | sed 's/.*: //') model $(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | sed 's/.*: //')"
echo "flags: $(grep -o -w 'avx2\|avx512f\|avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
# Both sides' float32 products run on OpenBLAS's kernels, which OPENBLAS_CORETYPE can choose.
echo "OPENBLAS_CORETYPE: ${OPENBLAS_CORETYPE:-unset}"
echo "threads: $threads; tinylm $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?'), $config ${extra[*]:-}"
echo "nanoGPT $(git -C "$nanogpt" rev-parse --short HEAD 2>/dev/null || echo '(not a git checkout)'), $iters iterations"
echo
echo "| corpus | nanoGPT wall, val | tinylm wall, val (seed) | wall ratio (median) | tinylm's time |"
echo "|---|---|---|---|---|"
for corpus in "$@"; do
  corpus=$(cd "$(dirname "$corpus")" && pwd)/$(basename "$corpus")
  name=$(basename "$corpus" .txt)
  ng="$work/nanogpt-$name"
  rm -rf "$ng" "$ng-run"
  mkdir -p "$ng/data/corpus"
  cp "$nanogpt"/{train.py,model.py,configurator.py} "$ng/"
  cp -r "$nanogpt/config" "$ng/"
  "$python" - "$corpus" "$ng/data/corpus" <<'EOF'
import pickle, sys
import numpy as np
text = open(sys.argv[1], encoding="utf-8").read()
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
n = len(text)
for split, part in (("train", text[: int(n * 0.9)]), ("val", text[int(n * 0.9):])):
    np.array([stoi[c] for c in part], dtype=np.uint16).tofile(f"{sys.argv[2]}/{split}.bin")
with open(f"{sys.argv[2]}/meta.pkl", "wb") as f:
    pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}, f)
EOF
  start=$(now)
  (cd "$ng" && OMP_NUM_THREADS=$threads "$python" train.py config/train_shakespeare_char.py \
    --dataset=corpus --out_dir=out --device=cpu --compile=False --dtype=float32 \
    --eval_iters=20 --log_interval=100 --block_size=64 --batch_size=12 --n_layer=4 \
    --n_head=4 --n_embd=128 --max_iters="$iters" --lr_decay_iters="$iters" --dropout=0.0) \
    > "$ng.log" 2>&1 || fail "nanoGPT's train.py on $name" "$ng.log"
  ng_wall=$(echo "$(now) - $start" | bc)
  "$tinylm" import "$ng/out/ckpt.pt" --out "$ng-run" --data "$corpus" \
    --meta "$ng/data/corpus/meta.pkl" > /dev/null 2> "$ng.import.err" ||
    fail "tinylm import of nanoGPT's checkpoint" "$ng.import.err"
  ng_val=$(val_loss "$ng-run")

  cells="" walls=""
  for seed in $seeds; do
    run="$work/tinylm-$name-$seed"
    rm -rf "$run"
    start=$(now)
    "$tinylm" train "$config" --data.path="$corpus" --train.seed="$seed" --out "$run" \
      --threads "$threads" "${extra[@]}" > /dev/null 2> "$run.log" ||
      fail "tinylm train on $name" "$run.log"
    wall=$(echo "$(now) - $start" | bc)
    walls="$walls $wall"
    cells="$cells$(printf '%.1f s, %s (%s); ' "$wall" "$(val_loss "$run")" "$seed")"
    breakdown=$(sed -n 's/.*info time: //p' "$run.log")
  done
  ratio=$("$python" -c "import statistics,sys; print(f'{statistics.median(map(float, sys.argv[1].split())) / float(sys.argv[2]):.3f}')" "$walls" "$ng_wall")
  printf '| %s | %.1f s, %s | %s | %s | %s |\n' "$name" "$ng_wall" "$ng_val" "${cells%; }" \
    "$ratio" "$breakdown"
done
