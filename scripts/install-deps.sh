#!/usr/bin/env bash
# Installs the Debian 12 packages tinylm needs, and the npm packages of the browser test
# (playwright-core, driving Debian's Chromium). Idempotent: a machine that already has them
# all is left untouched and this returns in about a second.
#   scripts/install-deps.sh        everything: build, run, test, sanitize
#   scripts/install-deps.sh run    only what `make run` needs: build and run the binary
set -euo pipefail
what=${1:-all}
if [[ $what != all && $what != run ]]; then
  echo "usage: $0 [all|run]" >&2
  exit 2
fi

packages=(
  g++ make cmake ninja-build ccache pkg-config
  libtorch-dev libopenblas0-openmp libgloo-dev   # libgloo-dev: the headers of c10d's Gloo
  libsentencepiece-dev sentencepiece
  libspdlog-dev libfmt-dev
  libgtest-dev   # small; CMake configures the tests whenever it finds it
  libtomlplusplus-dev nlohmann-json3-dev libcli11-dev
  libpcre2-dev   # GPT-2's pre-tokenizer regex (Unicode classes)
  libxxhash-dev   # checksums of checkpoints (XXH3)
  libcpp-httplib-dev   # the live lab's HTTP (tinylm serve)
  libgoogle-perftools-dev   # tcmalloc, the binary's malloc (CMakeLists.txt)
  libdnnl-dev   # oneDNN's API, for the bfloat16 linears (model/ops/onednn_matmul.h)
)
if [[ $what == all ]]; then
  packages+=(
    python3-xxhash   # Python's reference for the checksums
    clang libclang-rt-dev libomp-dev   # make sanitize and make fuzz: ASan, UBSan, libFuzzer
    python3 python3-numpy python3-torch   # python3-torch: torchrun and PyTorch, references for tests
    python3-jsonschema   # the lab's answers checked against docs/serve-openapi.json
    iproute2   # ip netns: two hosts on one machine for the two-machine torchrun test
    chromium fonts-liberation   # headless Chromium for the report test; a font to draw labels
  )
  # Node.js may come from elsewhere (this machine kind ships v20); Debian's is the fallback.
  command -v node > /dev/null && command -v npm > /dev/null || packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} > 0)); then
  echo "install-deps: installing ${missing[*]}" >&2
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The tests' Node packages at the versions package-lock.json pins: playwright-core (it uses
# /usr/bin/chromium, never a browser of its own) and gpt-3-encoder (GPT-2's encoder).
browser_tests="$(dirname "$0")/../tests/browser"
if [[ $what == all ]] && [[ ! -f "$browser_tests/node_modules/playwright-core/package.json" ||
      ! -f "$browser_tests/node_modules/gpt-3-encoder/package.json" ]]; then
  echo "install-deps: installing playwright-core and gpt-3-encoder into tests/browser" >&2
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --prefix "$browser_tests" --no-audit --no-fund --silent
fi
