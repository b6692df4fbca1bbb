#!/usr/bin/env bash
# make fuzz: every fuzz target for SECONDS (default 300) each, growing its corpus in
# BUILD/tests/fuzz/corpus/TARGET/ from the seeds. A finding stops its target and is left as
# BUILD/tests/fuzz/crash-*, leak-*, timeout-* or oom-*: fix it, then copy the input into
# tests/fuzz/seeds/TARGET/finding-NAME so that the test suite replays it from then on.
# Usage: run-fuzzers.sh BUILD [SECONDS] [TARGET...]
set -uo pipefail
build=$(cd "$1" && pwd)  # absolute: the fuzzers run inside it
seconds=${2:-300}
shift $(($# >= 2 ? 2 : $#))
here=$(cd "$(dirname "$0")" && pwd)
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=($(ls "$here/seeds"))
fi
failed=()
for target in "${targets[@]}"; do
  corpus="$build/tests/fuzz/corpus/$target"
  mkdir -p "$corpus"
  echo "fuzz: $target for ${seconds}s" >&2
  log="$build/tests/fuzz/$target.log"
  # LibTorch's leak in tests/sanitizers/lsan.supp is seen only with the full unwinder.
  asan=${ASAN_OPTIONS:-}
  [[ $target == nanogpt_checkpoint ]] && asan="$asan:fast_unwind_on_malloc=0"
  (cd "$build/tests/fuzz" && ASAN_OPTIONS=$asan \
    "./fuzz_$target" -max_total_time="$seconds" -timeout=10 -malloc_limit_mb=1024 \
      -rss_limit_mb=4096 -print_final_stats=1 "$corpus" "$here/seeds/$target" > "$log" 2>&1)
  status=$?
  grep -E "^(stat::number_of_executed_units|stat::new_units_added|#[0-9]+ +DONE|==[0-9]+==ERROR|SUMMARY|Test unit written)" "$log"
  ((status == 0)) || failed+=("$target")
done
if ((${#failed[@]} > 0)); then
  echo "fuzz: findings in ${failed[*]} (inputs in $build/tests/fuzz/)" >&2
  exit 1
fi
echo "fuzz: no findings in ${#targets[@]} targets" >&2
