"""
``sb3-grpo new-plugin NAME``: a new plugin distribution, ready to install, test and edit.

It writes ``sb3-grpo-<name>/`` with a ``pyproject.toml`` whose ``sb3_grpo`` entry point names the ``hooks`` module,
a package holding one advantage estimator (a group baseline, for GRPO), one reward function and one policy loss (a
capped importance-weighted policy gradient, for GRPO), registered under names prefixed with the plugin's (so they
cannot clash with another plugin's), a test file that checks the three through the installed plugin, and a README.
``pip install -e ./sb3-grpo-<name>[test] && pytest sb3-grpo-<name>`` then passes as generated. The layout is the one
of the docs' plugin guide and of ``plugins/sb3-grpo-rank-plugin``.
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path

__all__ = ["new_plugin"]

_PYPROJECT = """[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "An sb3_grpo plugin: {name}"
readme = "README.md"
requires-python = ">=3.10"
dependencies = ["sb3-grpo", "numpy", "torch"]

[project.optional-dependencies]
test = ["pytest>=8"]

# sb3_grpo finds plugins through this entry-point group: <plugin name> = "<module with the @hookimpl functions>".
[project.entry-points.sb3_grpo]
{name} = "{package}.hooks"

[tool.setuptools]
packages = ["{package}"]
"""

_INIT = '''"""{dist}: an sb3_grpo plugin (see hooks.py for what it registers)."""

from .estimators import {estimator_class}
from .losses import {loss_class}
from .rewards import {reward}

__all__ = ["{loss_class}", "{estimator_class}", "{reward}"]
'''

_HOOKS = '''"""The plugin's hooks: the module the ``sb3_grpo`` entry point names. sb3_grpo imports it once and calls each
``@hookimpl`` function with a ``register`` callback. Names carry the plugin's prefix, so that no other plugin claims
them too (a name two plugins register is unusable)."""

from sb3_grpo import hookimpl

from .estimators import {estimator_class}
from .losses import {loss_class}
from .rewards import {reward}


@hookimpl
def register_advantage_estimators(register):
    register("{name}_group_median", {estimator_class})


@hookimpl
def register_reward_functions(register):
    register("{reward}", {reward})


@hookimpl
def register_policy_losses(register):
    register("{loss}", {loss_class})
'''

_ESTIMATORS = '''"""An advantage estimator for GRPO's groups: each trajectory's outcome against its group's median."""

from __future__ import annotations

import numpy as np

from sb3_grpo import AdvantageEstimator, AdvantageInputs, AdvantageOutputs


class {estimator_class}(AdvantageEstimator):
    """``A_i = R_i - median_{{j in group}} R_j`` for every step of trajectory ``i``: a group baseline that one outlier
    cannot move. Replace ``compute`` with your own rule; ``requires`` says what the algorithm must hand it."""

    requires = frozenset({{"outcome_rewards", "group_ids"}})

    def compute(self, inputs: AdvantageInputs) -> AdvantageOutputs:
        rewards = np.asarray(inputs.outcome_rewards, dtype=np.float64)
        group_ids = np.asarray(inputs.group_ids)
        advantages = np.zeros_like(rewards)
        for group in np.unique(group_ids):
            members = group_ids == group
            advantages[members] = rewards[members] - np.median(rewards[members])
        return AdvantageOutputs(advantages=inputs.broadcast(advantages))
'''

_LOSSES = '''"""A policy loss for GRPO: the loss of each step of a minibatch, from its log-probabilities and advantages."""

from __future__ import annotations

import torch as th

from sb3_grpo import PolicyLoss, PolicyLossInputs, PolicyLossOutputs


class {loss_class}(PolicyLoss):
    """``loss_t = -min(r_t, cap) A_t`` with ``r_t = pi / pi_old``: the importance-weighted policy gradient, the ratio
    capped from above, no lower clip. GRPO minimises ``sum(weights * per_step)`` and adds its KL penalty and entropy
    bonus; ``cap`` comes from ``policy_loss_kwargs``. Replace ``compute`` with your own objective (set
    ``by_trajectory = True`` if it reads whole trajectories)."""

    def __init__(self, cap: float = 2.0):
        if not cap > 1:
            raise ValueError(f"{loss}: cap must be > 1, got {{cap!r}}")
        self.cap = float(cap)

    def compute(self, inputs: PolicyLossInputs) -> PolicyLossOutputs:
        ratio = th.exp(inputs.log_prob - inputs.old_log_prob)
        per_step = -th.clamp(ratio, max=self.cap) * inputs.advantages
        capped = float((ratio > self.cap).float().mean())
        return PolicyLossOutputs(per_step=per_step, ratio=ratio, stats={{"{name}_capped_fraction": capped}})
'''

_REWARDS = '''"""A reward function: a trajectory in, one number (or one per step) out."""

from __future__ import annotations

import numpy as np

from sb3_grpo import Trajectory


def {reward}(trajectory: Trajectory) -> float:
    """The trajectory's length: longer is better (e.g. staying up on CartPole). Replace with your own score."""
    return float(len(np.asarray(trajectory.rewards)))
'''

_TEST = '''"""The installed plugin as sb3_grpo sees it: its names resolve, the estimator's and the loss's arithmetic, a
training run."""

import numpy as np
import pytest
import torch as th

import sb3_grpo
from sb3_grpo import GRPO, AdvantageInputs, PolicyLossInputs
from sb3_grpo.common.advantages import run_estimator


def test_the_plugin_is_loaded_with_its_names():
    assert "{name}_group_median" in sb3_grpo.available_advantage_estimators()
    assert "{reward}" in sb3_grpo.available_reward_functions()
    assert "{loss}" in sb3_grpo.available_policy_losses()


def test_the_estimator_subtracts_the_group_median():
    estimator = sb3_grpo.get_advantage_estimator("{name}_group_median")
    inputs = AdvantageInputs.from_trajectories(
        [np.zeros(2), np.zeros(3), np.zeros(2), np.zeros(1)], 1.0,
        outcome_rewards=np.array([1.0, 5.0, 3.0, 3.0]), group_ids=np.array([0, 0, 0, 1]),
    )
    advantages = run_estimator(estimator, inputs).advantages
    assert np.allclose(advantages[0], [-2.0, 2.0, 0.0, 0.0])  # medians: 3 (group 0), 3 (group 1)


def test_the_loss_caps_the_ratio_and_its_gradient():
    loss = sb3_grpo.get_policy_loss("{loss}", cap=1.5)
    old = th.zeros(3)
    log_prob = th.log(th.tensor([1.2, 2.0, 0.5])).requires_grad_(True)  # ratios 1.2, 2.0 (capped at 1.5), 0.5
    advantages = th.tensor([1.0, 1.0, -2.0])
    inputs = PolicyLossInputs(
        log_prob=log_prob, old_log_prob=old, advantages=advantages, weights=th.ones(3), trajectory=th.zeros(3, dtype=th.long),
        n_trajectories=1, clip_range_low=0.2, clip_range_high=0.2,
    )
    outputs = loss.compute(inputs)
    th.testing.assert_close(outputs.per_step, th.tensor([-1.2, -1.5, 1.0]))
    outputs.per_step.sum().backward()
    th.testing.assert_close(log_prob.grad, th.tensor([-1.2, 0.0, 1.0]))  # d/dlog_prob of -r A is -r A; 0 where capped
    assert outputs.stats == {{"{name}_capped_fraction": pytest.approx(1 / 3)}}


def test_grpo_trains_with_the_plugin():
    model = GRPO(
        "MlpPolicy", "CartPole-v1", advantage_estimator="{name}_group_median", reward_functions=["{reward}"],
        policy_loss="{loss}", policy_loss_kwargs=dict(cap=1.5),
        n_steps=64, group_size=4, policy_kwargs=dict(net_arch=[16]), seed=0, device="cpu",
    )
    model.learn(500)
    assert model.logger.name_to_value["train/{name}_capped_fraction"] >= 0
'''

_README = """# {dist}

An sb3_grpo plugin, generated by `sb3-grpo new-plugin {name}`.

It registers the advantage estimator `{name}_group_median`, the reward function `{reward}` and the policy loss
`{loss}`:

```python
from sb3_grpo import GRPO

model = GRPO(
    "MlpPolicy", "CartPole-v1", advantage_estimator="{name}_group_median", reward_functions=["{reward}"],
    policy_loss="{loss}", policy_loss_kwargs=dict(cap=1.5),
)
```

Install and test it: `pip install -e ".[test]" && pytest`. Edit `{package}/estimators.py`, `{package}/rewards.py`
and `{package}/losses.py`, and register more names in `{package}/hooks.py` (keep the `{name}_` prefix:
a name that two plugins register is unusable). `sb3-grpo plugins` lists what is installed.
"""


def new_plugin(name: str, directory: str | Path = ".") -> Path:
    """Write the plugin distribution ``sb3-grpo-<name>`` under ``directory`` and return its folder.

    :param name: the plugin's name: lower-case letters, digits and underscores, starting with a letter (it prefixes
        the names it registers and names its entry point).
    :raises ValueError: for a name that is not such an identifier, or a folder that exists already (nothing is
        overwritten).
    """
    if not re.fullmatch(r"[a-z](?:[a-z0-9_]*[a-z0-9])?", name) or "__" in name or keyword.iskeyword(name):
        raise ValueError(
            f"new-plugin: the name must be lower-case letters, digits and single underscores, starting with a letter "
            f"and ending with a letter or digit (it prefixes the names the plugin registers), got {name!r}; e.g. "
            "'my_rewards'."
        )
    dist = f"sb3-grpo-{name.replace('_', '-')}"
    package = f"sb3_grpo_{name}"
    root = Path(directory) / dist
    if root.exists():
        raise ValueError(f"new-plugin: {root} exists already; choose another name or directory (nothing was written).")
    values = dict(
        name=name,
        dist=dist,
        package=package,
        estimator_class="".join(part.title() for part in name.split("_")) + "GroupMedian",
        reward=f"{name}_length",
        loss=f"{name}_capped_ratio",
        loss_class="".join(part.title() for part in name.split("_")) + "CappedRatio",
    )
    files = {
        "pyproject.toml": _PYPROJECT,
        "README.md": _README,
        f"{package}/__init__.py": _INIT,
        f"{package}/hooks.py": _HOOKS,
        f"{package}/estimators.py": _ESTIMATORS,
        f"{package}/losses.py": _LOSSES,
        f"{package}/rewards.py": _REWARDS,
        "tests/test_plugin.py": _TEST,
    }
    for relative, template in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(**values))
    return root
