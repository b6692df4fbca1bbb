#!/usr/bin/env bash
# Installs every Debian 12 package tinylm needs to build, test and run. Idempotent: a
# machine that already has them all is left untouched and this returns in well under a second.
set -euo pipefail

packages=(
  g++ make cmake ninja-build ccache pkg-config
  libtorch-dev libopenblas0-openmp
  libsentencepiece-dev sentencepiece
  libspdlog-dev libfmt-dev
  libgtest-dev
  libtomlplusplus-dev nlohmann-json3-dev libcli11-dev
  python3 python3-numpy
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
