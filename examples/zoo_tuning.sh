#!/usr/bin/env bash
# Train and tune with the rl-zoo command line (needs the [zoo] extra: pip install -e ".[zoo]").
#
# 1. Train GRPO on CartPole-v1 for 20,000 steps with the shipped config (zoo_configs/grpo.yml); the model and
#    its logs land in logs/grpo/CartPole-v1_1/.
# 2. A tiny hyperparameter search: 4 trials of 5,000 steps each, random sampler, stored in a SQLite file
#    (use --storage postgresql://... to share one study between many workers on many machines).
#
# Runtime: about 1-2 minutes on one CPU core.
set -euo pipefail

LOG_DIR="${LOG_DIR:-logs}"
export OMP_NUM_THREADS=1

python -m sb3_grpo.zoo train --algo grpo --env CartPole-v1 -n 20000 --seed 0 -f "$LOG_DIR" --num-threads 1

python -m sb3_grpo.zoo train --algo grpo --env CartPole-v1 -n 5000 --seed 0 -f "$LOG_DIR" --num-threads 1 \
    -optimize --n-trials 4 --n-jobs 1 --sampler random --pruner none --n-evaluations 1 --eval-episodes 5 \
    --storage "sqlite:///$LOG_DIR/grpo_cartpole_tuning.db" --study-name grpo-cartpole --no-optim-plots
