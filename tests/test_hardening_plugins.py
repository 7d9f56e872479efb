"""Mistakes with plugins and with the arguments that name plugin objects, each refused with a message that names the
culprit (the plugin, the saved argument, the reward function and trajectory, or the argument) and the fix:

- a plugin whose hook raises or registers something invalid is refused by ``register_plugin`` (the registries are
  left as they were); a name claimed by two plugins is unusable, and nothing else breaks;
- a saved model that needs several missing plugin objects names all of them at once, by their constructor arguments;
- a reward function returning a tuple, a dict or a string; container arguments of the wrong type; an estimator whose
  ``requires`` is a string, or a plain function registered as an estimator.
"""

import sys

import numpy as np
import pytest

import sb3_grpo
from sb3_grpo import (
    GRPO,
    REINFORCE,
    AdaptiveKLPPO,
    AdvantageEstimator,
    AdvantageOutputs,
    ExactTRPO,
    OnlineDPO,
    PluginError,
    hookimpl,
)

SMALL = dict(policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu")
TINY = {
    GRPO: dict(n_steps=8, group_size=2, batch_size=8),
    ExactTRPO: dict(n_steps=8, batch_size=8, n_critic_updates=1),
    AdaptiveKLPPO: dict(n_steps=8, batch_size=8, n_epochs=1),
    REINFORCE: dict(n_steps=8),
    OnlineDPO: dict(n_steps=8, group_size=2, batch_size=8),
}
ALL = list(TINY)
GROUP_ALGOS = [GRPO, OnlineDPO]  # take reward_functions / reward_weights
ADVANTAGE_ALGOS = [GRPO, ExactTRPO, AdaptiveKLPPO]  # take advantage_estimator / advantage_kwargs


def _new(cls, env="CartPole-v1", **kwargs):
    return cls("MlpPolicy", env, **{**TINY[cls], **SMALL, **kwargs})


def _ids(cls):
    return cls.__name__


class Median(AdvantageEstimator):
    requires = frozenset({"outcome_rewards", "group_ids"})

    def compute(self, inputs):
        return AdvantageOutputs(advantages=inputs.broadcast(inputs.outcome_rewards - np.median(inputs.outcome_rewards)))


class Plugin:
    """A plugin registering ``estimators`` / ``rewards`` / ``snapshotters`` (name -> object), or raising ``error``."""

    def __init__(self, estimators=None, rewards=None, snapshotters=None, error=None):
        self.estimators, self.rewards, self.snapshotters = estimators or {}, rewards or {}, snapshotters or {}
        self.error = error

    def _register(self, register, objects):
        if self.error is not None:
            raise self.error
        for name, obj in objects.items():
            register(name, obj)

    @hookimpl
    def register_advantage_estimators(self, register):
        self._register(register, self.estimators)

    @hookimpl
    def register_reward_functions(self, register):
        self._register(register, self.rewards)

    @hookimpl
    def register_state_snapshots(self, register):
        self._register(register, self.snapshotters)


@pytest.fixture
def registered(fresh_plugins):
    """``register(plugin, name)``: register_plugin, unregistered again after the test whatever happens."""
    names = []

    def register(plugin, name):
        result = sb3_grpo.register_plugin(plugin, name=name)
        names.append(result)
        return result

    yield register
    for name in names:
        if fresh_plugins.pm.get_plugin(name) is not None:
            sb3_grpo.unregister_plugin(name)


# -------------------------------------------------------------------------
# A saved model whose plugin objects are missing
# -------------------------------------------------------------------------

TINY_ESTIMATOR = '''
import numpy as np
from sb3_grpo import AdvantageEstimator, AdvantageOutputs

class TinyBaseline(AdvantageEstimator):
    """Reward-to-go minus its mean (an estimator from a module that is later uninstalled)."""

    requires = frozenset({"step_rewards"})

    def compute(self, inputs):
        returns = inputs.reward_to_go() if hasattr(inputs, "reward_to_go") else inputs.rewards
        return AdvantageOutputs(advantages=returns - returns.mean(), returns=returns)
'''


@pytest.mark.parametrize("as_instance", [False, True], ids=["class", "instance"])
def test_a_saved_model_names_every_missing_plugin_object_at_once(tmp_path, monkeypatch, as_instance):
    (tmp_path / "tiny_baseline_mod.py").write_text(TINY_ESTIMATOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    import tiny_baseline_mod

    baseline = tiny_baseline_mod.TinyBaseline() if as_instance else tiny_baseline_mod.TinyBaseline
    model = _new(REINFORCE, baseline=baseline)
    model.learn(16)
    model.save(tmp_path / "model.zip")
    del sys.modules["tiny_baseline_mod"]
    sys.path.remove(str(tmp_path))
    with pytest.raises(
        PluginError,
        match=r"(?s)Cannot load .*model.zip as a REINFORCE model: this saved argument cannot be loaded here:\n"
        r"  - baseline: .*tiny_baseline_mod.TinyBaseline.* needs the module 'tiny_baseline_mod', which is not installed\n"
        r"To load it, install the plugin \(or package\) that provides 'tiny_baseline_mod', or pass replacements for all "
        r"of them: REINFORCE.load\(path, custom_objects=\{'baseline': '<a registered estimator>'\}\)",
    ) as info:
        REINFORCE.load(tmp_path / "model.zip", device="cpu")
    message = str(info.value)
    assert "'_estimator'" not in message and "advantage_estimator" not in message  # user-facing names only
    # the one replacement named is enough: its stored copies and the estimator built from it follow it
    loaded = REINFORCE.load(tmp_path / "model.zip", device="cpu", custom_objects={"baseline": "batch_mean"})
    assert loaded.baseline == "batch_mean" and type(loaded._estimator).__name__ == "RewardToGoBaseline"
