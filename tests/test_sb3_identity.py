"""SB3 conformance: learning SB3's identity envs (SB3 ``tests/test_identity.py``, contrib ``tests/test_identity.py``).

The learning runs (mean reward >= 90 of 100 over 20 episodes, as SB3 requires) are marked slow; the default run
keeps a smoke variant of each case. Settings follow SB3's (PPO) and contrib's (TRPO) test: ExactTRPO gets TRPO's,
AdaptiveKLPPO PPO's, and GRPO PPO's too, with its default advantage estimator, groups of 4 and the budget rounded
to whole groups (2000 steps on the discrete envs against PPO's 1200: a rollout holds whole 100-step episodes).
REINFORCE (one gradient step per rollout by default) gets PPO's 4 epochs and 1500 steps on the discrete envs, and
minibatches of 20 steps, 10 epochs, 1500 steps and the discrete cases' gamma=0.4 on the continuous one (without a
critic, the reward-to-go over 100-step episodes at gamma=0.99 is too noisy to learn from in so few steps).
On the continuous env the TRPO family runs rollouts of 256 steps (contrib does not test it; with its default 2048
steps, TRPO reaches 66 after 1500 steps, a single update).

OnlineDPO learns from one preference per pair of whole 100-step episodes, with no credit for single steps: it passes
the Discrete env (6000 steps), but the other identity envs stay far below 90 within a test's budget (measured at
30,000 steps: MultiDiscrete 25, MultiBinary 56, Box 64; at 20,000 steps with IPO: 30, 12, 65). Those cases run and
are marked as expected failures, so a change that makes them pass shows as XPASS.
"""

import numpy as np
import pytest
from sb3_conformance import ALL_ALGOS, algo_kwargs, algo_params
from sb3_contrib import TRPO
from stable_baselines3 import PPO
from stable_baselines3.common.envs import IdentityEnv, IdentityEnvBox, IdentityEnvMultiBinary, IdentityEnvMultiDiscrete
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import DummyVecEnv

from sb3_grpo import GRPO, REINFORCE, AdaptiveKLPPO, ExactTRPO, OnlineDPO

DIM = 4
DISCRETE_ENVS = {
    "Discrete": lambda: IdentityEnv(DIM),
    "MultiDiscrete": lambda: IdentityEnvMultiDiscrete(DIM),
    "MultiBinary": lambda: IdentityEnvMultiBinary(DIM),
}

#: (settings, total timesteps) on the discrete identity envs
DISCRETE_SETTINGS = {
    PPO: (dict(n_epochs=4, n_steps=256, learning_rate=0.002, seed=3), 1200),
    TRPO: (dict(learning_rate=1e-3, seed=0), 1500),
    ExactTRPO: (dict(learning_rate=1e-3, seed=0), 1500),
    AdaptiveKLPPO: (dict(n_epochs=4, n_steps=256, learning_rate=0.002, seed=3), 1200),
    GRPO: (dict(n_epochs=4, n_steps=256, group_size=4, learning_rate=0.002, seed=3, verify_group_starts=False), 2000),
    REINFORCE: (dict(n_epochs=4, n_steps=100, learning_rate=0.005, seed=3), 1500),
    OnlineDPO: (
        dict(n_steps=256, group_size=4, n_epochs=10, learning_rate=0.003, pairs="all", seed=3, verify_group_starts=False),
        6000,
    ),
}

#: (settings, total timesteps) on IdentityEnvBox(eps=0.5)
CONTINUOUS_SETTINGS = {
    PPO: (dict(n_steps=256, n_epochs=4, seed=0), 1000),
    TRPO: (dict(n_steps=256, seed=0), 1000),
    ExactTRPO: (dict(n_steps=256, seed=0), 1000),
    AdaptiveKLPPO: (dict(n_steps=256, n_epochs=4, seed=0), 1000),
    GRPO: (dict(n_steps=256, n_epochs=4, group_size=4, seed=0, verify_group_starts=False), 1000),
    REINFORCE: (dict(n_steps=100, batch_size=20, n_epochs=10, gamma=0.4, seed=0), 1500),
    OnlineDPO: (
        dict(n_steps=512, group_size=8, n_epochs=10, pairs="all", ref_update_interval=1, verify_group_starts=False),
        30000,
    ),
}

#: OnlineDPO's expected failures (see the module docstring).
DPO_SHORT = pytest.mark.xfail(
    reason="OnlineDPO: one preference per pair of 100-step episodes; below 90 within the test's budget", strict=False
)


@pytest.mark.slow
@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("env_name", list(DISCRETE_ENVS))
def test_discrete(request, model_class, env_name):
    if model_class is OnlineDPO and env_name != "Discrete":
        request.applymarker(DPO_SHORT)
    env = DISCRETE_ENVS[env_name]()
    vec_env = DummyVecEnv([lambda: env])
    kwargs, n_steps = DISCRETE_SETTINGS[model_class]
    model = model_class("MlpPolicy", vec_env, gamma=0.4, **kwargs).learn(n_steps)
    evaluate_policy(model, vec_env, n_eval_episodes=20, reward_threshold=90, warn=False)
    obs, _ = env.reset()
    assert np.shape(model.predict(obs)[0]) == np.shape(obs)


@pytest.mark.slow
@algo_params(ALL_ALGOS)
def test_continuous(request, model_class):
    if model_class is OnlineDPO:
        request.applymarker(DPO_SHORT)
    env = IdentityEnvBox(eps=0.5)
    kwargs, n_steps = CONTINUOUS_SETTINGS[model_class]
    model = model_class("MlpPolicy", env, learning_rate=1e-3, **kwargs).learn(n_steps)
    evaluate_policy(model, env, n_eval_episodes=20, reward_threshold=90, warn=False)


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("env_name", [*DISCRETE_ENVS, "Box"])
def test_identity_smoke(model_class, env_name):
    """The fast variant: one short run on each identity env, evaluate_policy on it and a prediction of the
    observation's shape (the env samples its states from unseeded spaces: GRPO's escape)."""
    env = IdentityEnvBox(eps=0.5) if env_name == "Box" else DISCRETE_ENVS[env_name]()
    env.ep_length = 20  # short episodes: GRPO's groups stay small
    vec_env = DummyVecEnv([lambda: env])
    model = model_class("MlpPolicy", vec_env, gamma=0.4, seed=0, **algo_kwargs(model_class, reproducible_reset=False))
    model.learn(64)
    mean_reward, _ = evaluate_policy(model, vec_env, n_eval_episodes=2, warn=False)
    assert 0 <= mean_reward <= 20
    obs, _ = env.reset()
    assert np.shape(model.predict(obs)[0]) == np.shape(obs)
