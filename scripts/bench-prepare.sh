#!/usr/bin/env bash
# Streaming tokenization at scale: `tinylm prepare` on a generated corpus of at least 2 GB,
# side by side with SentencePiece's own `spm_encode` on the same text and the same model.
# Reports wall time, MB/s and peak resident memory (GNU time's %M) for each.
#
#   scripts/bench-prepare.sh [SIZE_MB] [WORKDIR]     (default 2100 MB in /tmp/tinylm-bench)
#
# The corpus is the shipped corpora (English, Japanese, stories) repeated; it is generated
# here, never committed, and removed at the end. Needs build/tinylm and Debian's
# sentencepiece package (spm_encode).
set -euo pipefail
export LC_ALL=C  # ${#seed} counts bytes
cd "$(dirname "$0")/.."
size_mb=${1:-2100}
work=${2:-/tmp/tinylm-bench}
tinylm=./build/tinylm
[ -x "$tinylm" ] || { echo "build tinylm first (make build)" >&2; exit 1; }
command -v spm_encode > /dev/null || { echo "spm_encode not found (apt-get install sentencepiece)" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work/corpus"
trap 'rm -rf "$work"' EXIT

# 1. A BPE model of 4096 pieces trained by tinylm on the shipped corpora.
cat > "$work/model.toml" <<TOML
[data]
path = "$PWD/data/corpora"
tokenizer = "sentencepiece"
model_type = "bpe"
vocab_size = 4096
character_coverage = 0.9995
cache_dir = "$work/model-cache"
TOML
"$tinylm" prepare "$work/model.toml" > /dev/null

# 2. The corpus: the shipped corpora, repeated to SIZE_MB.
seed=$(cat data/corpora/*.txt)
target=$((size_mb * 1000 * 1000))
{
  written=0
  while [ "$written" -lt "$target" ]; do
    printf '%s\n' "$seed"
    written=$((written + ${#seed} + 1))
  done
} > "$work/corpus/big.txt" 2> /dev/null || true
bytes=$(stat -c %s "$work/corpus/big.txt")
echo "corpus: $bytes bytes"

# 3. tinylm prepare with the same model, on 1 thread and on all cores.
cat > "$work/bench.toml" <<TOML
[data]
path = "$work/corpus/big.txt"
tokenizer = "sentencepiece"
tokenizer_model = "$work/model-cache/tokenizer.model"
cache_dir = "$work/cache"
TOML
report() {  # name, time output file
  read -r wall rss < "$2"
  awk -v n="$1" -v w="$wall" -v r="$rss" -v b="$bytes" \
    'BEGIN { printf "%-28s %8.1f s %8.1f MB/s %8.0f MB peak RSS\n", n, w, b / w / 1e6, r / 1024 }'
}
for threads in 1 $(nproc); do
  rm -rf "$work/cache"
  /usr/bin/time -f "%e %M" -o "$work/time" "$tinylm" prepare "$work/bench.toml" --threads "$threads" > /dev/null
  report "tinylm prepare --threads $threads" "$work/time"
done
ls -l "$work/cache"

# 4. spm_encode, the library's own tool, on the same text (ids to /dev/null).
/usr/bin/time -f "%e %M" -o "$work/time" \
  spm_encode --model="$work/model-cache/tokenizer.model" --output_format=id < "$work/corpus/big.txt" > /dev/null
report "spm_encode" "$work/time"
