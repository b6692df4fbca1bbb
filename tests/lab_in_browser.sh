#!/usr/bin/env bash
# The live lab in a real browser: train a tiny run, serve it on a free loopback port, and let
# tests/browser/lab_test.mjs drive Debian's Chromium over the page. Its screenshots are kept
# in SHOTS (the build's tests/artifacts/lab/).
#   tests/lab_in_browser.sh TINYLM SOURCE_DIR SHOTS
set -euo pipefail
tinylm=$1
src=$2
shots=$3
if [[ ! -d "$src/tests/browser/node_modules/playwright-core" ]]; then
  echo "playwright-core is not installed in tests/browser: run scripts/install-deps.sh" >&2
  exit 1
fi
work=$(mktemp -d)
server=""
cleanup() {
  [[ -n "$server" ]] && kill "$server" 2> /dev/null && wait "$server" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"$tinylm" train "$src/configs/tiny.toml" --out "$work/run" --threads 1 --train.max_iters=200 \
  --data.cache_dir="$work/cache" > "$work/train.log" 2>&1 || { cat "$work/train.log"; exit 1; }
"$tinylm" features "$work/run" --hook blocks.1.attn.hook_z --width 64 --k 4 --tokens 8192 \
  --eval-windows 8 --threads 1 > /dev/null 2> "$work/features.log" || { cat "$work/features.log"; exit 1; }
"$tinylm" serve "$work/run" --port 0 > "$work/url" 2> "$work/serve.log" &
server=$!
for _ in $(seq 100); do [[ -s "$work/url" ]] && break; sleep 0.1; done
url=$(head -1 "$work/url")
[[ "$url" == http://127.0.0.1:* ]] || { echo "serve printed no URL"; cat "$work/serve.log"; exit 1; }
node "$src/tests/browser/lab_test.mjs" "$url" "$shots"
