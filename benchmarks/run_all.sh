#!/usr/bin/env bash
# The exact benchmark runs behind BENCHMARKS.md (resumable: finished cells are skipped; 2 jobs on a 2-core machine).
# Each cell trains with one torch thread; PPO cells are shared by the GRPO and AdaptiveKLPPO comparisons.
# Budgets and seed counts are what this 2-core machine allowed in one session; larger ones only need more time.
set -euo pipefail
cd "$(dirname "$0")/.."
J=${JOBS:-2}
# GRPO vs SB3 PPO (issue 3 budgets): CartPole 100k, Acrobot 200k, Pendulum 300k; 5 seeds.
python -m benchmarks.harness --algos grpo ppo --envs CartPole-v1 Acrobot-v1 Pendulum-v1 --seeds 0 1 2 3 4 --jobs "$J"
# ExactTRPO vs sb3-contrib TRPO: 1e5 steps on the classic envs; 5 seeds on CartPole, 3 on the others.
python -m benchmarks.harness --algos exact_trpo trpo --envs CartPole-v1 --seeds 0 1 2 3 4 --budget 100000 --jobs "$J"
python -m benchmarks.harness --algos exact_trpo trpo --envs Acrobot-v1 Pendulum-v1 --seeds 0 1 2 --budget 100000 --jobs "$J"
# Issue 10: branching groups on Pendulum (benchmarks/sweeps/grpo_branch.yml), 3 seeds at 300k.
python -m benchmarks.harness --algos grpo:branch --envs Pendulum-v1 --seeds 0 1 2 --jobs "$J"
# AdaptiveKLPPO vs SB3 PPO at the GRPO comparison's budgets (PPO cells reused).
python -m benchmarks.harness --algos adaptive_kl_ppo ppo --envs CartPole-v1 Acrobot-v1 --seeds 0 1 2 --jobs "$J"
python -m benchmarks.harness --algos adaptive_kl_ppo ppo --envs Pendulum-v1 --seeds 0 1 2 --jobs "$J"
# Larger envs at the budget this machine allows: 1 seed each.
python -m benchmarks.harness --algos grpo ppo adaptive_kl_ppo trpo exact_trpo --envs LunarLander-v3 --seeds 0 --budget 100000 --eval-freq 20000 --jobs "$J"
python -m benchmarks.harness --algos grpo ppo adaptive_kl_ppo trpo exact_trpo --envs HalfCheetah-v5 --seeds 0 --budget 50000 --eval-freq 10000 --n-eval-episodes 5 --jobs "$J"
python -m benchmarks.aggregate
