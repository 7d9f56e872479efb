#!/usr/bin/env bash
# Every training run behind the tables of BENCHMARKS.md and docs/guide/grpo_studies.md, then the speed benchmarks and
# the aggregate. Resumable: a run already in the results table is skipped.
#
#   bash benchmarks/run_all.sh                          # adds missing runs to benchmarks/results/*.csv.gz
#   RESULTS=/tmp/fresh bash benchmarks/run_all.sh       # a fresh table (runs are bit-reproducible per machine only)
#   JOBS=4 bash benchmarks/run_all.sh                   # runs in parallel, one torch thread each (default 2)
#
# The retired variants of the design studies (rows of the table without a file in benchmarks/sweeps/) are not rerun,
# nor the finished studies whose scripts were removed (their data stays in benchmarks/results/, their commands and
# commits on the docs pages): grpo:hc_g8_h8 (exp_history_baseline.py), exp_baseline_variance.py, exp_noise_reliance.py,
# bench_instructions.py, bench_soak.py, bench_arithmetic.py, default_estimator.py, option_studies.py.
set -euo pipefail
cd "$(dirname "$0")/.."
J=${JOBS:-2}
R=${RESULTS:-benchmarks/results}
H="python -m benchmarks.harness --jobs $J --results $R"
MJ="--budget 100000 --eval-freq 10000 --n-eval-episodes 5"   # MuJoCo at 100k
MJ3="--budget 300000 --eval-freq 20000 --n-eval-episodes 5"  # MuJoCo at 300k

# Classic control at the harness's budgets (CartPole 100k, Acrobot 200k, Pendulum 300k); TRPO's pair at 100k.
$H --algos grpo adaptive_kl_ppo ppo --envs CartPole-v1 Acrobot-v1 Pendulum-v1 --seeds 0 1 2 3 4
$H --algos grpo --envs Acrobot-v1 --seeds 5 6 7 8 9
$H --algos exact_trpo trpo --envs CartPole-v1 Acrobot-v1 Pendulum-v1 --seeds 0 1 2 3 4 --budget 100000
$H --algos exact_trpo:pend_kl01 exact_trpo:pend_b --envs Pendulum-v1 --seeds 0 1 2 3 4 --budget 100000
$H --algos grpo:default exact_trpo:default adaptive_kl_ppo:default --envs CartPole-v1 Pendulum-v1 --seeds 0 1 2 --budget 100000
# The same entries again from copies (BENCHMARKS, classic control: do later commits keep their results?).
$H --algos grpo:classic_rerun adaptive_kl_ppo:classic_rerun --envs CartPole-v1 Acrobot-v1 Pendulum-v1 --seeds 0 1 2 3 4
$H --algos exact_trpo:classic_rerun --envs CartPole-v1 Acrobot-v1 Pendulum-v1 --seeds 0 1 2 3 4 --budget 100000
# LunarLander at 200k; MuJoCo at 100k, and GRPO against PPO at 300k.
$H --algos grpo adaptive_kl_ppo ppo exact_trpo trpo --envs LunarLander-v3 --seeds 0 1 2 --budget 200000 --eval-freq 20000
$H --algos adaptive_kl_ppo ppo exact_trpo trpo --envs HalfCheetah-v5 Hopper-v5 --seeds 0 1 2 $MJ
$H --algos grpo:hc_rerun11 ppo --envs HalfCheetah-v5 --seeds $(seq 0 7) $MJ3
$H --algos grpo:hop_antl15g1lr5 --envs Hopper-v5 --seeds $(seq 0 149) $MJ3
$H --algos ppo --envs Hopper-v5 --seeds $(seq 0 19) $MJ3

# GRPO design choices (docs/guide/grpo_studies.md): the steps to each entry, then the variants that have a file.
$H --algos grpo:hc_c grpo:hc_b --envs HalfCheetah-v5 --seeds 0 1 2 $MJ3
$H --algos grpo:hc_g8 --envs HalfCheetah-v5 --seeds 0 1 2 3 4 $MJ3
$H --algos grpo:hop_a --envs Hopper-v5 --seeds 0 $MJ3
$H --algos grpo:hop_n grpo:hop_p --envs Hopper-v5 --seeds $(seq 0 9) $MJ3
$H --algos grpo:hop_mg --envs Hopper-v5 --seeds $(seq 0 19) $MJ3
$H --algos grpo:hop_mgent1 --envs Hopper-v5 --seeds $(seq 0 29) $MJ3
$H --algos grpo:hop_anneal grpo:hop_rerun11 --envs Hopper-v5 --seeds $(seq 0 49) $MJ3
$H --algos grpo:hop_antl15 --envs Hopper-v5 --seeds $(seq 0 124) $MJ3
$H --algos grpo:pend_ep20_lin2 --envs Pendulum-v1 --seeds 0 1 2 3 4
$H --algos grpo:pend_sde4 grpo:pend_sde4_lr1 --envs Pendulum-v1 --seeds $(seq 0 9)
$H --algos grpo:cart_zscore grpo:acro_step --envs CartPole-v1 Acrobot-v1 --seeds 0 1 2 3 4
$H --algos grpo:acro_step_g1 --envs Acrobot-v1 --seeds $(seq 0 9)
$H --algos grpo:branch_carry grpo:branch_classic --envs CartPole-v1 Acrobot-v1 --seeds 0 1 2
$H --algos grpo:branch grpo:branch_carry --envs Pendulum-v1 --seeds 0 1 2

# Speed (each writes its CSV into benchmarks/results/).
python -m benchmarks.bench_throughput
python -m benchmarks.bench_wallclock --seconds 60
python -m benchmarks.bench_paired --envs CartPole-v1 Acrobot-v1 Pendulum-v1 --rounds 30
python -m benchmarks.bench_paired --envs LunarLander-v3 HalfCheetah-v5 Hopper-v5 --rounds 10 \
  --out benchmarks/results/paired_adaptive_kl_ppo_large.csv
if python -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then
  bash benchmarks/gpu_check.sh benchmarks/work/gpu
fi

python -m benchmarks.aggregate --table "$R"
