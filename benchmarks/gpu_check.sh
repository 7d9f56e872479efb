#!/bin/bash
# The CUDA checks and GPU timings of BENCHMARKS.md's "On a GPU" section, on a machine with a CUDA GPU.
#
#   bash benchmarks/gpu_check.sh [OUT_DIR]      # default OUT_DIR: benchmarks/results/gpu
#
# Needs sb3_grpo and its test/mujoco extras installed (or, offline, wheels in .whl/: they are installed into
# /tmp/site first, as on the lent H100 of benchmarks/results/gpu_h100). Runs one thing at a time: the CUDA tests, the
# ExactTRPO policy-step timing on cuda and cpu, the throughput benchmark on cuda and cpu, and examples/train_on_gpu.py
# with and without the GPU.
set -o pipefail
out=${1:-${OUT:-benchmarks/results/gpu}}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA device: torch.cuda.is_available() is False'" || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/env.txt"
echo "=== CUDA tests (and their CPU twins)"
python3 -m pytest -p no:cacheprovider -q -rs -m 'not slow' tests/test_devices.py tests/test_exact_trpo.py \
  tests/test_adaptive_kl_ppo.py tests/test_grpo.py tests/test_fisher.py -k "cuda or device" 2>&1 | tee "$out/pytest_cuda.txt"
tests_status=$?  # the timings still run; the script exits with the tests' status at the end
for dev in cuda cpu; do
  echo "=== ExactTRPO's policy step against sb3-contrib TRPO's on $dev"
  python3 benchmarks/bench_exact_trpo_update.py --device $dev --reps 5 --envs CartPole-v1 Pendulum-v1 HalfCheetah-v5 \
    Hopper-v5 2>&1 | grep -v -i warn | tee "$out/bench_update_$dev.txt"
done
for dev in cuda cpu; do
  echo "=== throughput on $dev"
  python3 -m benchmarks.bench_throughput --device $dev --steps 20000 --envs CartPole-v1 Pendulum-v1 HalfCheetah-v5 \
    --out "$out/throughput_$dev.csv" 2>&1 | grep -v -i warn | tee "$out/throughput_$dev.txt"
done
echo "=== examples/train_on_gpu.py, as written and with the GPU hidden"
python3 examples/train_on_gpu.py 2>&1 | grep -v -i warn | tee "$out/train_on_gpu.txt"
CUDA_VISIBLE_DEVICES= python3 examples/train_on_gpu.py 2>&1 | grep -v -i warn | tee -a "$out/train_on_gpu.txt"
exit "$tests_status"
