"""The beta rules of the KL controllers, step by step against hand-computed sequences."""

import math
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sb3_grpo.adaptive_kl_ppo.kl_controllers import (
    KL_CONTROLLERS,
    FixedKLController,
    ProportionalKLController,
    RLlibKLController,
    SchulmanKLController,
    make_kl_controller,
)

TARGET = 0.01


def _run(controller, kls, **kwargs):
    return [controller.update(d, **kwargs) for d in kls]


def test_schulman_rule_step_by_step():
    # thresholds: target / 1.5 = 0.00667 (halve strictly below), 1.5 * target = 0.015 (double strictly above)
    c = SchulmanKLController(kl_coef=1.0, target_kl=TARGET)
    kls = [0.001, 0.001, 0.02, 0.01, 0.015, 0.0151, 0.0067, 0.0066, 1.0]
    assert _run(c, kls) == [0.5, 0.25, 0.5, 0.5, 0.5, 1.0, 1.0, 0.5, 1.0]
    assert c.kl_coef == 1.0


def test_rllib_rule_step_by_step():
    # thresholds: 2 * target = 0.02 (x1.5 strictly above), target / 2 = 0.005 (x0.5 strictly below)
    c = RLlibKLController(kl_coef=0.2, target_kl=TARGET)
    kls = [0.03, 0.03, 0.02, 0.005, 0.004, 0.012, 0.0]
    expected = [0.3, 0.45, 0.45, 0.45, 0.225, 0.225, 0.1125]
    assert _run(c, kls) == pytest.approx(expected, rel=1e-12)


def test_proportional_rule_step_by_step():
    # e = clip(d / target - 1, -0.2, 0.2); beta *= 1 + e * n_steps / horizon, with n_steps / horizon = 0.5
    c = ProportionalKLController(kl_coef=1.0, target_kl=TARGET, kl_horizon=1000)
    got = _run(c, [0.011, 0.05, 0.0, 0.01, 0.009], n_steps=500)
    expected = []
    beta = 1.0
    for e in [0.1, 0.2, -0.2, 0.0, -0.1]:
        beta *= 1 + e * 0.5
        expected.append(beta)
    assert got == pytest.approx(expected, rel=1e-12)
    assert expected[:3] == pytest.approx([1.05, 1.155, 1.0395], rel=1e-12)  # written out once more by hand


def test_proportional_step_size_scales_with_the_batch():
    small, large = (ProportionalKLController(1.0, TARGET, kl_horizon=10_000) for _ in range(2))
    assert small.update(1.0, n_steps=100) == pytest.approx(1.002)
    assert large.update(1.0, n_steps=2048) == pytest.approx(1 + 0.2 * 0.2048)


def test_fixed_never_moves_and_accepts_zero():
    c = FixedKLController(kl_coef=0.0, target_kl=TARGET)
    assert _run(c, [0.0, 1.0, 100.0]) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("name", ["schulman", "rllib", "proportional"])
def test_bounds_clamp_both_ways(name):
    c = make_kl_controller(name, kl_coef=0.1, target_kl=TARGET, kl_coef_min=0.05, kl_coef_max=0.2, kl_horizon=1)
    for _ in range(5):
        c.update(0.0, n_steps=10)
    assert c.kl_coef == 0.05
    for _ in range(5):
        c.update(10.0, n_steps=10)
    assert c.kl_coef == 0.2


def test_nan_measurement_leaves_beta_unchanged_with_a_warning():
    c = SchulmanKLController(kl_coef=0.3, target_kl=TARGET)
    with pytest.warns(UserWarning, match="NaN"):
        assert c.update(math.nan) == 0.3


@pytest.mark.parametrize("name", sorted(KL_CONTROLLERS))
def test_state_dict_and_pickle_round_trip(name):
    c = make_kl_controller(name, kl_coef=0.5, target_kl=0.02, kl_coef_min=1e-3, kl_coef_max=10.0, kl_horizon=500)
    c.update(1.0, n_steps=100)
    state = c.state_dict()
    assert state["name"] == name and state["kl_coef"] == c.kl_coef
    fresh = make_kl_controller(name, kl_coef=1.0, target_kl=0.02, kl_coef_min=1e-3, kl_coef_max=10.0)
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state
    clone = pickle.loads(pickle.dumps(c))
    assert clone.update(0.0, n_steps=100) == c.update(0.0, n_steps=100)
    assert name in repr(c) or type(c).__name__ in repr(c)


def test_loading_another_rule_state_is_refused():
    with pytest.raises(ValueError, match="rllib"):
        SchulmanKLController(1.0, TARGET).load_state_dict(RLlibKLController(1.0, TARGET).state_dict())


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(kl_coef=-1.0), "kl_coef must be >= 0"),
        (dict(kl_coef=math.nan), "kl_coef must be a number"),
        (dict(target_kl=0.0), "target_kl must be > 0"),
        (dict(target_kl=-0.01), "target_kl must be > 0"),
        (dict(target_kl=None), "target_kl must be a number"),
        (dict(kl_coef_min=2.0, kl_coef_max=1.0), "kl_coef_min .* must not exceed kl_coef_max"),
        (dict(kl_coef_min=-1.0), "kl_coef_min must be >= 0"),
        (dict(kl_coef=0.0), "kl_coef must be > 0 with kl_adaptation='schulman'"),
        (dict(kl_coef=5.0, kl_coef_max=2.0), r"kl_coef \(5.0\) must lie within"),
        (dict(kl_adaptation="pid"), "Unknown kl_adaptation 'pid'"),
        (dict(kl_adaptation="proportional", kl_horizon=0), "kl_horizon must be > 0"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, match):
    args = dict(kl_adaptation="schulman", kl_coef=1.0, target_kl=TARGET)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        make_kl_controller(**args)


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(["schulman", "rllib", "proportional"]),
    kls=st.lists(st.floats(min_value=0.0, max_value=1e3, allow_nan=False), min_size=1, max_size=30),
)
def test_beta_stays_within_bounds_and_moves_toward_the_target(name, kls):
    c = make_kl_controller(name, kl_coef=1.0, target_kl=TARGET, kl_coef_min=1e-3, kl_coef_max=1e3, kl_horizon=100)
    for d in kls:
        before = c.kl_coef
        after = c.update(d, n_steps=50)
        assert 1e-3 <= after <= 1e3
        if d > 2 * TARGET:
            assert after >= before  # too much KL never lowers the penalty
        if d < TARGET / 2:
            assert after <= before
