"""profile_phases sorts a sample into the phase its stack says."""

from benchmarks.profile_phases import PHASES, _frames


def phase(*frames: tuple[str, str]) -> str:
    return next(name for name, test in PHASES if test(list(frames)))


LEARN = ("learn", "stable_baselines3/common/on_policy_algorithm.py")
ROLLOUT = ("collect_rollouts", "stable_baselines3/common/on_policy_algorithm.py")
TRAIN = ("train", "sb3_grpo/adaptive_kl_ppo/adaptive_kl_ppo.py")


def test_rollout_samples_by_what_runs():
    assert phase(LEARN, ROLLOUT, ("step", "x/base_vec_env.py"), ("step_wait", "x/dummy_vec_env.py")).startswith(
        "rollout: env step"
    )
    assert phase(LEARN, ROLLOUT, ("forward", "sb3_grpo/common/policies.py")).startswith("rollout: policy inference")
    assert phase(LEARN, ROLLOUT, ("add", "stable_baselines3/common/buffers.py")) == "rollout: buffer writes"
    assert phase(LEARN, ROLLOUT, ("obs_as_tensor", "stable_baselines3/common/utils.py")).startswith("rollout: other")


def test_update_samples_by_what_runs():
    assert phase(LEARN, TRAIN, ("_gradient_step", "b.py"), ("backward", "torch/_tensor.py")) == "update: backward"
    assert phase(LEARN, TRAIN, ("step", "torch/optim/optimizer.py")).startswith("update: optimizer step")
    assert phase(LEARN, TRAIN, ("evaluate_actions", "stable_baselines3/common/policies.py")).startswith("update: forward pass")
    assert phase(LEARN, TRAIN, ("_measure_kl", "a.py"), ("forward", "x/policies.py")).startswith("update: old distributions")
    assert phase(LEARN, TRAIN, ("factorize", "sb3_grpo/exact_trpo/fisher.py")).startswith("update: natural gradient")
    assert phase(LEARN, ("_dump_logs", "x.py")) == "other"


def test_frames_read_pyinstrument_identifiers():
    assert _frames(["train\x00/a/b.py\x0012", "backward"]) == [("train", "/a/b.py"), ("backward", "")]
