#!/usr/bin/env bash
# The inspect report in a real browser: train a tiny run, write its report and JSON, and let
# tests/browser/report_test.mjs drive Debian's Chromium over them; then again for a run with
# relative positions, without metrics.jsonl (and without patching texts), whose report must
# say so and still open cleanly, and which shows an SAE's features.
#   tests/report_in_browser.sh TINYLM SOURCE_DIR
set -euo pipefail
tinylm=$1
src=$2
if [[ ! -d "$src/tests/browser/node_modules/playwright-core" ]]; then
  echo "playwright-core is not installed in tests/browser: run scripts/install-deps.sh" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 300 steps learn enough bigrams that "ROMEO:" and "ROMEO " predict different tokens, which
# activation patching needs.
"$tinylm" train "$src/configs/tiny.toml" --out "$work/run" --threads 1 --train.max_iters=300 \
  --data.cache_dir="$work/cache" \
  > "$work/train.log" 2>&1 || { cat "$work/train.log"; exit 1; }
"$tinylm" inspect "$work/run" --html "$work/report.html" --json "$work/report.json" \
  --windows 8 --probes 2 --threads 1 --clean "ROMEO:" --corrupt "ROMEO " > /dev/null
EXPECT_TRAINING=1 EXPECT_SNAPSHOTS=1 \
  node "$src/tests/browser/report_test.mjs" "$work/report.html" "$work/report.json"

# A run with T5's relative positions (a bias per distance, drawn per layer) and an analogy,
# without its metrics.jsonl.
"$tinylm" train "$src/configs/tiny.toml" --out "$work/relative" --threads 1 --train.max_iters=50 \
  --data.cache_dir="$work/cache" --model.pos_encoding=relative \
  > "$work/train.log" 2>&1 || { cat "$work/train.log"; exit 1; }
rm "$work/relative/metrics.jsonl"
# With an SAE of its layer-1 attention output, whose features the report shows.
"$tinylm" features "$work/relative" --hook blocks.1.attn.hook_z --width 64 --k 4 --tokens 8192 \
  --eval-windows 8 --threads 1 > /dev/null 2> "$work/features.log" || { cat "$work/features.log"; exit 1; }
"$tinylm" inspect "$work/relative" --html "$work/bare.html" --json "$work/bare.json" \
  --windows 8 --probes 2 --threads 1 --analogy "a:e::o" --features blocks.1.attn.hook_z-w64-k4 \
  > /dev/null 2> "$work/bare.log"
grep -q "no metrics.jsonl" "$work/bare.log" || { echo "no note about the missing metrics.jsonl" >&2; exit 1; }
EXPECT_TRAINING=0 EXPECT_SNAPSHOTS=1 \
  node "$src/tests/browser/report_test.mjs" "$work/bare.html" "$work/bare.json"
