#!/usr/bin/env bash
# The exact benchmark runs behind BENCHMARKS.md (resumable: finished cells are skipped; 2 jobs on a 2-core machine).
# Each cell trains with one torch thread; PPO cells are shared by the GRPO and AdaptiveKLPPO comparisons.
# Budgets and seed counts are what this 2-core machine allowed in one session; larger ones only need more time.
set -euo pipefail
cd "$(dirname "$0")/.."
J=${JOBS:-2}
# GRPO vs SB3 PPO (issue 3 budgets): CartPole 100k, Acrobot 200k, Pendulum 300k; 5 seeds.
python -m benchmarks.harness --algos grpo ppo --envs CartPole-v1 Acrobot-v1 Pendulum-v1 --seeds 0 1 2 3 4 --jobs "$J"
# ExactTRPO vs sb3-contrib TRPO: 1e5 steps on the classic envs, 5 seeds.
python -m benchmarks.harness --algos exact_trpo trpo --envs CartPole-v1 Acrobot-v1 Pendulum-v1 --seeds 0 1 2 3 4 --budget 100000 --jobs "$J"
# ExactTRPO's Pendulum entry (target_kl 0.02) against the earlier one (0.01) and 0.03, same run as TRPO's cells.
python -m benchmarks.harness --algos exact_trpo:pend_kl01 exact_trpo:pend_a exact_trpo:pend_b --envs Pendulum-v1 --seeds 0 1 2 3 4 --budget 100000 --jobs "$J"
# The `default` entries of our zoo configs, scored on one discrete and one continuous env.
python -m benchmarks.harness --algos grpo:default exact_trpo:default adaptive_kl_ppo:default --envs CartPole-v1 Pendulum-v1 --seeds 0 1 2 --budget 100000 --jobs "$J"
# Issue 10: branching groups on Pendulum (benchmarks/sweeps/grpo_branch.yml: new groups every rollout;
# grpo_branch_carry.yml: episodes carried over), 3 seeds at 300k.
python -m benchmarks.harness --algos grpo:branch grpo:branch_carry --envs Pendulum-v1 --seeds 0 1 2 --jobs "$J"
# AdaptiveKLPPO vs SB3 PPO at the GRPO comparison's budgets (PPO cells reused), 5 seeds.
python -m benchmarks.harness --algos adaptive_kl_ppo ppo --envs CartPole-v1 Acrobot-v1 Pendulum-v1 --seeds 0 1 2 3 4 --jobs "$J"
# Part B (cells committed in benchmarks/results/raw/): MuJoCo and LunarLander, 3 seeds, one cell at a time per stream.
MJ="--eval-freq 10000 --n-eval-episodes 5 --jobs $J"
python -m benchmarks.harness --algos adaptive_kl_ppo ppo exact_trpo trpo --envs HalfCheetah-v5 Hopper-v5 --seeds 0 1 2 --budget 100000 $MJ
python -m benchmarks.harness --algos adaptive_kl_ppo ppo exact_trpo trpo grpo --envs LunarLander-v3 --seeds 0 1 2 --budget 200000 --eval-freq 20000 --jobs "$J"
# Issue 10: GRPO with branching groups (zoo_configs/grpo.yml's entries = sweeps hc_b / hop_f) and without (hc_c), 300k.
MJ3="--budget 300000 --eval-freq 20000 --n-eval-episodes 5 --jobs $J"
python -m benchmarks.harness --algos grpo:hc_b grpo:hc_c --envs HalfCheetah-v5 --seeds 0 1 2 $MJ3
python -m benchmarks.harness --algos grpo:hc_carry --envs HalfCheetah-v5 --seeds 0 1 2 $MJ3
python -m benchmarks.harness --algos grpo:hc_b grpo:hop_a grpo:hop_b grpo:hop_c grpo:hop_d grpo:hop_e grpo:hop_f --envs Hopper-v5 --seeds 0 $MJ3
python -m benchmarks.harness --algos grpo:hop_f --envs Hopper-v5 --seeds 0 1 2 $MJ3
python -m benchmarks.harness --algos grpo:hop_g --envs Hopper-v5 --seeds 0 $MJ3
python -m benchmarks.harness --algos grpo:branch_classic grpo:branch_alive grpo:branch_carry grpo --envs CartPole-v1 --seeds 0 1 2 --budget 100000 --jobs "$J"
python -m benchmarks.harness --algos grpo:branch_classic grpo:branch_carry grpo --envs Acrobot-v1 --seeds 0 1 2 --jobs "$J"
# SB3 PPO at GRPO's 300k budget (HalfCheetah seed 2 ran in the sixth session).
python -m benchmarks.harness --algos ppo --envs HalfCheetah-v5 Hopper-v5 --seeds 0 1 2 $MJ3
# Issue 10, fifth session: Hopper variants (hop_n = the zoo entry: no observation normalisation), Pendulum speed
# sweep (pend_ep20_lin2 = the zoo entry), per-step baseline vs plain GRPO on CartPole and Acrobot.
python -m benchmarks.harness --algos grpo:hop_h grpo:hop_i grpo:hop_j grpo:hop_k grpo:hop_l grpo:hop_m grpo:hop_n grpo:hop_o --envs Hopper-v5 --seeds 0 $MJ3
python -m benchmarks.harness --algos grpo:hop_n --envs Hopper-v5 --seeds 1 2 3 4 $MJ3
python -m benchmarks.harness --algos grpo:hop_f --envs Hopper-v5 --seeds 3 4 $MJ3
python -m benchmarks.harness --algos grpo:pend_g90 grpo:pend_g95 grpo:pend_small grpo:pend_g90_small grpo:pend_lr3 grpo:pend_ls grpo:pend_ep20 grpo:pend_g8 --envs Pendulum-v1 --seeds 0 1 --budget 100000 --jobs "$J"
python -m benchmarks.harness --algos grpo:pend_ep20_lr2 grpo:pend_ep40 grpo:pend_ep20_small grpo:pend_ep20 grpo:pend_ep20_lr3 --envs Pendulum-v1 --seeds 0 1 2 --budget 100000 --jobs "$J"
python -m benchmarks.harness --algos grpo:pend_ep20_lr2 grpo:pend_ep20_lin2 --envs Pendulum-v1 --seeds 0 1 2 3 4 --jobs "$J"
python -m benchmarks.harness --algos grpo:cart_zscore --envs CartPole-v1 --seeds 0 1 2 3 4 --jobs "$J"
python -m benchmarks.harness --algos grpo:acro_step --envs Acrobot-v1 --seeds 0 1 2 3 4 --jobs "$J"
# Issue 10, sixth session: Hopper (hop_p: larger learning rate decayed, hop_q: 20 epochs, hop_r/t: gamma 0.995/0.997;
# seeds 5-9 as a fresh check of hop_p and hop_n), Acrobot per-step baseline at gamma 1 (and plain GRPO on seeds 5-9),
# Pendulum speed variants, HalfCheetah with the learning rate decayed.
python -m benchmarks.harness --algos grpo:hop_p grpo:hop_q --envs Hopper-v5 --seeds 3 $MJ3
python -m benchmarks.harness --algos grpo:hop_p grpo:hop_r grpo:hop_t --envs Hopper-v5 --seeds 0 1 2 3 4 $MJ3
python -m benchmarks.harness --algos grpo:hop_p grpo:hop_n --envs Hopper-v5 --seeds 5 6 7 8 9 $MJ3
python -m benchmarks.harness --algos grpo:hop_p grpo:hop_u --envs Hopper-v5 --seeds 0 1 --budget 1000000 --eval-freq 50000 --n-eval-episodes 5 --jobs "$J"
python -m benchmarks.harness --algos grpo:acro_step_g1 --envs Acrobot-v1 --seeds 0 1 2 3 4 --jobs "$J"
python -m benchmarks.harness --algos grpo grpo:acro_step_g1 --envs Acrobot-v1 --seeds 5 6 7 8 9 --jobs "$J"
python -m benchmarks.harness --algos grpo:pend_bs128 grpo:pend_net grpo:pend_clip3 grpo:pend_clip3_lin --envs Pendulum-v1 --seeds 0 1 2 --jobs "$J"
python -m benchmarks.harness --algos grpo:pend_clip3 --envs Pendulum-v1 --seeds 3 4 --jobs "$J"
python -m benchmarks.harness --algos grpo:hc_d --envs HalfCheetah-v5 --seeds 0 1 2 $MJ3
# Issue 10, seventh session: lam in the per-step baseline (hop_v/w, acro_step_lam), Hopper with more action noise
# (hop_x), gSDE (pend_sde, pend_sde4 and its variants: the Pendulum entry is pend_sde4_ep10; hop_sde, hc_sde, hc_sde2),
# HalfCheetah with groups of 8 (hc_g8: the HalfCheetah entry since), then GRPO's Pendulum cells with the new entry.
python -m benchmarks.harness --algos grpo:hop_v grpo:hop_w --envs Hopper-v5 --seeds 0 $MJ3
python -m benchmarks.harness --algos grpo:acro_step_lam --envs Acrobot-v1 --seeds 0 1 --jobs "$J"
python -m benchmarks.harness --algos grpo:hop_x --envs Hopper-v5 --seeds 0 1 2 3 4 5 $MJ3
python -m benchmarks.harness --algos grpo:pend_sde grpo:pend_sde4 --envs Pendulum-v1 --seeds 0 1 --jobs "$J"
python -m benchmarks.harness --algos grpo:pend_sde4 grpo:pend_sde4_ep10 grpo:pend_sde4_lr1 --envs Pendulum-v1 --seeds 0 1 2 3 4 5 6 7 8 9 --jobs "$J"
python -m benchmarks.harness --algos grpo:hop_sde --envs Hopper-v5 --seeds 0 $MJ3
python -m benchmarks.harness --algos grpo:hc_sde --envs HalfCheetah-v5 --seeds 0 $MJ3
python -m benchmarks.harness --algos grpo:hc_sde2 --envs HalfCheetah-v5 --seeds 0 1 $MJ3
python -m benchmarks.harness --algos grpo:hc_g8 --envs HalfCheetah-v5 --seeds 0 1 2 3 4 $MJ3
python -m benchmarks.harness --algos grpo:hc_g8_e20 grpo:hc_g8_16 grpo:hc_g8_l200 grpo:hc_g8_g98 grpo:hc_g8_lr5 grpo:hc_g8_n4 --envs HalfCheetah-v5 --seeds 0 1 $MJ3
python -m benchmarks.harness --algos grpo --envs Pendulum-v1 --seeds 0 1 2 3 4 --budget 300000 --jobs "$J"
# Sequential throughput of all five algorithms on the classic envs (quiet machine; seventh session's rerun).
python -m benchmarks.bench_throughput
# GRPO's Pendulum throughput with the 20-epoch entry, against PPO in the same sequential run.
python -m benchmarks.bench_throughput --steps 30000 --envs Pendulum-v1 --algos ppo grpo --repeats 3 --out benchmarks/results/throughput_grpo_pendulum.csv
python -m benchmarks.aggregate --envs HalfCheetah-v5 Hopper-v5 LunarLander-v3 --algos adaptive_kl_ppo ppo exact_trpo trpo grpo grpo:hc_b grpo:hc_g8 grpo:hop_p ppo@300k --out benchmarks/results/large_envs
python -m benchmarks.bench_soak --steps 1000000 --window 50000 --algos grpo exact_trpo adaptive_kl_ppo
# Part A's aggregate (classic control), then the paired fps ratio of AdaptiveKLPPO to PPO (run it on a quiet machine).
python -m benchmarks.aggregate --envs CartPole-v1 Acrobot-v1 Pendulum-v1 --algos grpo ppo exact_trpo trpo adaptive_kl_ppo --seeds 0 1 2 3 4
python -m benchmarks.bench_paired --algo adaptive_kl_ppo --envs CartPole-v1 Acrobot-v1 Pendulum-v1 LunarLander-v3 HalfCheetah-v5 Hopper-v5
# Instructions per iteration under valgrind (load-independent; about 50x slower than native).
python -m benchmarks.bench_instructions --algo adaptive_kl_ppo --envs CartPole-v1 Acrobot-v1 Pendulum-v1 --k1 1 --k2 3
python -m benchmarks.bench_instructions --algo adaptive_kl_ppo --envs CartPole-v1 --k1 1 --k2 3 --rollouts-only --out benchmarks/results/instructions_adaptive_kl_ppo_rollouts.csv
# Issue 10, eighth session: the survival bonus taken out of Hopper's training reward (healthy_reward, hop_y / z / h25),
# groups of 4 (hop_g4), one discount per reward function (reward_gammas: hop_mg, the Hopper entry since; hop_mgw3 /
# mgw10, hop_mgx), HalfCheetah with a decayed learning rate (hc_lin) and the control cost credited to its own step.
python -m benchmarks.harness --algos grpo:hop_y grpo:hop_z --envs Hopper-v5 --seeds 0 $MJ3
python -m benchmarks.harness --algos grpo:hop_z --envs Hopper-v5 --seeds 1 $MJ3
python -m benchmarks.harness --algos grpo:hop_h25 --envs Hopper-v5 --seeds 3 7 $MJ3
python -m benchmarks.harness --algos grpo:hop_g4 --envs Hopper-v5 --seeds 0 1 $MJ3
python -m benchmarks.harness --algos grpo:hop_mg --envs Hopper-v5 --seeds 0 1 2 3 4 5 6 7 8 9 $MJ3
python -m benchmarks.harness --algos grpo:hop_mgw3 grpo:hop_mgw10 --envs Hopper-v5 --seeds 6 $MJ3
python -m benchmarks.harness --algos grpo:hc_lin --envs HalfCheetah-v5 --seeds 0 1 $MJ3
python -m benchmarks.exp_control_cost --algo grpo:hc_ctrl0 --seeds 0 1
python -m benchmarks.harness --algos grpo:hop_mge20 --envs Hopper-v5 --seeds 6 0 1 2 3 4 $MJ3
python -m benchmarks.harness --algos grpo:hop_mgx grpo:hop_mg99 --envs Hopper-v5 --seeds 0 6 $MJ3
python -m benchmarks.harness --algos grpo:hc_g16 --envs HalfCheetah-v5 --seeds 0 1 2 $MJ3
python -m benchmarks.harness --algos grpo:hc_bs128 --envs HalfCheetah-v5 --seeds 0 1 $MJ3
python -m benchmarks.harness --algos grpo:hop_mg0 --envs Hopper-v5 --seeds 0 6 1 2 3 4 $MJ3
python -m benchmarks.harness --algos grpo:hop_mg --envs Hopper-v5 --seeds 0 6 --budget 1000000 --eval-freq 50000 --n-eval-episodes 5 --jobs "$J"
python -m benchmarks.harness --algos grpo:hop_mgc --envs Hopper-v5 --seeds 0 1 2 3 4 5 6 7 8 9 $MJ3
# Issue 10, ninth session: on top of hop_mg, speed at gamma 0.95 / weighted 1.5 / the survival bonus undiscounted,
# an entropy bonus (hop_mgent, hop_mgent1: the Hopper entry since; HalfCheetah with it: hc_ent); and SB3 PPO (rl-zoo's
# entry) on Hopper seeds 3-9 at 300k, for a 10-seed comparison.
python -m benchmarks.harness --algos grpo:hop_mg95 grpo:hop_mgw15 grpo:hop_mg1 --envs Hopper-v5 --seeds 0 1 2 3 $MJ3
python -m benchmarks.harness --algos ppo --envs Hopper-v5 --seeds 3 4 5 6 7 8 9 $MJ3
python -m benchmarks.harness --algos grpo:hop_mgent --envs Hopper-v5 --seeds 0 1 2 3 4 5 6 7 8 9 $MJ3
python -m benchmarks.harness --algos grpo:hop_mgent1 --envs Hopper-v5 --seeds 0 1 2 3 4 5 6 7 8 9 $MJ3
# Fresh seeds for the new entry (hop_mgent1) and the previous one (hop_mg).
python -m benchmarks.harness --algos grpo:hop_mgent1 grpo:hop_mg --envs Hopper-v5 --seeds 10 11 12 13 14 15 16 17 18 19 $MJ3
python -m benchmarks.harness --algos grpo:hc_ent --envs HalfCheetah-v5 --seeds 0 1 2 3 4 $MJ3
python -m benchmarks.harness --algos grpo:hop_mgent1 --envs Hopper-v5 --seeds 0 11 --budget 1000000 --eval-freq 50000 --n-eval-episodes 5 --jobs "$J"
# Part B's aggregate again, with the Hopper entries (eighth and ninth sessions) and PPO's 10 Hopper seeds (the command in BENCHMARKS.md).
python -m benchmarks.aggregate --envs HalfCheetah-v5 Hopper-v5 LunarLander-v3 --algos adaptive_kl_ppo ppo exact_trpo trpo grpo grpo:hc_b grpo:hc_g8 grpo:hop_p grpo:hop_mg grpo:hop_mgent1 ppo@300k --out benchmarks/results/large_envs
# Issue 10, tenth session: against late fall-backs on Hopper, PPO-style early stopping (hop_kl1; seeds 10-15 of its
# fresh check only: stopped at its second seed below 1000) and a KL penalty to the behaviour policy (hop_beta1, stopped
# at seed 3); HalfCheetah with early stopping (hc_kl2, hc_lrkl2); SB3 PPO on Hopper seeds 10-19 (20 seeds, as GRPO's entry);
# a stronger entropy bonus on Hopper (hop_mgent2, stopped at seed 2, its first below 1000); minibatches of 512 (hop_bs512);
# the speed stream weighted 1.25 (hop_mgentw125); the entry on fresh seeds 20-29.
python -m benchmarks.harness --algos grpo:hop_kl1 grpo:hop_beta1 --envs Hopper-v5 --seeds 0 1 2 3 $MJ3
python -m benchmarks.harness --algos grpo:hop_kl1 --envs Hopper-v5 --seeds 4 5 6 7 8 9 10 11 12 13 14 15 $MJ3
python -m benchmarks.harness --algos grpo:hc_kl2 grpo:hc_lrkl2 --envs HalfCheetah-v5 --seeds 0 1 2 $MJ3
python -m benchmarks.harness --algos ppo --envs Hopper-v5 --seeds 10 11 12 13 14 15 16 17 18 19 $MJ3
python -m benchmarks.harness --algos grpo:hop_mgent2 --envs Hopper-v5 --seeds 0 1 2 3 $MJ3
python -m benchmarks.harness --algos grpo:hop_bs512 --envs Hopper-v5 --seeds 0 1 2 3 4 5 6 7 8 9 $MJ3
python -m benchmarks.harness --algos grpo:hop_mgentw125 --envs Hopper-v5 --seeds 0 1 2 3 4 5 6 7 8 9 $MJ3
python -m benchmarks.harness --algos grpo:hop_mgent1 --envs Hopper-v5 --seeds 20 21 22 23 24 25 26 27 28 29 $MJ3
# Issue 10, eleventh session: group_step_baseline's scale='floored' on the Hopper entry (hop_fl: floor 1; hop_fl25:
# floor 0.25), and on hop_fl's misses the speed stream at 0.99 (hop_fl99) or weighted 1.5 (hop_flw15); clip range 0.1
# (hop_c1, stopped at seed 3; hop_fl25 stopped at seed 20).
python -m benchmarks.harness --algos grpo:hop_fl --envs Hopper-v5 --seeds 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 $MJ3
python -m benchmarks.harness --algos grpo:hop_fl99 grpo:hop_flw15 --envs Hopper-v5 --seeds 8 13 17 18 $MJ3
python -m benchmarks.harness --algos grpo:hop_c1 --envs Hopper-v5 --seeds 0 1 2 3 $MJ3
python -m benchmarks.harness --algos grpo:hop_fl25 --envs Hopper-v5 --seeds 8 13 17 18 0 1 2 3 4 5 6 7 9 10 11 12 14 15 16 19 20 $MJ3
# HalfCheetah parity: the entry without observation normalisation (hc_nn) or with clip range 0.1 (hc_c1).
python -m benchmarks.harness --algos grpo:hc_nn grpo:hc_c1 --envs HalfCheetah-v5 --seeds 0 1 2 $MJ3
# Both entries rerun under other names (cells are bit-reproducible within a session, not across sessions), so that
# this session's variants are compared with cells of the same session.
python -m benchmarks.harness --algos grpo:hop_rerun11 --envs Hopper-v5 --seeds 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 $MJ3
python -m benchmarks.harness --algos grpo:hc_rerun11 --envs HalfCheetah-v5 --seeds 0 1 2 $MJ3
# The floored scale against the rerun entry on seeds 20-29, so both have 30 seeds of this session.
python -m benchmarks.harness --algos grpo:hop_fl grpo:hop_rerun11 --envs Hopper-v5 --seeds 20 21 22 23 24 25 26 27 28 29 $MJ3
# Issue 10, twelfth session (this machine reproduced the eleventh session's cells bit for bit): the floored scale against
# the entry on fresh seeds 30-49 (50 seeds each); branching on the entry (hop_br) and training episodes cut at 500 / 250
# steps (hop_tr500 / hop_tr250); less action noise from the start (hop_ls3) or a falling bound on it, log_std_max
# from -1.5 to -4 (hop_anneal), also with the floored scale (hop_annfl).
python -m benchmarks.harness --algos grpo:hop_rerun11 grpo:hop_fl --envs Hopper-v5 --seeds $(seq 30 49) $MJ3
python -m benchmarks.harness --algos grpo:hop_br --envs Hopper-v5 --seeds 0 1 $MJ3
python -m benchmarks.harness --algos grpo:hop_tr500 grpo:hop_tr250 --envs Hopper-v5 --seeds 0 1 $MJ3
python -m benchmarks.harness --algos grpo:hop_ls3 --envs Hopper-v5 --seeds 0 1 2 3 $MJ3
python -m benchmarks.harness --algos grpo:hop_anneal grpo:hop_annfl --envs Hopper-v5 --seeds $(seq 0 19) $MJ3
python -m benchmarks.harness --algos grpo:hop_anneal --envs Hopper-v5 --seeds $(seq 20 39) $MJ3
python -m benchmarks.harness --algos grpo:hop_annfl --envs Hopper-v5 --seeds $(seq 20 29) $MJ3
# Part B's aggregate with the new Hopper entry (hop_anneal).
python -m benchmarks.aggregate --envs HalfCheetah-v5 Hopper-v5 LunarLander-v3 --algos adaptive_kl_ppo ppo exact_trpo trpo grpo grpo:hc_b grpo:hc_g8 grpo:hop_p grpo:hop_mg grpo:hop_mgent1 grpo:hop_anneal ppo@300k --out benchmarks/results/large_envs
# The noise bound stopping at -3.5 (hop_an35), first on hop_anneal's misses, then on seeds it clears (stopped at seed 8).
python -m benchmarks.harness --algos grpo:hop_an35 --envs Hopper-v5 --seeds 26 3 6 8 0 1 2 4 5 7 $MJ3
# Issue 10, thirteenth session (this machine reproduced hop_anneal seed 8 bit for bit). HalfCheetah: the noise bound
# falling from -1 to -3 / -2 (hc_an3 / hc_an2), no orthogonal initialisation (hc_oi), the entry rerun on seeds 3-7 and
# SB3 PPO on seeds 3-4 for parity over 5 seeds. Hopper, on top of hop_anneal: early stopping at target_kl 0.03 / 0.1
# (hop_ankl3 stopped at seed 5; hop_ankl10), the bound falling to -6 (hop_an6, stopped at seed 5), no orthogonal
# initialisation (hop_anoi, stopped at seed 2), 5 epochs (hop_anep5). First, the diagnosis of hop_anneal's misses: each
# cell retrained with the SB3 logger, its final policy played with and without action noise.
for seed in 26 3 6; do python -m benchmarks.exp_noise_reliance --algo grpo:hop_anneal --env Hopper-v5 --seed $seed; done
python -m benchmarks.harness --algos grpo:hc_an3 grpo:hc_an2 --envs HalfCheetah-v5 --seeds 0 1 2 $MJ3
python -m benchmarks.harness --algos grpo:hc_oi grpo:hc_rerun11 --envs HalfCheetah-v5 --seeds 0 1 2 3 4 5 6 7 $MJ3
python -m benchmarks.harness --algos ppo --envs HalfCheetah-v5 --seeds 3 4 $MJ3
python -m benchmarks.harness --algos grpo:hop_ankl3 --envs Hopper-v5 --seeds 0 1 2 3 4 5 $MJ3
python -m benchmarks.harness --algos grpo:hop_ankl10 --envs Hopper-v5 --seeds $(seq 0 9) $MJ3
python -m benchmarks.harness --algos grpo:hop_an6 --envs Hopper-v5 --seeds 0 1 2 3 4 5 $MJ3
python -m benchmarks.harness --algos grpo:hop_anoi --envs Hopper-v5 --seeds 0 1 2 $MJ3
python -m benchmarks.harness --algos grpo:hop_anep5 grpo:hop_anneal --envs Hopper-v5 --seeds $(seq 0 49) $MJ3
# Part B's aggregate with the entry's 50 seeds and hop_anep5.
python -m benchmarks.aggregate --envs HalfCheetah-v5 Hopper-v5 LunarLander-v3 --algos adaptive_kl_ppo ppo exact_trpo trpo grpo grpo:hc_b grpo:hc_g8 grpo:hop_p grpo:hop_mg grpo:hop_mgent1 grpo:hop_anneal grpo:hop_anep5 ppo@300k --out benchmarks/results/large_envs
# Issue 10, fourteenth session (this machine reproduced hop_anneal seed 8 bit for bit). Hopper: hop_anneal trained on
# 1500-step episodes (hop_antl15, the zoo entry since), then with the forward speed and control cost weighted 1.5
# (hop_antl15w15, stopped at seed 20); hop_antl15 on fresh seeds 50-69 after it became the entry; 2000-step training
# episodes (hop_antl20, seeds 0-19).
python -m benchmarks.harness --algos grpo:hop_antl15 --envs Hopper-v5 --seeds $(seq 0 69) $MJ3
python -m benchmarks.harness --algos grpo:hop_antl15w15 --envs Hopper-v5 --seeds $(seq 0 20) $MJ3
python -m benchmarks.harness --algos grpo:hop_antl20 --envs Hopper-v5 --seeds $(seq 0 19) $MJ3
# Part B's aggregate with the new entry.
python -m benchmarks.aggregate --envs HalfCheetah-v5 Hopper-v5 LunarLander-v3 --algos adaptive_kl_ppo ppo exact_trpo trpo grpo grpo:hc_b grpo:hc_g8 grpo:hop_p grpo:hop_mg grpo:hop_mgent1 grpo:hop_anneal grpo:hop_anep5 grpo:hop_antl15 grpo:hop_antl15w15 ppo@300k --out benchmarks/results/large_envs
# Fifteenth session. Only on a CUDA machine (a lent H100 then): the CUDA tests and GPU timings
# (benchmarks/results/gpu_h100).
if python -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then
  bash benchmarks/gpu_check.sh benchmarks/results/gpu_h100
fi
# Issue 10, Hopper: the entry with forward progress alone weighted 1.5 (hop_antl15f15, the new forward_reward and
# cost_reward built-ins); the entry on fresh seeds 70-99.
python -m benchmarks.harness --algos grpo:hop_antl15f15 --envs Hopper-v5 --seeds $(seq 0 49) $MJ3
python -m benchmarks.harness --algos grpo:hop_antl15 --envs Hopper-v5 --seeds $(seq 70 99) $MJ3
# Part B's aggregate with the entry's 100 seeds and hop_antl15f15.
python -m benchmarks.aggregate --envs HalfCheetah-v5 Hopper-v5 LunarLander-v3 --algos adaptive_kl_ppo ppo exact_trpo trpo grpo grpo:hc_b grpo:hc_g8 grpo:hop_p grpo:hop_mg grpo:hop_mgent1 grpo:hop_anneal grpo:hop_anep5 grpo:hop_antl15 grpo:hop_antl15w15 grpo:hop_antl15f15 ppo@300k --out benchmarks/results/large_envs
# Issue 10, sixteenth session (hop_anneal seed 8 reproduced bit for bit), Hopper: the entry with one group per rollout
# (hop_antl15g1, stopped at seed 30), then with half the learning rate on top (hop_antl15g1lr5, seeds 0-97; 98-99 in
# the seventeenth session, when it became the zoo entry). Part B's aggregate with both.
python -m benchmarks.harness --algos grpo:hop_antl15g1 --envs Hopper-v5 --seeds $(seq 0 30) $MJ3
python -m benchmarks.harness --algos grpo:hop_antl15g1lr5 --envs Hopper-v5 --seeds $(seq 0 99) $MJ3
python -m benchmarks.aggregate --envs HalfCheetah-v5 Hopper-v5 LunarLander-v3 --algos adaptive_kl_ppo ppo exact_trpo trpo grpo grpo:hc_b grpo:hc_g8 grpo:hop_p grpo:hop_mg grpo:hop_mgent1 grpo:hop_anneal grpo:hop_anep5 grpo:hop_antl15 grpo:hop_antl15w15 grpo:hop_antl15f15 grpo:hop_antl15g1 grpo:hop_antl15g1lr5 ppo@300k --out benchmarks/results/large_envs
# Issue 10, seventeenth session: the Hopper entry (hop_antl15g1lr5) on fresh seeds 100-149, the previous entry on
# 100-124, and Part B's aggregate.
python -m benchmarks.harness --algos grpo:hop_antl15g1lr5 --envs Hopper-v5 --seeds $(seq 100 149) $MJ3
python -m benchmarks.harness --algos grpo:hop_antl15 --envs Hopper-v5 --seeds $(seq 100 124) $MJ3
python -m benchmarks.aggregate --envs HalfCheetah-v5 Hopper-v5 LunarLander-v3 --algos adaptive_kl_ppo ppo exact_trpo trpo grpo grpo:hc_b grpo:hc_g8 grpo:hop_p grpo:hop_mg grpo:hop_mgent1 grpo:hop_anneal grpo:hop_anep5 grpo:hop_antl15 grpo:hop_antl15w15 grpo:hop_antl15f15 grpo:hop_antl15g1 grpo:hop_antl15g1lr5 ppo@300k --out benchmarks/results/large_envs
# HalfCheetah with a lower gamma (0.95, 0.9, 0.9 with segments of 50 steps).
python -m benchmarks.harness --algos grpo:hc_g8_g90 grpo:hc_g8_g95 grpo:hc_g8_g90l50 --envs HalfCheetah-v5 --seeds 0 1 2 $MJ3
# ... then log_std_init -0.5, minibatches of 512 and clip_range_high 0.28 (seeds 0-7 for the last).
python -m benchmarks.harness --algos grpo:hc_g8_ls05 grpo:hc_g8_bs512 grpo:hc_g8_ch28 --envs HalfCheetah-v5 --seeds 0 1 2 $MJ3
python -m benchmarks.harness --algos grpo:hc_g8_ch28 --envs HalfCheetah-v5 --seeds 3 4 5 6 7 $MJ3
# Issue 10, eighteenth session. HalfCheetah parity: less action noise (log_std_init -1.5, -2), 5 epochs, segments of
# 50 steps, max_grad_norm 1.0, clip range 0.3 (seeds 0-2); no orthogonal initialisation with less noise (seeds 0-7).
python -m benchmarks.harness --algos grpo:hc_g8_ls15 grpo:hc_g8_ls2 --envs HalfCheetah-v5 --seeds 0 1 2 $MJ3
python -m benchmarks.harness --algos grpo:hc_g8_ep5 grpo:hc_g8_l50 grpo:hc_g8_gn1 grpo:hc_g8_c3 --envs HalfCheetah-v5 --seeds 0 1 2 $MJ3
python -m benchmarks.harness --algos grpo:hc_g8_oi_ls15 grpo:hc_g8_oi_ls2 --envs HalfCheetah-v5 --seeds $(seq 0 7) $MJ3
# ... minibatches of 64 and a 512x512 actor (seeds 0-2).
python -m benchmarks.harness --algos grpo:hc_g8_bs64 grpo:hc_g8_a512 --envs HalfCheetah-v5 --seeds 0 1 2 $MJ3
# Hopper: the entry with clip_range_high 0.28, a candidate (seeds 0-49, then fresh seeds 50-79, 80-95 and 96-149; not adopted).
python -m benchmarks.harness --algos grpo:hop_g1lr5ch28 --envs Hopper-v5 --seeds $(seq 0 49) $MJ3
python -m benchmarks.harness --algos grpo:hop_g1lr5ch28 --envs Hopper-v5 --seeds $(seq 50 79) $MJ3
python -m benchmarks.harness --algos grpo:hop_g1lr5ch28 --envs Hopper-v5 --seeds $(seq 80 95) $MJ3
python -m benchmarks.harness --algos grpo:hop_g1lr5ch28 --envs Hopper-v5 --seeds $(seq 96 149) $MJ3
# HalfCheetah: a reward-history control variate in the per-step baseline (nineteenth session; seeds 0-7).
python -m benchmarks.exp_history_baseline --algo grpo:hc_g8_h8 --seeds 0 1 2 3 4 5 6 7
# Issue 10, twentieth session. HalfCheetah: rollouts of 512 steps (seeds 0-2), episodes carried over across rollouts
# with groups of 8 (seeds 0-7); Hopper: the survival bonus at 0.995 (seeds 0-19).
python -m benchmarks.harness --algos grpo:hc_g8_carry grpo:hc_g8_n512 --envs HalfCheetah-v5 --seeds 0 1 2 $MJ3
python -m benchmarks.harness --algos grpo:hc_g8_carry --envs HalfCheetah-v5 --seeds 3 4 5 6 7 $MJ3
python -m benchmarks.harness --algos grpo:hop_g1lr5s995 --envs Hopper-v5 --seeds $(seq 0 19) $MJ3
# HalfCheetah: the learning rate decayed linearly from 3e-4 (seeds 0-2) and from 5e-4 (seeds 0-7).
python -m benchmarks.harness --algos grpo:hc_g8_lin3 grpo:hc_g8_lin5 --envs HalfCheetah-v5 --seeds 0 1 2 $MJ3
python -m benchmarks.harness --algos grpo:hc_g8_lin5 --envs HalfCheetah-v5 --seeds 3 4 5 6 7 $MJ3
# SB3 PPO on HalfCheetah seeds 5-7 (8 seeds, as the GRPO entry's rerun), and Part B's aggregate with them.
python -m benchmarks.harness --algos ppo --envs HalfCheetah-v5 --seeds 5 6 7 $MJ3
python -m benchmarks.aggregate --envs HalfCheetah-v5 Hopper-v5 LunarLander-v3 --algos adaptive_kl_ppo ppo exact_trpo trpo grpo grpo:hc_b grpo:hc_g8 grpo:hop_p grpo:hop_mg grpo:hop_mgent1 grpo:hop_anneal grpo:hop_anep5 grpo:hop_antl15 grpo:hop_antl15w15 grpo:hop_antl15f15 grpo:hop_antl15g1 grpo:hop_antl15g1lr5 ppo@300k --out benchmarks/results/large_envs
# HalfCheetah: where the per-step baseline's advantage noise comes from (a diagnostic; no cells).
for seed in 0 1 2; do for steps in 100000 250000; do
  python -m benchmarks.exp_baseline_variance --steps $steps --seed $seed
done; done
# Every variant against the zoo entry on the same seeds, one table per env.
python -m benchmarks.sweep_table --env HalfCheetah-v5 --entry grpo:hc_rerun11 --reference ppo
python -m benchmarks.sweep_table --env Hopper-v5 --entry grpo:hop_antl15g1lr5 --threshold 1000 --reference ppo
