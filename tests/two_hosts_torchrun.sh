#!/usr/bin/env bash
# Two machines on one: two network namespaces joined by a veth pair (10.77.0.1 and
# 10.77.0.2), Debian's torchrun in each with --nnodes=2, as the README tells two machines to
# run it, and no GLOO_SOCKET_IFNAME. The job must train, bit for bit, what `--nproc 2` trains
# on one machine. Exits 77 (ctest: skipped) where namespaces cannot be made (not root).
#   tests/two_hosts_torchrun.sh TINYLM SOURCE_DIR
set -euo pipefail
tinylm=$1
source_dir=$2
work=$(mktemp -d)
a=tinylm-a-$$ b=tinylm-b-$$

cleanup() {
  ip netns del "$a" 2> /dev/null || true
  ip netns del "$b" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
# Every step of the setup may be refused (not root, no CAP_NET_ADMIN, no veth): then skip.
if ! { ip netns add "$a" && ip netns add "$b" &&
       ip link add "v$$a" type veth peer name "v$$b" &&
       ip link set "v$$a" netns "$a" && ip link set "v$$b" netns "$b" &&
       ip -n "$a" addr add 10.77.0.1/24 dev "v$$a" && ip -n "$b" addr add 10.77.0.2/24 dev "v$$b" &&
       ip -n "$a" link set lo up && ip -n "$b" link set lo up &&
       ip -n "$a" link set "v$$a" up && ip -n "$b" link set "v$$b" up; } 2> "$work/setup.log"; then
  echo "two_hosts_torchrun: cannot make two network namespaces here (needs root and iproute2): skipped"
  cat "$work/setup.log"
  exit 77
fi

config=$source_dir/configs/shakespeare_char.toml
args=(train "$config" --threads 1 --train.max_iters=60 --train.eval_interval=30
      --train.dist_timeout_s=20 --data.cache_dir="$work/cache")
host() {  # NAMESPACE NODE_RANK OUT
  # Debian's torchrun (PyTorch 1.13 on Python 3.11) needs --redirects and --tee (README).
  ip netns exec "$1" timeout 120 torchrun --redirects 1 --tee 1 --no_python --nnodes=2 \
    --node_rank="$2" --nproc_per_node=1 --master_addr=10.77.0.1 --master_port=29500 \
    "$tinylm" "${args[@]}" --out "$3" > "$3.log" 2>&1
}
host "$a" 0 "$work/host0" & first=$!
host "$b" 1 "$work/host1" & second=$!
status=0
wait "$first" || status=1
wait "$second" || status=1
if ((status != 0)); then
  echo "two_hosts_torchrun: the two-host job failed"; tail -20 "$work/host0.log" "$work/host1.log"; exit 1
fi
"$tinylm" "${args[@]}" --out "$work/local" --nproc 2 > "$work/local.log" 2>&1 ||
  { echo "two_hosts_torchrun: --nproc 2 failed"; tail -20 "$work/local.log"; exit 1; }
if [[ -e "$work/host1" ]]; then echo "two_hosts_torchrun: rank 1 wrote a run directory"; exit 1; fi
if ! cmp -s "$work/host0/model.safetensors" "$work/local/model.safetensors"; then
  echo "two_hosts_torchrun: two hosts and --nproc 2 trained different weights"; exit 1
fi
echo "two_hosts_torchrun: two hosts over 10.77.0.0/24 trained what --nproc 2 trains, bit for bit"
