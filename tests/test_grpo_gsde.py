"""GRPO with gSDE (one noise matrix per trajectory, save and resume) and the log_std bound."""

import numpy as np
import pytest
import torch as th
from grpo_helpers import params, straight_and_reloaded
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from sb3_grpo import GRPO

# -------------------------------------------------------------------------
# gSDE
# -------------------------------------------------------------------------


def _sde_noise_residuals(sde_sample_freq):
    """Collect one rollout on Pendulum with gSDE and fit one noise matrix per trajectory: the relative residual of
    ``action - mean = latent @ W`` per trajectory (zero iff a single W drove the whole trajectory)."""
    model = GRPO(
        "MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2), n_steps=200, group_size=2, use_sde=True,
        sde_sample_freq=sde_sample_freq, policy_kwargs=dict(net_arch=[8]), seed=3, device="cpu",
    )  # fmt: skip
    model._setup_learn(400, None)
    model.collect_rollouts(model.env, model._init_callback(None), model.rollout_buffer, model.n_steps)
    buffer, policy = model.rollout_buffer, model.policy
    assert len(np.unique(buffer.trajectory)) >= 2
    residuals, matrices = [], []
    with th.no_grad():
        obs = th.as_tensor(buffer.observations)
        latent = policy.policy_net(policy.extract_features(obs, policy.features_extractor))
        noise = th.as_tensor(buffer.actions) - policy.action_net(latent)
    for trajectory in np.unique(buffer.trajectory):
        rows = buffer.trajectory == trajectory
        x, y = latent[rows].double(), noise[rows].double()
        w = th.linalg.lstsq(x, y).solution
        residuals.append(float((x @ w - y).norm() / y.norm()))
        matrices.append(w)
    return residuals, matrices


def test_gsde_one_noise_matrix_per_trajectory_by_default():
    residuals, matrices = _sde_noise_residuals(-1)
    assert max(residuals) < 1e-4, residuals  # every trajectory was driven by one noise matrix
    assert not th.allclose(matrices[0], matrices[1])  # members of a group explore differently
    residuals, _ = _sde_noise_residuals(4)  # new matrices every 4 steps: no single matrix explains a trajectory
    assert min(residuals) > 1e-2, residuals


def test_gsde_learns_saves_and_loads(tmp_path):
    env = make_vec_env("Pendulum-v1", n_envs=2)
    model = GRPO("MlpPolicy", env, n_steps=200, group_size=2, use_sde=True, advantage_estimator="group_step_baseline",
                 seed=0, device="cpu")  # fmt: skip
    before = params(model).clone()
    model.learn(800)
    assert not th.equal(before, params(model))
    assert model.logger.name_to_value["train/std"] > 0
    model.save(tmp_path / "sde.zip")
    loaded = GRPO.load(tmp_path / "sde.zip", env=env, device="cpu")
    assert loaded.use_sde and loaded.policy.use_sde
    obs = env.reset()
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])
    loaded.learn(400, reset_num_timesteps=False)


def test_gsde_needs_box_actions():
    with pytest.raises(ValueError, match="continuous actions"):
        GRPO("MlpPolicy", "CartPole-v1", use_sde=True, device="cpu")


@pytest.mark.parametrize("branch_every", [None, 50])
def test_gsde_save_load_continue_is_exact(tmp_path, branch_every):
    def make():
        return GRPO(
            "MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2), n_steps=100, group_size=2, use_sde=True, sde_sample_freq=4,
            branch_every=branch_every, advantage_estimator="group_step_baseline", policy_kwargs=dict(net_arch=[16]),
            seed=4, device="cpu",
        )  # fmt: skip

    straight, _, loaded = straight_and_reloaded(make, "Pendulum-v1", 800, tmp_path)
    loaded.learn(800, reset_num_timesteps=False)
    th.testing.assert_close(params(loaded), params(straight), rtol=0, atol=0)


class _RolloutStartLogStd(BaseCallback):
    """Records (remaining progress, largest log_std) at the start of every rollout, before its first action."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[float, float]] = []

    def _on_rollout_start(self) -> None:
        self.seen.append((self.model._current_progress_remaining, float(self.model.policy.log_std.detach().max())))

    def _on_step(self) -> bool:
        return True


@pytest.mark.parametrize(
    "bound, expected",
    [
        ((-0.5, -2.0), lambda p: -0.5 + (1 - p) * (-2.0 + 0.5)),  # a pair: linear from start to end over training
        ([-0.5, -2.0], lambda p: -0.5 + (1 - p) * (-2.0 + 0.5)),  # as a YAML zoo entry gives it
        (-1.0, lambda p: -1.0),
        (lambda p: -3.0 + 2.0 * p, lambda p: -3.0 + 2.0 * p),  # a schedule of the remaining progress
    ],
)
def test_log_std_max_bounds_the_noise_of_every_rollout(bound, expected):
    # log_std starts at 0 and an entropy bonus pushes it up during updates: the bound binds at every rollout start.
    model = GRPO(
        "MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2, seed=0), n_steps=200, group_size=2, n_epochs=1, ent_coef=0.1,
        policy_kwargs=dict(log_std_init=0.0, net_arch=[16]), log_std_max=bound, seed=0, device="cpu",
    )  # fmt: skip
    spy = _RolloutStartLogStd()
    model.learn(2400, callback=spy)
    assert len(spy.seen) == 3  # rollouts of 800 steps (two groups of two 200-step episodes)
    progresses = [p for p, _ in spy.seen]
    assert progresses[0] == 1.0 and progresses[-1] < 0.4
    for progress, largest in spy.seen:
        assert largest == pytest.approx(expected(progress), abs=1e-6)
    assert model.logger.name_to_value["train/log_std_max"] == pytest.approx(expected(progresses[-1]))
    assert float(model.policy.log_std.detach().max()) > expected(progresses[-1])  # the update itself is not bounded


def test_log_std_max_is_saved_and_a_reloaded_run_goes_on_exactly(tmp_path):
    def make():
        return GRPO(
            "MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2), n_steps=100, group_size=2, ent_coef=0.05,
            log_std_max=[-0.2, -1.5], policy_kwargs=dict(net_arch=[16]), seed=4, device="cpu",
        )  # fmt: skip

    straight, _, loaded = straight_and_reloaded(make, "Pendulum-v1", 600, tmp_path)
    assert loaded.log_std_max(0.5) == pytest.approx(-0.85)
    loaded.learn(600, reset_num_timesteps=False)
    th.testing.assert_close(params(loaded), params(straight), rtol=0, atol=0)


@pytest.mark.parametrize(
    "env_id, bound, match",
    [
        ("CartPole-v1", -1.0, r"needs a Box action space; this env's action space is Discrete\(2\)"),
        ("Pendulum-v1", (-1.0, -2.0, -3.0), r"a pair \(start, end\)"),
        ("Pendulum-v1", "-1", r"a pair \(start, end\)"),
        ("Pendulum-v1", float("nan"), "must be finite"),
        ("Pendulum-v1", (-1.0, float("inf")), "must be finite"),
    ],
)
def test_bad_log_std_max_is_refused_with_the_fix(env_id, bound, match):
    with pytest.raises(ValueError, match=match):
        GRPO("MlpPolicy", env_id, log_std_max=bound, device="cpu")
