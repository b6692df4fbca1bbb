#!/usr/bin/env bash
# The GPU check. On a machine with a CUDA GPU and a PyTorch 2.x wheel: builds tinylm against
# the LibTorch inside that wheel (NCCL, bf16 autocast, scaled_dot_product_attention), trains
# configs/shakespeare_char_gpu.toml (nanoGPT's GPU recipe) on one GPU and prints the wall time
# and the val loss; with 2 or more GPUs, trains it again with 2 ranks over NCCL.
#
# Such a machine may lack our Debian libraries (spdlog, fmt, toml++, CLI11, nlohmann-json,
# GoogleTest, SentencePiece, OpenBLAS). Fetch their .deb files on a Debian 12 machine first:
#   scripts/gpu-check.sh --download-debs      # into build-gpu/debs
# and carry build-gpu/debs along; they are unpacked (dpkg -x) into build-gpu/prefix.
# The CPU build and the test suite never need any of this.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
debs=$root/build-gpu/debs
prefix=$root/build-gpu/prefix
build=$root/build-gpu/build

packages=(libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libtomlplusplus-dev nlohmann-json3-dev
          libcli11-dev libgtest-dev googletest libsentencepiece-dev libsentencepiece0
          libopenblas-dev libopenblas0 libopenblas0-openmp libopenblas-openmp-dev libgomp1)

if [[ "${1:-}" == "--download-debs" ]]; then
  mkdir -p "$debs"
  (cd "$debs" && apt-get download "${packages[@]}")
  ls -l "$debs"
  exit 0
fi

say() { echo "gpu-check: $*" >&2; }
python3 -c 'import torch; assert torch.cuda.is_available(), "no CUDA device"' ||
  { say "no CUDA GPU is visible to PyTorch here; nothing to check"; exit 1; }
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())')
say "PyTorch $(python3 -c 'import torch; print(torch.__version__)'), $gpus GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"

if compgen -G "$debs/*.deb" > /dev/null; then
  mkdir -p "$prefix"
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$prefix"; done
  export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CPATH="$prefix/usr/include${CPATH:+:$CPATH}"
  extra_prefix=";$prefix/usr"
  blas=(-DBLAS_LIBRARIES="$prefix/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3")
  spm=(-DSENTENCEPIECE_LIBRARY="$prefix/usr/lib/x86_64-linux-gnu/libsentencepiece.so"
       -DSENTENCEPIECE_TRAIN_LIBRARY="$prefix/usr/lib/x86_64-linux-gnu/libsentencepiece_train.so")
else
  extra_prefix="" blas=() spm=()
fi
generator=(); command -v ninja > /dev/null && generator=(-G Ninja)
say "building against $torch_prefix"
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_prefix$extra_prefix" "${blas[@]}" "${spm[@]}" > "$build.cmake.log" 2>&1 ||
  { tail -30 "$build.cmake.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target tinylm
tinylm=$build/tinylm

run() {  # NAME, then train's arguments; prints wall time and the whole-split val loss
  local name=$1; shift
  local out=$root/build-gpu/runs/$name
  rm -rf "$out"
  local start end
  start=$(date +%s.%N)
  "$tinylm" train configs/shakespeare_char_gpu.toml --out "$out" "$@" 2>&1 | grep -v " step [0-9]*:" || return 1
  end=$(date +%s.%N)
  local val
  val=$("$tinylm" eval "$out" --device cuda --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["loss"])')
  local best
  best=$(python3 -c "import json; print(min(r['val_loss'] for r in map(json.loads, open('$out/metrics.jsonl')) if r['kind'] == 'eval'))")
  say "$name: $(python3 -c "print(f'{$end - $start:.1f}')") s wall, val loss $val (whole split), best estimate $best"
}

"$tinylm" bench configs/shakespeare_char_gpu.toml --device cuda --repeats 3 --steps 10 --max-new-tokens 200
run gpu1 --device cuda
if ((gpus >= 2)); then
  run gpu2 --device cuda --nproc 2
else
  say "one GPU: the 2-rank NCCL run needs two"
fi

# Then the numbers: fused attention, logits and training steps on the GPU against the CPU
# (tests/unit/test_gpu.cpp), and the data-parallel tests over Gloo with this build.
cmake --build "$build" -j "$(nproc)" --target tinylm_tests
"$build/tests/tinylm_tests" --gtest_filter='Gpu.*:DataParallel.TwoRanks*:AdamW.*'
