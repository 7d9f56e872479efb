"""GRPO's policy losses as plugins: the registry verbs, invalid losses refused at registration, a third-party loss
through ``register_plugin``, a plugin loss missing at load, and the default loss bitwise equal to the loss before the
losses became plugins. The losses' oracles and GRPO's loss options: ``tests/test_policy_losses.py``."""

from __future__ import annotations

import importlib.metadata
import sys
import warnings

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from tiny_models import make_model, tiny_env

import sb3_grpo
from sb3_grpo import GRPO, PluginError, PolicyLoss, PolicyLossOutputs, UnknownNameError, hookimpl
from sb3_grpo.common.kl import kl_estimate
from sb3_grpo.default_plugins.policy_losses import BUILTIN_POLICY_LOSSES
from sb3_grpo.grpo.loss import ratio_statistics

# -------------------------------------------------------------------------
# The registry
# -------------------------------------------------------------------------


class Capped(PolicyLoss):
    """``-min(r, cap) A``."""

    def __init__(self, cap: float = 2.0):
        self.cap = cap

    def compute(self, inputs):
        ratio = th.exp(inputs.log_prob - inputs.old_log_prob)
        return PolicyLossOutputs(per_step=-th.clamp(ratio, max=self.cap) * inputs.advantages, ratio=ratio)


class CappedPlugin:
    @hookimpl
    def register_policy_losses(self, register):
        register("capped", Capped)


def test_registry_verbs(fresh_plugins):
    assert "capped" not in sb3_grpo.available_policy_losses()
    sb3_grpo.register_policy_loss("capped", Capped)
    assert "capped" in sb3_grpo.available_policy_losses()
    assert fresh_plugins.registered_policy_losses()["capped"] is Capped
    assert fresh_plugins.registered_policy_losses()["clip"] is BUILTIN_POLICY_LOSSES["clip"]
    loss = sb3_grpo.get_policy_loss("capped", cap=1.5)
    assert isinstance(loss, Capped) and loss.cap == 1.5 and loss._registered_name == "capped"
    assert sb3_grpo.get_policy_loss(loss) is loss  # an instance is used as is
    assert isinstance(sb3_grpo.get_policy_loss(Capped, cap=3.0), Capped)  # a class, with options
    with pytest.raises(TypeError, match="cannot be applied to the policy loss instance"):
        sb3_grpo.get_policy_loss(loss, cap=2.0)
    with pytest.raises(PluginError, match=r"already registered in-process; pass replace=True"):
        sb3_grpo.register_policy_loss("capped", Capped)
    with pytest.raises(PluginError, match=r"The policy loss name 'clip' is already provided by plugin "
                       r"'sb3_grpo.default_plugins.policy_losses'"):  # fmt: skip
        sb3_grpo.register_policy_loss("clip", Capped)
    sb3_grpo.register_policy_loss("clip", Capped, replace=True)  # shadows the built-in in this process
    assert isinstance(sb3_grpo.get_policy_loss("clip"), Capped)
    sb3_grpo.unregister_policy_loss("clip")
    sb3_grpo.unregister_policy_loss("capped")
    assert type(sb3_grpo.get_policy_loss("clip")).__name__ == "ClippedSurrogate"
    with pytest.raises(UnknownNameError, match=r"Unknown policy loss 'capped'\. Available: "):
        sb3_grpo.get_policy_loss("capped")
    with pytest.raises(KeyError, match="No policy loss named 'capped' was registered in-process"):
        sb3_grpo.unregister_policy_loss("capped")
    listed = {p["name"]: p["hooks"] for p in sb3_grpo.list_plugins()}
    assert listed["sb3_grpo.default_plugins.policy_losses"] == {"register_policy_losses": list(BUILTIN_POLICY_LOSSES)}


class NoCompute:
    by_trajectory = False


class TwoArguments(PolicyLoss):
    def compute(self, inputs, extra):
        raise AssertionError


class NotBool(PolicyLoss):
    by_trajectory = "yes"

    def compute(self, inputs):
        raise AssertionError


class Abstract(PolicyLoss):
    pass


@pytest.mark.parametrize(
    "obj, match",
    [
        (NoCompute, r"NoCompute has no compute\(inputs\) method"),
        (TwoArguments, r"compute must take exactly one argument \(the PolicyLossInputs\)"),
        (NotBool, r"NotBool.by_trajectory must be True .* or False, got 'yes'"),
        (Abstract, r"Abstract is abstract"),
        (42, r"expected a PolicyLoss subclass or instance, got 42"),
        (lambda inputs: None, r"<lambda>\(inputs\) is a function with required arguments, not a policy loss"),
    ],
)
def test_an_invalid_loss_is_refused_at_registration(fresh_plugins, obj, match):
    with pytest.raises(PluginError, match=r"An in-process registration registered an invalid policy loss 'bad': " + match):
        sb3_grpo.register_policy_loss("bad", obj)

    class BadPlugin:
        @hookimpl
        def register_policy_losses(self, register):
            register("bad", obj)

    with pytest.raises(PluginError, match=r"Cannot register plugin 'bad-plugin': Plugin 'bad-plugin' registered an invalid "
                       r"policy loss 'bad': " + match):  # fmt: skip
        sb3_grpo.register_plugin(BadPlugin(), name="bad-plugin")
    assert "bad" not in sb3_grpo.available_policy_losses()


def test_a_factory_is_a_loss(fresh_plugins):
    def make(cap: float = 2.0):
        return Capped(cap)

    sb3_grpo.register_policy_loss("made", make)
    assert sb3_grpo.get_policy_loss("made", cap=1.2).cap == 1.2


def test_two_plugins_claiming_one_loss_name(fresh_plugins):
    sb3_grpo.register_plugin(CappedPlugin(), name="first")
    with pytest.warns(sb3_grpo.PluginWarning, match=r"Two plugins claim the policy loss name 'capped'"):
        sb3_grpo.register_plugin(CappedPlugin(), name="second")
    with pytest.raises(PluginError, match=r"Two plugins claim the policy loss name 'capped': 'first' .* and 'second'"):
        sb3_grpo.get_policy_loss("capped")
    assert "clip" in sb3_grpo.available_policy_losses()  # every other name works


def test_a_third_party_loss_trains_grpo_through_register_plugin(fresh_plugins, tmp_path):
    """A loss that a plugin registers is used by name, its options come from policy_loss_kwargs, its statistics are
    logged, and the model saves and loads with it."""

    class TruncatedPG(PolicyLoss):
        def __init__(self, cap: float = 2.0):
            self.cap = cap

        def compute(self, inputs):
            ratio = th.exp(inputs.log_prob - inputs.old_log_prob)
            capped = float((ratio > self.cap).float().mean())
            per_step = -th.clamp(ratio, max=self.cap) * inputs.advantages
            return PolicyLossOutputs(per_step=per_step, ratio=ratio, stats={"truncated_fraction": capped})

    class Plugin:
        @hookimpl
        def register_policy_losses(self, register):
            register("truncated_pg", TruncatedPG)

    sb3_grpo.register_plugin(Plugin(), name="truncated")
    model = make_model("grpo", policy_loss="truncated_pg", policy_loss_kwargs=dict(cap=1.1))
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(64)
    assert isinstance(model._policy_loss, TruncatedPG) and model._policy_loss.cap == 1.1
    assert "train/truncated_fraction" in model.logger.name_to_value
    assert any(not th.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True))
    model.save(tmp_path / "model.zip")
    assert GRPO.load(tmp_path / "model.zip", env=tiny_env(), device="cpu")._policy_loss.cap == 1.1


def test_a_statistic_named_like_grpos_own_key_is_refused(fresh_plugins):
    class Clobbering(Capped):
        def compute(self, inputs):
            outputs = super().compute(inputs)
            outputs.stats["clip_fraction"] = 0.0
            return outputs

    sb3_grpo.register_policy_loss("clobbering", Clobbering)
    with pytest.raises(ValueError, match=r"policy loss 'clobbering' returned a statistic named 'clip_fraction', which is "
                       r"one of GRPO's own train/ keys"):  # fmt: skip
        make_model("grpo", policy_loss="clobbering").learn(64)


def test_a_loss_returning_the_wrong_shape_is_named(fresh_plugins):
    class Scalar(Capped):
        def compute(self, inputs):
            outputs = super().compute(inputs)
            return PolicyLossOutputs(per_step=outputs.per_step.mean(), ratio=outputs.ratio)

    sb3_grpo.register_policy_loss("scalar", Scalar)
    with pytest.raises(ValueError, match=r"Policy loss 'scalar' returned per_step of shape \(\); expected \(\d+,\), one per"):
        make_model("grpo", policy_loss="scalar").learn(64)


# -------------------------------------------------------------------------
# A model saved with a plugin's loss, loaded where the plugin is missing
# -------------------------------------------------------------------------

PLANTED_HOOKS = (
    "import torch as th\n"
    "from sb3_grpo import PolicyLoss, PolicyLossOutputs, hookimpl\n\n"
    "class PlantedLoss(PolicyLoss):\n"
    "    def compute(self, inputs):\n"
    "        ratio = th.exp(inputs.log_prob - inputs.old_log_prob)\n"
    "        return PolicyLossOutputs(per_step=-ratio * inputs.advantages, ratio=ratio)\n\n"
    "@hookimpl\n"
    "def register_policy_losses(register):\n"
    "    register('planted_loss', PlantedLoss)\n"
)


def test_a_plugin_loss_missing_at_load_is_named(tmp_path, monkeypatch, fresh_plugins):
    (tmp_path / "planted_loss_plugin").mkdir()
    (tmp_path / "planted_loss_plugin" / "__init__.py").write_text("")
    (tmp_path / "planted_loss_plugin" / "hooks.py").write_text(PLANTED_HOOKS)
    real = importlib.metadata.entry_points
    entry_point = importlib.metadata.EntryPoint(name="planted", value="planted_loss_plugin.hooks", group="sb3_grpo")

    def install(installed):
        for name in [m for m in sys.modules if m.partition(".")[0] == "planted_loss_plugin"]:
            del sys.modules[name]
        while str(tmp_path) in sys.path:
            sys.path.remove(str(tmp_path))
        if installed:
            monkeypatch.syspath_prepend(str(tmp_path))
        eps = [entry_point] if installed else []
        monkeypatch.setattr(
            importlib.metadata, "entry_points", lambda **kw: eps if kw.get("group") == "sb3_grpo" else real(**kw)
        )
        fresh_plugins._reset_for_tests()

    monkeypatch.delenv("SB3_GRPO_LOAD_PLUGINS", raising=False)
    install(True)
    path = tmp_path / "planted.zip"
    make_model("grpo", policy_loss="planted_loss").save(path)
    from sb3_grpo.common.saved_models import SAVED_BY_KEY, read_saved_data

    assert read_saved_data(path)[SAVED_BY_KEY]["plugins"] == [
        {"kind": "policy loss", "name": "planted_loss", "plugin": "planted", "source": "planted_loss_plugin.hooks"}
    ]
    install(False)
    try:
        with pytest.raises(
            PluginError,
            match=r"(?s)Cannot load .*planted.zip as a GRPO model: this saved argument cannot be loaded here:\n"
            r"  - policy_loss: it trains with the policy loss 'planted_loss' from the sb3_grpo plugin 'planted' "
            r"\(planted_loss_plugin.hooks\), which no loaded plugin provides \(available: cispo, clip, .*\)\n"
            r"To load it, install or enable the plugin that provides the policy loss, or pass replacements for all of "
            r"them: GRPO.load\(path, custom_objects=\{'policy_loss': '<a registered policy loss>'\}\)",
        ):
            GRPO.load(path, device="cpu")
        model = GRPO.load(path, env=tiny_env(), device="cpu", custom_objects={"policy_loss": "clip"})
        assert type(model._policy_loss).__name__ == "ClippedSurrogate"
        install(True)
        assert type(GRPO.load(path, device="cpu")._policy_loss).__name__ == "PlantedLoss"
    finally:
        install(False)


# -------------------------------------------------------------------------
# The default loss, bit for bit as before the losses became plugins
# -------------------------------------------------------------------------


def _pinned_step_loss(log_prob, old_log_prob, advantages, eps_low, eps_high, beta, ref_log_prob, trajectory, n_trajectories):
    """GRPO's step loss before this change (``sb3_grpo.grpo.loss.grpo_step_loss`` at commit 87cef2b), verbatim."""
    from sb3_grpo.common.groups.buffers import trajectory_sums

    log_ratio = log_prob - old_log_prob
    if trajectory is not None:
        counts = trajectory_sums(th.ones_like(log_ratio), trajectory, n_trajectories)
        sums = trajectory_sums(log_ratio, trajectory, n_trajectories)
        ratio = th.exp(sums / counts.clamp_min(1.0))[trajectory]
    else:
        ratio = th.exp(log_ratio)
    surrogate = th.min(advantages * ratio, advantages * th.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high))
    per_step = -surrogate
    kl_ref = None
    if ref_log_prob is not None:
        kl_ref = kl_estimate(ref_log_prob - log_prob, "k3")
        per_step = per_step + beta * kl_ref
    return per_step, surrogate, ratio, log_ratio, kl_ref


class PinnedGRPO(GRPO):
    """GRPO whose ``train`` is the one of commit 87cef2b, verbatim (with its step loss above)."""

    def train(self) -> None:
        eps_low = self._scheduled("clip_range", self.clip_range)
        eps_high = eps_low if self.clip_range_high is None else self._scheduled("clip_range_high", self.clip_range_high)
        if not self._begin_update():
            return
        buffer = self.rollout_buffer
        if self.ref_policy is not None:
            buffer.ref_log_prob = buffer.log_prob_under(self.ref_policy)
        by_trajectory = self.importance_sampling_level == "trajectory"
        pg_losses, kl_refs, entropies, approx_kls = [], [], [], []
        ratio_stats = []
        continue_training = True
        for epoch in range(self.n_epochs):
            for batch in buffer.get(self.batch_size, self._np_rng, by_trajectory=by_trajectory):
                log_prob, entropy = self.policy.evaluate_actions(batch.observations, batch.actions)
                per_step, surrogate, ratio, log_ratio, kl_ref = _pinned_step_loss(
                    log_prob,
                    batch.old_log_prob,
                    batch.advantages,
                    eps_low,
                    eps_high,
                    beta=self.beta,
                    ref_log_prob=batch.ref_log_prob if self.ref_policy is not None else None,
                    trajectory=batch.trajectory if by_trajectory else None,
                    n_trajectories=batch.n_trajectories,
                )
                if kl_ref is not None:
                    kl_refs.append(float((batch.weights * kl_ref.detach()).sum() / batch.weights.sum().clamp_min(1e-12)))
                if entropy is None:
                    entropy = -log_prob
                if self.ent_coef != 0:
                    per_step = per_step - self.ent_coef * entropy
                loss = (batch.weights * per_step).sum()
                with th.no_grad():
                    weight_sum = batch.weights.sum().clamp_min(1e-12)
                    pg_losses.append(float((batch.weights * -surrogate).sum() / weight_sum))
                    entropies.append(float(entropy.mean()))
                    ratio_stats.append(ratio_statistics(ratio, batch.advantages, eps_low, eps_high))
                    approx_kl = float(kl_estimate(log_ratio, "k3").mean())
                    approx_kls.append(approx_kl)
                if self._stops_early(approx_kl, self.target_kl, epoch):
                    continue_training = False
                    break
                self._gradient_step(loss)
            self._n_updates += 1
            if not continue_training:
                break
        if approx_kls:
            self._adapt_learning_rate(float(np.mean(approx_kls)))
        self._end_update()
        self.logger.record("train/policy_gradient_loss", float(np.mean(pg_losses)) if pg_losses else 0.0)
        self.logger.record("train/entropy_loss", -float(np.mean(entropies)) if entropies else 0.0)
        self.logger.record("train/approx_kl", float(np.mean(approx_kls)) if approx_kls else 0.0)
        clip_fraction, clip_low, clip_high, ess = np.mean(ratio_stats, axis=0) if ratio_stats else (0.0, 0.0, 0.0, 1.0)
        self.logger.record("train/clip_fraction", float(clip_fraction))
        self.logger.record("train/clip_fraction_low", float(clip_low))
        self.logger.record("train/clip_fraction_high", float(clip_high))
        self.logger.record("train/importance_ess", float(ess))
        self.logger.record("train/kl_ref", float(np.mean(kl_refs)) if kl_refs else 0.0)
        self.logger.record("train/loss", float(loss.item()))


#: name -> (env id, envs, learn budget, arguments): short seeded runs whose ratios leave the clip range
PINNED_RUNS = {
    "cartpole_default": ("CartPole-v1", 4, 1000, dict(n_steps=32, group_size=4, learning_rate=1e-2)),
    "pendulum_beta_clip_high": (
        "Pendulum-v1", 4, 3200,
        dict(groups_per_rollout=2, group_size=4, batch_size=64, n_epochs=2, beta=0.04, clip_range_high=0.28,
             learning_rate=1e-2, advantage_estimator="group_zscore"),
    ),
    "cartpole_entropy_dr_grpo_target_kl": (
        "CartPole-v1", 4, 1000,
        dict(n_steps=16, group_size=4, batch_size=16, n_epochs=3, ent_coef=0.01, loss_type="dr_grpo", clip_range=0.1,
             target_kl=0.05, learning_rate=1e-2),
    ),
    "pendulum_gspo": (
        "Pendulum-v1", 4, 3200,
        dict(groups_per_rollout=2, group_size=4, batch_size=64, n_epochs=4, clip_range=0.003, beta=0.04,
             loss_type="grpo", learning_rate=3e-2),
    ),
}  # fmt: skip


def _train(cls, env_id, n_envs, budget, kwargs):
    th.set_num_threads(1)
    model = cls(
        "MlpPolicy", make_vec_env(env_id, n_envs=n_envs), policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu", **kwargs
    )
    model.learn(budget)
    logged = {k: v for k, v in model.logger.name_to_value.items() if k.startswith("train/")}
    return [p.detach().clone() for p in model.policy.parameters()], logged


@pytest.mark.parametrize("run", PINNED_RUNS)
def test_the_default_loss_is_bitwise_the_loss_before_plugins(run):
    """Same process, same seed: every parameter and every logged value of GRPO's default loss (``clip``), and of
    ``gspo``, equals the pre-plugin code's, bit for bit (the references of tests/test_refactor_equivalence.py pin the
    numbers across releases, up to float32 rounding across torch builds)."""
    env_id, n_envs, budget, kwargs = PINNED_RUNS[run]
    new_kwargs, old_kwargs = dict(kwargs), dict(kwargs)
    if run == "pendulum_gspo":
        new_kwargs["policy_loss"] = "gspo"
        old_kwargs["importance_sampling_level"] = "trajectory"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        old_params, old_logged = _train(PinnedGRPO, env_id, n_envs, budget, old_kwargs)
        new_params, new_logged = _train(GRPO, env_id, n_envs, budget, new_kwargs)
    assert old_logged["train/clip_fraction"] > 0 or run == "cartpole_default"  # the clip acted
    for old, new in zip(old_params, new_params, strict=True):
        assert th.equal(old, new)
    for key, value in old_logged.items():
        assert new_logged[key] == value, key
    if run == "pendulum_gspo":  # the deprecated spelling gives the same numbers as policy_loss="gspo"
        with pytest.warns(FutureWarning, match=r"importance_sampling_level='trajectory' is deprecated; it is "
                          r"policy_loss='gspo'"):  # fmt: skip
            alias_params, _ = _train(GRPO, env_id, n_envs, budget, old_kwargs)
        for old, alias in zip(old_params, alias_params, strict=True):
            assert th.equal(old, alias)
