"""Every algorithm trains, saves, loads and predicts on each available device, and a model saved on one device
loads and trains on the other (CUDA cases are skipped without a CUDA device)."""

import itertools

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from envs import TargetEnv
from gymnasium import spaces
from stable_baselines3.common.env_util import make_vec_env
from tiny_models import ALGORITHMS, CLASSES, make_model

from sb3_grpo import ExactTRPO

CUDA = th.cuda.is_available()
DEVICES = ["cpu", "cuda"]
#: the options that give an algorithm more state to move between devices
DEVICE_OPTIONS = {
    "grpo": dict(beta=0.05),  # a reference policy
    "online_dpo": dict(ref_update_interval=2),  # a reference policy refreshed during training
}
OBS = np.array([[1.0, -0.5, 0.0, 0.0], [0.2, 0.3, 0.0, 0.0]], dtype=np.float32)


def _env():
    return make_vec_env(TargetEnv, n_envs=2, seed=0, env_kwargs=dict(kind="box"))


def _device_params():
    out = []
    for train, load in itertools.product(DEVICES, DEVICES):
        marks = [] if CUDA or "cuda" not in (train, load) else [pytest.mark.skip(reason="no CUDA device")]
        out.append(pytest.param(train, load, marks=marks, id=f"{train}-to-{load}"))
    return out


def _on(model, device):
    return all(p.device.type == device for p in model.policy.parameters())


@pytest.mark.parametrize("train_device, load_device", _device_params())
@pytest.mark.parametrize("name", ALGORITHMS)
def test_train_save_load_predict_across_devices(name, train_device, load_device, tmp_path):
    cls = CLASSES[name]
    model = make_model(name, _env(), device=train_device, **DEVICE_OPTIONS.get(name, {}))
    model.learn(128)
    assert _on(model, train_device)
    if name == "grpo":
        assert all(p.device.type == train_device for p in model.ref_policy.parameters())
    if name == "exact_trpo":
        assert model.logger.name_to_value["train/fisher_solver"].startswith("exact-")
    action, _ = model.predict(OBS, deterministic=True)
    assert action.shape == (2, 2) and np.all(np.isfinite(action))
    model.save(tmp_path / "model.zip")

    loaded = cls.load(tmp_path / "model.zip", env=_env(), device=load_device)
    assert _on(loaded, load_device)
    for a, b in zip(model.policy.parameters(), loaded.policy.parameters(), strict=True):
        th.testing.assert_close(a.detach().cpu(), b.detach().cpu(), rtol=0, atol=0)
    np.testing.assert_allclose(loaded.predict(OBS, deterministic=True)[0], action, rtol=1e-5, atol=1e-6)
    if name == "adaptive_kl_ppo":
        assert loaded.kl_coef == model.kl_coef
    loaded.learn(64, reset_num_timesteps=False)  # the optimizer state moved along with the parameters
    assert _on(loaded, load_device) and loaded.num_timesteps >= model.num_timesteps + 64
    for state in loaded.policy.optimizer.state.values():
        for value in state.values():
            if th.is_tensor(value) and value.dim() > 0:
                assert value.device.type == load_device
    loaded.save(tmp_path / "again.zip")


class _IdsAsBox(gym.ObservationWrapper):
    """The arithmetic env's token ids as a float Box (no one-hot encoding by SB3 before the extractor)."""

    def __init__(self, env):
        super().__init__(env)
        self.observation_space = spaces.Box(0, 14, env.observation_space.shape, dtype=np.float32)

    def observation(self, observation):
        return observation.astype(np.float32)


@pytest.mark.skipif(not CUDA, reason="no CUDA device")
@pytest.mark.parametrize("ids", ["multidiscrete", "box"])
@pytest.mark.parametrize("sequence_model", ["gru", "transformer"])
def test_exact_fisher_through_token_extractor_on_cuda(sequence_model, ids):
    """ExactTRPO's exact Fisher through a GRU or attention TokenSequenceExtractor on cuda: its per-sample Jacobians
    (vmap) run without cuDNN, whose RNN kernels cannot be batched (#45); the Fisher matches the cpu one and the
    caller's cuDNN setting is back afterwards."""
    import sb3_grpo.envs  # noqa: F401  (registers the ids)
    from sb3_grpo.common.torch_layers import TokenSequenceExtractor
    from sb3_grpo.exact_trpo.fisher import ExactFisher

    env = make_vec_env(
        "sb3_grpo/Arithmetic-v0", n_envs=4, seed=0, env_kwargs={"reward_mode": "shaped"},
        wrapper_class=_IdsAsBox if ids == "box" else None,
    )  # fmt: skip
    policy_kwargs = dict(
        features_extractor_class=TokenSequenceExtractor,
        features_extractor_kwargs=dict(sequence_model=sequence_model, embed_dim=8, hidden_dim=16),
        net_arch=[16],
    )
    model = ExactTRPO(
        "MlpPolicy", env, n_steps=32, batch_size=64, fisher_solver="exact", policy_kwargs=policy_kwargs, seed=0,
        device="cuda",
    )  # fmt: skip
    cudnn = th.backends.cudnn.enabled
    model.learn(300)
    assert model.num_timesteps >= 300 and _on(model, "cuda")
    assert model.logger.name_to_value["train/fisher_solver"].startswith("exact-")
    assert th.backends.cudnn.enabled == cudnn

    obs = th.as_tensor(np.stack([env.reset() for _ in range(3)]).reshape(12, -1), device="cuda")
    fisher = ExactFisher(model.policy, obs)
    assert not fisher.structured  # the per-sample (torch.func) path
    on_cuda = fisher.matrix()
    model.policy.to("cpu")
    on_cpu = ExactFisher(model.policy, obs.cpu()).matrix()
    assert th.isfinite(on_cuda).all()
    th.testing.assert_close(on_cuda.cpu(), on_cpu, rtol=1e-4, atol=1e-5)  # float32 on two devices (TF32 is off)
