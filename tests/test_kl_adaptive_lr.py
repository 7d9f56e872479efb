"""KLAdaptiveLR: the rule step by step against hand-computed rates, and in every algorithm whose learning rate steps
the policy: each update's rate is the rule applied to the KL the previous update measured; saved and resumed."""

import math

import pytest
from envs import TargetEnv
from stable_baselines3.common.vec_env import DummyVecEnv
from tiny_models import CLASSES, make_model

from sb3_grpo import GRPO, ExactTRPO, KLAdaptiveLR, OnlineDPO


def test_the_rule_step_by_step():
    s = KLAdaptiveLR(1e-3, desired_kl=0.01)  # band [0.005, 0.02], factor 1.5, bounds [1e-6, 1e-2]
    steps = [
        (0.03, 1e-3 / 1.5),  # above 2 x desired: shrink
        (0.021, 1e-3 / 1.5 / 1.5),
        (0.02, 1e-3 / 1.5 / 1.5),  # on the band's edge: unchanged
        (0.01, 1e-3 / 1.5 / 1.5),  # inside: unchanged
        (0.005, 1e-3 / 1.5 / 1.5),  # on the lower edge: unchanged
        (0.004, 1e-3 / 1.5),  # below desired / 2: grow
        (0.0, 1e-3 / 1.5),  # exactly 0 (an update that changed nothing): unchanged, as rsl_rl
        (math.nan, 1e-3 / 1.5),  # not finite: unchanged
        (1e-4, 1e-3),
    ]
    for kl, expected in steps:
        assert s.update(kl) == pytest.approx(expected, rel=1e-12)
        assert s(0.3) == s.lr  # the progress plays no part


def test_the_rate_stays_within_its_bounds():
    s = KLAdaptiveLR(1e-3, desired_kl=0.01, min_lr=5e-4, max_lr=2e-3, lr_factor=2.0, kl_factor=4.0)
    assert s.update(0.05) == 5e-4  # 1e-3 / 2
    assert s.update(0.05) == 5e-4  # held at min_lr
    assert s.update(0.03) == 5e-4  # inside [0.0025, 0.04]
    assert [s.update(1e-3) for _ in range(3)] == [1e-3, 2e-3, 2e-3]  # held at max_lr


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(initial=-1e-3), "initial must be a finite number > 0"),
        (dict(desired_kl=0.0), "desired_kl must be a finite number > 0"),
        (dict(lr_factor=1.0), "lr_factor must be > 1"),
        (dict(kl_factor=0.5), "kl_factor and lr_factor must be > 1"),
        (dict(initial=1.0), r"initial=1.0 must lie in \[min_lr, max_lr\]"),
    ],
)
def test_bad_settings_are_refused_naming_them(kwargs, match):
    with pytest.raises(ValueError, match=match):
        KLAdaptiveLR(**kwargs)


class Recording(KLAdaptiveLR):
    """Records the KL of every update and the rate it gave."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen = []

    def update(self, kl):
        rate = super().update(kl)
        self.seen.append((kl, rate))
        return rate


#: the algorithms that take the schedule (ExactTRPO refuses it, see below), with minibatch epochs for a KL to adapt to
KL_OPTIONS = {
    "grpo": dict(n_steps=16, n_epochs=2),
    "adaptive_kl_ppo": dict(n_epochs=2),
    "reinforce": dict(n_epochs=2, batch_size=8),
    "online_dpo": dict(n_steps=16, n_epochs=2),
}


@pytest.mark.parametrize("name", list(KL_OPTIONS))
def test_each_update_uses_the_rate_the_previous_update_s_kl_gave(name):
    schedule = Recording(2e-3, desired_kl=0.002, max_lr=5e-2)
    model = make_model(name, learning_rate=schedule, **KL_OPTIONS[name])
    used = []
    step = model.policy.optimizer.step

    def recording_step(*args, **kw):
        rate = model.policy.optimizer.param_groups[0]["lr"]
        if not used or used[-1] != rate:
            used.append(rate)
        return step(*args, **kw)

    model.policy.optimizer.step = recording_step
    model.learn(600)
    assert len(schedule.seen) >= 5
    assert all(kl >= 0 for kl, _ in schedule.seen)
    rates = [2e-3] + [rate for _, rate in schedule.seen]
    changed = [r for i, r in enumerate(rates) if i == 0 or r != rates[i - 1]]
    assert len(changed) > 1  # the rate moved
    # the rates the optimizer stepped with are the schedule's, in order (updates whose KL kept the rate merge)
    assert used == pytest.approx(changed[: len(used)], rel=1e-12)
    assert len(used) >= len(changed) - 1  # the last rate may not have been used yet


@pytest.mark.parametrize("name", list(KL_OPTIONS))
def test_the_rate_reached_is_saved_and_a_resumed_run_goes_on_from_it(tmp_path, name):
    cls = CLASSES[name]
    env = DummyVecEnv([TargetEnv, TargetEnv])
    model = make_model(name, env, learning_rate=KLAdaptiveLR(2e-3, desired_kl=0.002), **KL_OPTIONS[name])
    model.learn(300)
    reached = model.learning_rate.lr
    assert reached != 2e-3
    model.save(tmp_path / "m.zip")
    loaded = cls.load(tmp_path / "m.zip", env=env, device="cpu")
    assert isinstance(loaded.learning_rate, KLAdaptiveLR) and loaded.learning_rate.lr == reached
    assert loaded.lr_schedule(1.0) == reached


def test_exact_trpo_refuses_it_and_says_what_sizes_its_step():
    with pytest.raises(ValueError, match=r"ExactTRPO: learning_rate=KLAdaptiveLR\(.*target_kl, the trust region"):
        ExactTRPO("MlpPolicy", DummyVecEnv([TargetEnv]), learning_rate=KLAdaptiveLR(), device="cpu")


def test_a_zoo_yaml_string_gives_the_schedule():
    pytest.importorskip("rl_zoo3")
    from rl_zoo3.exp_manager import ExperimentManager

    from sb3_grpo.zoo.registry import register

    register()
    hyperparams = ExperimentManager._preprocess_schedules({"learning_rate": "KLAdaptiveLR(1e-3, desired_kl=0.02)"})
    assert hyperparams["learning_rate"] == KLAdaptiveLR(1e-3, desired_kl=0.02)
    with pytest.raises(ValueError, match=r"cannot read 'KLAdaptiveLR\(1e-3, target=0.02\)' as a KLAdaptiveLR"):
        ExperimentManager._preprocess_schedules({"learning_rate": "KLAdaptiveLR(1e-3, target=0.02)"})


@pytest.mark.parametrize("cls", [GRPO, OnlineDPO])
def test_one_gradient_step_per_update_is_refused_for_the_group_algorithms(cls):
    with pytest.raises(ValueError, match=r"0 by construction with one step per update .* set n_epochs > 1 or a batch_size"):
        cls("MlpPolicy", "CartPole-v1", learning_rate=KLAdaptiveLR(), n_epochs=1, batch_size=None, device="cpu")
    cls("MlpPolicy", "CartPole-v1", learning_rate=KLAdaptiveLR(), n_epochs=1, batch_size=64, device="cpu")
