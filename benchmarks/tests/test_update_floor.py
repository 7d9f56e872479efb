"""benchmarks.update_floor: the bounds of the env-stepping share from a timed training run."""

from benchmarks import update_floor


def test_update_floor_bounds_the_env_stepping_share():
    """benchmarks.update_floor: the network alone costs less than the whole gradient step, so its bound is higher,
    and both are shares."""
    r = update_floor.measure("CartPole-v1", "grpo", steps=1000, repeats=3)
    assert 0 < r["network_fwd_bwd_us"] < r["gradient_step_us"]
    assert 0 < r["share_bound_today"] < r["share_bound_network_only"] < 1
    assert r["activation"] == "Tanh" and r["env_step_us"] > 0 and 0 < r["env_step_share"] < 1
