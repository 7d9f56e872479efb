"""SB3 conformance: the same seed gives the same run (SB3 ``tests/test_deterministic.py``)."""

import numpy as np
import pytest
from sb3_conformance import ALL_ALGOS, algo_kwargs, algo_params
from stable_baselines3.common.env_util import make_vec_env

N_STEPS_TRAINING = 256
SEED = 0


def _run(model_class, env, kwargs):
    model = model_class("MlpPolicy", env, seed=SEED, policy_kwargs=dict(net_arch=[64]), **kwargs)
    model.learn(N_STEPS_TRAINING)
    env = model.get_env()
    obs = env.reset()
    actions, rewards = [], []
    for _ in range(100):
        action, _ = model.predict(obs, deterministic=False)
        obs, reward, _, _ = env.step(action)
        actions.append(action)
        rewards.append(reward)
    params = {k: v.detach().cpu().numpy() for k, v in model.policy.state_dict().items()}
    return np.array(actions), np.array(rewards), params


@algo_params(ALL_ALGOS)
@pytest.mark.parametrize("env_id", ["Pendulum-v1", "CartPole-v1"])
def test_deterministic_training_common(model_class, env_id):
    """Two runs with ``seed=0``: the same parameters, then the same stochastic actions and rewards."""
    kwargs = algo_kwargs(model_class, n_epochs=4) if "n_epochs" in algo_kwargs(model_class) else algo_kwargs(model_class)
    results = [_run(model_class, env_id, kwargs) for _ in range(2)]
    (actions_0, rewards_0, params_0), (actions_1, rewards_1, params_1) = results
    for key in params_0:
        np.testing.assert_array_equal(params_0[key], params_1[key], err_msg=key)
    np.testing.assert_array_equal(actions_0, actions_1)
    np.testing.assert_array_equal(rewards_0, rewards_1)


@algo_params(ALL_ALGOS)
def test_deterministic_multi_env(model_class):
    """The same with two envs (``make_vec_env(seed=...)``)."""
    kwargs = algo_kwargs(model_class, n_steps=32, batch_size=32)
    results = [_run(model_class, make_vec_env("CartPole-v1", n_envs=2, seed=SEED), kwargs) for _ in range(2)]
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
