#!/bin/bash
# The CUDA checks and GPU timings of BENCHMARKS.md's "On a GPU" section, on a machine with a CUDA GPU.
#
#   bash benchmarks/gpu_check.sh [OUT_DIR]      # default OUT_DIR: benchmarks/work/gpu (not in git)
#
# Needs sb3_grpo and its test/mujoco extras installed (or, offline, wheels in .whl/: they are installed into
# /tmp/site first, as on the lent H100 of benchmarks/results/gpu_h100). Runs one thing at a time:
#   1. the CUDA tests of every algorithm (GRPO, ExactTRPO, AdaptiveKLPPO, REINFORCE, OnlineDPO) and their CPU twins;
#   2. the whole test suite with CUDA visible (device="auto" lands on the GPU), less the test files whose tools are
#      not installed (they fail to import: listed in the output), and less the "slow" and "postgres" marks;
#   3. the ExactTRPO policy-step timing, the throughput benchmark of every algorithm and examples/train_on_gpu.py,
#      on cuda and on cpu.
# Every output file starts with the card and the software stack it ran on (also in env.txt). The outputs are raw logs:
# what the docs quote goes into a summary under benchmarks/results/ (as gpu_h100/README.md), the logs stay out of git.
set -o pipefail
out=${1:-${OUT:-benchmarks/work/gpu}}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA device: torch.cuda.is_available() is False'" || exit 1

stack() {  # the card and the software stack, one line each
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/card: /'
  python3 - <<'EOF'
import importlib.metadata as metadata
import platform

import torch

print(f"python: {platform.python_version()}; torch: {torch.__version__} (CUDA {torch.version.cuda}, cuDNN "
      f"{torch.backends.cudnn.version()})")
names = ["numpy", "gymnasium", "stable-baselines3", "sb3-contrib", "pluggy", "sb3-grpo"]
print("; ".join(f"{name}: {metadata.version(name)}" for name in names))
EOF
}
stack | tee "$out/env.txt"
header() {  # "$1": what the file holds
  { echo "# $1"; sed 's/^/# /' "$out/env.txt"; } >"$2"
}
status=0

echo "=== CUDA tests of every algorithm (and their CPU twins)"
header "CUDA tests of every algorithm" "$out/pytest_cuda.txt"
python3 -m pytest -p no:cacheprovider -q -rs -m 'not slow' tests/test_devices.py tests/test_exact_trpo.py \
  tests/test_adaptive_kl_ppo.py tests/test_grpo_*.py tests/test_reinforce.py tests/test_online_dpo.py tests/test_fisher.py \
  tests/test_token_extractor.py -k "cuda or device or cudnn or atomic" 2>&1 | tee -a "$out/pytest_cuda.txt" || status=1
echo "=== seeded runs reproduce on cuda (every algorithm, device=\"auto\")"
python3 -m pytest -p no:cacheprovider -q -rs tests/test_sb3_deterministic.py 2>&1 | tee -a "$out/pytest_cuda.txt" || status=1

echo "=== the whole suite with CUDA visible"
# Test files that cannot be imported here (their tools, e.g. pyyaml or sphinx, are not installed) are left out by name.
missing=$(python3 -m pytest -p no:cacheprovider --collect-only -q -m 'not slow and not postgres' 2>&1 |
  sed -n 's/^ERROR \([^ ]*\.py\).*/\1/p' | sort -u)
ignores=()
for file in $missing; do ignores+=("--ignore=$file"); done
header "the whole suite with CUDA visible (-m 'not slow and not postgres'); left out: ${missing:-nothing}" \
  "$out/pytest_full.txt"
python3 -m pytest -p no:cacheprovider -q -rs -m 'not slow and not postgres' "${ignores[@]}" 2>&1 |
  tee -a "$out/pytest_full.txt" || status=1

for dev in cuda cpu; do
  echo "=== ExactTRPO's policy step against sb3-contrib TRPO's on $dev"
  header "ExactTRPO's policy step on $dev" "$out/bench_update_$dev.txt"
  python3 benchmarks/bench_exact_trpo_update.py --device $dev --reps 5 --envs CartPole-v1 Pendulum-v1 HalfCheetah-v5 \
    Hopper-v5 2>&1 | grep -v -i warn | tee -a "$out/bench_update_$dev.txt"
done
for dev in cuda cpu; do
  echo "=== throughput of every algorithm on $dev"
  header "throughput on $dev" "$out/throughput_$dev.txt"
  python3 -m benchmarks.bench_throughput --device $dev --steps 20000 --envs CartPole-v1 Pendulum-v1 HalfCheetah-v5 \
    --algos ppo grpo adaptive_kl_ppo trpo exact_trpo reinforce online_dpo \
    --out "$out/throughput_$dev.csv" 2>&1 | grep -v -i warn | tee -a "$out/throughput_$dev.txt"
done
echo "=== examples/train_on_gpu.py, as written and with the GPU hidden"
header "examples/train_on_gpu.py, as written and with the GPU hidden" "$out/train_on_gpu.txt"
python3 examples/train_on_gpu.py 2>&1 | grep -v -i warn | tee -a "$out/train_on_gpu.txt"
CUDA_VISIBLE_DEVICES= python3 examples/train_on_gpu.py 2>&1 | grep -v -i warn | tee -a "$out/train_on_gpu.txt"
exit "$status"  # the tests' status: the timings run whatever it is
