#!/usr/bin/env bash
# The six position encodings under one recipe: configs/shakespeare_char.toml with only
# model.pos_encoding changed, each trained with every seed given, then scored on the whole
# val split in windows of 1x, 2x and 4x block_size (`tinylm eval --context`). Learned
# positions cannot go past block_size: their cells say so. Prints a markdown table of the
# mean val loss (and, with two or more seeds, the range), and the ms per training step.
#
#   scripts/position-experiment.sh [WORKDIR] [SEED ...]    (default /tmp/tinylm-positions, 1337 1)
#
# Needs build/tinylm (make build). Each run takes the default recipe's time (about half a
# minute on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/tinylm-positions}
shift || true
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1337 1)
tinylm=./build/tinylm
[ -x "$tinylm" ] || { echo "build tinylm first (make build)" >&2; exit 1; }
mkdir -p "$work"
block=$(sed -n 's/^block_size = \([0-9]*\).*/\1/p' configs/shakespeare_char.toml)

loss_at() {  # RUN CONTEXT -> the val loss, or "-" when the run refuses the context
  "$tinylm" eval "$1" --context "$2" --json 2> /dev/null |
    sed -n 's/.*"loss":\([0-9.]*\).*/\1/p' || true
}

echo "| pos_encoding | val 1x ($block) | val 2x ($((2 * block))) | val 4x ($((4 * block))) | ms/step |"
echo "|---|---|---|---|---|"
for enc in learned sinusoidal rope relative alibi none; do
  cells=()
  for factor in 1 2 4; do cells+=(""); done
  steps=""
  for seed in "${seeds[@]}"; do
    run="$work/$enc-$seed"
    if [ ! -f "$run/model.safetensors" ]; then
      "$tinylm" train configs/shakespeare_char.toml --out "$run" --model.pos_encoding="$enc" \
        --train.seed="$seed" > "$run.log" 2>&1
    fi
    steps+=" $(sed -n 's/.*steps in [0-9.]* s (\([0-9.]*\) ms\/iter).*/\1/p' "$run.log")"
    i=0
    for factor in 1 2 4; do
      cells[$i]+=" $(loss_at "$run" $((factor * block)))"
      i=$((i + 1))
    done
  done
  row="| $enc"
  for cell in "${cells[@]}"; do
    row+=" | $(echo "$cell" | awk '{
      n = 0; for (i = 1; i <= NF; ++i) if ($i != "") { v[n++] = $i }
      if (n == 0) { printf "refused"; exit }
      lo = v[0]; hi = v[0]; s = 0
      for (i = 0; i < n; ++i) { s += v[i]; if (v[i] < lo) lo = v[i]; if (v[i] > hi) hi = v[i] }
      if (n == 1) printf "%.4f", s; else printf "%.4f (%.4f-%.4f)", s / n, lo, hi }')"
  done
  row+=" | $(echo "$steps" | awk '{ s = 0; for (i = 1; i <= NF; ++i) s += $i; printf "%.1f", s / NF }') |"
  echo "$row"
done
