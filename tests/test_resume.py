"""Save and resume. For the algorithms whose envs run on across rollouts (ExactTRPO, AdaptiveKLPPO, REINFORCE):
every piece of algorithm state (optimizer moments, schedule progress and learning rate, beta, the Fisher subsample
RNG, REINFORCE's moving-average baseline, VecNormalize statistics) is restored, and a resumed run continues bit for
bit where the interrupted one stopped.

SB3 saves neither the env's state nor the global RNGs (numpy and torch, which sample the actions and shuffle the
minibatches); ``load(..., env=...)`` resets the env. So "the same state" can only be tested by handing the loaded
model what the model file cannot hold: a copy of the env as it was at the save (``force_reset=False``) and the global
RNG states of that moment. Everything else must come from the file, and any piece left out breaks the bitwise match.
GRPO and OnlineDPO, whose rollouts start fresh groups every time and draw their actions from the model's own
generator, resume exactly without that help (the last test here; GRPO's checkpoints in ``test_grpo_save_resume.py``).
"""

import copy
import random

import numpy as np
import pytest
import torch as th
from envs import TargetEnv
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, CheckpointCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize
from tiny_models import CLASSES, GROUP_ALGORITHMS, make_model

from sb3_grpo import REINFORCE, AdaptiveKLPPO, ExactTRPO

# TargetEnv episodes last 5 steps and a rollout is 20 steps per env: every rollout ends on an episode boundary
# in every env, so VecNormalize's running returns (not saved by SB3) are zero at the save.
N_ENVS, N_STEPS = 2, 20
ROLLOUT = N_ENVS * N_STEPS
#: the algorithms whose envs run on across rollouts, with options that give them state to restore (beta adapts, the
#: Fisher subsample draws); GRPO and OnlineDPO start fresh groups every rollout: see the last test
RESUME_OPTIONS = {
    "exact_trpo": dict(batch_size=20, n_critic_updates=3, target_kl=0.05, fisher_subsample=15),
    "adaptive_kl_ppo": dict(batch_size=20, n_epochs=2, target_kl=0.002),
    "reinforce": dict(batch_size=10, n_epochs=2),
}
LR0 = 3e-3


def linear_lr(progress_remaining):
    return LR0 * progress_remaining


def _env():
    return make_vec_env(TargetEnv, n_envs=N_ENVS, seed=0, env_kwargs=dict(kind="box"))


def _model(name, env):
    return make_model(name, env, n_steps=N_STEPS, learning_rate=linear_lr, **RESUME_OPTIONS.get(name, {}))


def _rng_state():
    return random.getstate(), np.random.get_state(), th.get_rng_state()


def _set_rng_state(state):
    random.setstate(state[0])
    np.random.set_state(state[1])
    th.set_rng_state(state[2])


def _params(model):
    return {k: v.detach().clone() for k, v in model.policy.state_dict().items()}


def _optimizer_moments(model):
    """Adam's per-parameter ``exp_avg``, ``exp_avg_sq`` and ``step``, in parameter order."""
    optimizer = model.policy.optimizer
    out = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state.get(p, {})
            out.append({k: v.detach().clone() if th.is_tensor(v) else v for k, v in state.items()})
    return out


def _stats(venv):
    """VecNormalize's running statistics."""
    return {
        "obs_mean": venv.obs_rms.mean.copy(),
        "obs_var": venv.obs_rms.var.copy(),
        "obs_count": venv.obs_rms.count,
        "ret_mean": venv.ret_rms.mean.copy(),
        "ret_var": venv.ret_rms.var.copy(),
        "ret_count": venv.ret_rms.count,
    }


def _state(model):
    """Every piece of algorithm state a resumed run depends on."""
    state = {
        "params": _params(model),
        "moments": _optimizer_moments(model),
        "lr": [g["lr"] for g in model.policy.optimizer.param_groups],
        "progress": model._current_progress_remaining,
        "num_timesteps": model.num_timesteps,
        "n_updates": model._n_updates,
    }
    if isinstance(model, AdaptiveKLPPO):
        state["kl_coef"] = model.kl_coef
    elif isinstance(model, REINFORCE):
        state["baseline_value"] = model.baseline_value  # the moving-average baseline
    elif isinstance(model, ExactTRPO):
        state["fisher_rng"] = copy.deepcopy(model._fisher_rng.bit_generator.state)
    if model._vec_normalize_env is not None:
        state["stats"] = _stats(model._vec_normalize_env)
    return state


def _assert_same_state(got, expected):
    assert got.keys() == expected.keys()
    for key in got["params"]:
        assert th.equal(got["params"][key], expected["params"][key]), key
    assert len(got["moments"]) == len(expected["moments"])
    assert any(m for m in expected["moments"]), "the optimizer has no moments yet: the test would prove nothing"
    for a, b in zip(got["moments"], expected["moments"], strict=True):
        assert a.keys() == b.keys()
        for name in a:  # exp_avg, exp_avg_sq, step
            assert th.equal(th.as_tensor(a[name]), th.as_tensor(b[name])), name
    for key in got.keys() - {"params", "moments", "stats"}:
        assert got[key] == expected[key], key
    if "stats" in expected:
        for key, value in expected["stats"].items():
            np.testing.assert_array_equal(got["stats"][key], value, err_msg=key)


class RecordLearningRates(BaseCallback):
    """The learning rate each update of this ``learn`` call used (read at the start of the next rollout), with the
    timestep of that update."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def _on_rollout_start(self):
        if self.n_calls > 0:  # not at the first rollout of this learn call
            self.seen.append((self.model.num_timesteps, self.model.policy.optimizer.param_groups[0]["lr"]))

    def _on_step(self):
        return True


@pytest.mark.parametrize("vec_normalize", [False, True], ids=["plain", "vecnormalize"])
@pytest.mark.parametrize("name", list(RESUME_OPTIONS))
def test_resumed_run_restores_every_piece_and_continues_bit_for_bit(name, vec_normalize, tmp_path):
    first, then = 3 * ROLLOUT, 3 * ROLLOUT
    env = _env()
    if vec_normalize:
        env = VecNormalize(env, gamma=0.9)
    model = _model(name, env)
    model.learn(first)
    if isinstance(model, AdaptiveKLPPO):
        assert model.kl_coef != 1.0  # beta has adapted, so restoring it is tested
    model.save(tmp_path / "model.zip")
    if vec_normalize:
        env.save(tmp_path / "vecnormalize.pkl")  # SB3's convention: the statistics are saved with the env
    at_save = _state(model)
    # What the model file does not hold: the env as it is now, the global RNGs.
    env_copy = copy.deepcopy(env.venv if vec_normalize else env)
    rngs = _rng_state()

    straight_lrs = RecordLearningRates()
    model.learn(then, reset_num_timesteps=False, callback=straight_lrs)

    new_env = VecNormalize.load(str(tmp_path / "vecnormalize.pkl"), env_copy) if vec_normalize else env_copy
    cls = CLASSES[name]
    loaded = cls.load(tmp_path / "model.zip", env=new_env, device="cpu", force_reset=False)
    _assert_same_state(_state(loaded), at_save)
    if vec_normalize:
        assert loaded._vec_normalize_env is new_env and new_env.training

    _set_rng_state(rngs)
    resumed_lrs = RecordLearningRates()
    loaded.learn(then, reset_num_timesteps=False, callback=resumed_lrs)
    _assert_same_state(_state(loaded), _state(model))

    # the schedule continued: the updates after the resume used lr(1 - t / total) at the straight run's t
    total = first + then
    expected = [(t, LR0 * (1 - t / total)) for t in range(first + ROLLOUT, total, ROLLOUT)]
    assert resumed_lrs.seen == straight_lrs.seen
    np.testing.assert_allclose([lr for _, lr in resumed_lrs.seen], [lr for _, lr in expected], rtol=1e-12)
    assert [t for t, _ in resumed_lrs.seen] == [t for t, _ in expected]
    assert loaded.num_timesteps == total
    if vec_normalize:  # the statistics went on from the saved ones: one observation per env step
        assert new_env.obs_rms.count == at_save["stats"]["obs_count"] + then


@pytest.mark.parametrize("name", list(RESUME_OPTIONS))
def test_resume_without_the_rng_state_differs(name, tmp_path):
    """The bitwise test above can fail: with the env copy but fresh global RNGs, the runs part ways."""
    model = _model(name, _env())
    model.learn(2 * ROLLOUT)
    model.save(tmp_path / "model.zip")
    env_copy = copy.deepcopy(model.get_env())
    loaded = CLASSES[name].load(tmp_path / "model.zip", env=env_copy, device="cpu", force_reset=False)
    # two rollouts: the last update of a learn call has learning rate 0 under the linear schedule
    model.learn(2 * ROLLOUT, reset_num_timesteps=False)
    loaded.learn(2 * ROLLOUT, reset_num_timesteps=False)  # load reseeded the global RNGs with the model's seed
    assert not all(th.equal(a, b) for a, b in zip(_params(model).values(), _params(loaded).values(), strict=True))


class Snapshot(BaseCallback):
    """The model's state at the calls where a CheckpointCallback with the same ``save_freq`` saves."""

    def __init__(self, save_freq):
        super().__init__()
        self.save_freq = save_freq
        self.states = {}

    def _on_step(self):
        if self.n_calls % self.save_freq == 0:
            self.states[self.num_timesteps] = _state(self.model)
        return True


@pytest.mark.parametrize("name", list(RESUME_OPTIONS))
def test_checkpoint_taken_mid_rollout_restores_every_piece(name, tmp_path):
    """A ``CheckpointCallback`` checkpoint (model and VecNormalize statistics) taken in the middle of a rollout holds
    the state the run had at that step, and a run resumed from it continues the counters and statistics.

    It cannot match the uninterrupted run: the half-collected rollout is not saved (SB3 saves no rollout buffer),
    and the resumed run starts a fresh rollout from a reset env; its updates then fall at other timesteps.
    """
    save_freq = N_STEPS + N_STEPS // 2  # calls (vec steps): half-way through the second rollout
    env = VecNormalize(_env(), gamma=0.9)
    model = _model(name, env)
    snapshot = Snapshot(save_freq)
    checkpoint = CheckpointCallback(save_freq, str(tmp_path), name_prefix="ck", save_vecnormalize=True)
    total = 4 * ROLLOUT
    model.learn(total, callback=CallbackList([checkpoint, snapshot]))
    steps = save_freq * N_ENVS
    assert steps in snapshot.states and steps % ROLLOUT != 0
    expected = snapshot.states[steps]

    new_env = VecNormalize.load(str(tmp_path / f"ck_vecnormalize_{steps}_steps.pkl"), _env())
    loaded = CLASSES[name].load(tmp_path / f"ck_{steps}_steps.zip", env=new_env, device="cpu")
    _assert_same_state(_state(loaded), expected)
    assert steps // ROLLOUT == 1 and loaded._n_updates > 0  # one update before the checkpoint, whose moments were restored

    loaded.learn(total - loaded.num_timesteps, reset_num_timesteps=False)
    assert loaded.num_timesteps >= total and loaded._n_updates > expected["n_updates"]
    # one observation per env step, and N_ENVS for the reset of the new env
    assert new_env.obs_rms.count == expected["stats"]["obs_count"] + N_ENVS + (loaded.num_timesteps - steps)


@pytest.mark.parametrize("name", GROUP_ALGORITHMS)
def test_a_group_algorithm_resumed_from_a_save_continues_bit_for_bit(name, tmp_path):
    """No env copy and no global RNG state handed over: a group algorithm reseeds each group's start and its own
    generator, so a run saved, loaded with a new env and continued matches the run that went on without a save."""
    options = dict(beta=0.05) if name == "grpo" else dict(ref_update_interval=2)  # a reference policy to restore

    def make():
        return make_model(name, _env(), n_steps=N_STEPS, learning_rate=linear_lr, **options)

    straight = make()
    straight.learn(3 * ROLLOUT)
    straight.learn(3 * ROLLOUT, reset_num_timesteps=False)
    first = make()
    first.learn(3 * ROLLOUT)
    first.save(tmp_path / "model.zip")
    loaded = CLASSES[name].load(tmp_path / "model.zip", env=_env(), device="cpu")
    _assert_same_state(_state(loaded), _state(first))
    assert loaded._group_counter == first._group_counter
    loaded.learn(3 * ROLLOUT, reset_num_timesteps=False)
    _assert_same_state(_state(loaded), _state(straight))
