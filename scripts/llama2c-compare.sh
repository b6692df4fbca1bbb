#!/usr/bin/env bash
# tinylm against llama2.c's run.c on one run: the greedy text from BOS must be the same,
# and single-stream sampling speed is reported side by side (median of N tries, alternated
# so that the machine's drift falls on both).
#
#   scripts/llama2c-compare.sh RUN RUNC [TOKENS] [TRIES] [THREADS]
#
# RUN is a rope/rmsnorm/swiglu run without biases and with a SentencePiece tokenizer (its
# <s> is id 1, which run.c starts from). RUNC is a run.c binary you built yourself from
# https://github.com/karpathy/llama2.c (`make runfast`); nothing of it is in this project.
# THREADS is tinylm's --threads (run.c is single-threaded unless built with OpenMP).
set -euo pipefail

run=${1:?usage: llama2c-compare.sh RUN RUNC [TOKENS] [TRIES] [THREADS]}
runc=${2:?usage: llama2c-compare.sh RUN RUNC [TOKENS] [TRIES] [THREADS]}
tokens=${3:-255}
tries=${4:-5}
threads=${5:-1}
here=$(cd "$(dirname "$0")/.." && pwd)
tinylm=${TINYLM:-$here/build/tinylm}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { cat "$1" >&2; exit 1; }
"$tinylm" export "$run" --format llama2c --out "$work/model.bin" 2>"$work/export.err" ||
  fail "$work/export.err"
# run.c's -n counts forward passes, from BOS: as many tokens come out.
"$runc" "$work/model.bin" -z "$work/tokenizer.bin" -t 0 -n "$tokens" -i "" \
  >"$work/runc.txt" 2>"$work/runc.err" || fail "$work/runc.err"
"$tinylm" sample "$run" --bos --prompt "" --temperature 0 --max-new-tokens "$tokens" \
  --num-samples 1 --bytes --threads "$threads" >"$work/tinylm.txt" 2>"$work/tinylm.err" ||
  fail "$work/tinylm.err"
# Both end with a newline; run.c also stops early if it samples BOS.
python3 - "$work/runc.txt" "$work/tinylm.txt" <<'EOF'
import sys
a, b = (open(p, encoding="utf-8", errors="replace").read() for p in sys.argv[1:])
a, b = (t[:-1] if t.endswith("\n") else t for t in (a, b))
same = 0
while same < min(len(a), len(b)) and a[same] == b[same]:
    same += 1
print(f"greedy text: run.c {len(a)} chars, tinylm {len(b)} chars, the same for {same}")
print("  " + repr(b[:120]))
sys.exit(0 if same == len(a) == len(b) else 1)
EOF

runc_rates=() tinylm_rates=()
for _ in $(seq "$tries"); do
  "$runc" "$work/model.bin" -z "$work/tokenizer.bin" -t 0 -n "$tokens" -i "" \
    >/dev/null 2>"$work/runc.err"
  runc_rates+=("$(sed -n 's/achieved tok\/s: //p' "$work/runc.err")")
  "$tinylm" sample "$run" --bos --prompt "" --temperature 0 --max-new-tokens "$tokens" \
    --num-samples 1 --threads "$threads" >/dev/null 2>"$work/tinylm.err"
  tinylm_rates+=("$(sed -n 's/.* s: \([0-9.]*\) tokens\/s.*/\1/p' "$work/tinylm.err")")
done
python3 - "${runc_rates[*]}" "${tinylm_rates[*]}" "$threads" <<'EOF'
import statistics, sys
runc = [float(x) for x in sys.argv[1].split()]
tl = [float(x) for x in sys.argv[2].split()]
print(f"run.c   tokens/s: median {statistics.median(runc):.0f}  (all: {', '.join(f'{x:.0f}' for x in runc)})")
print(f"tinylm  tokens/s: median {statistics.median(tl):.0f}  (all: {', '.join(f'{x:.0f}' for x in tl)}; --threads {sys.argv[3]})")
print(f"tinylm / run.c: {statistics.median(tl) / statistics.median(runc):.2f}")
EOF
