"""The plugin template, plugins/sb3-grpo-rank-plugin, tested from its source in this repository (whether or not the
distribution is installed: tests/test_rank_plugin.py tests the installed one). Also what the docs' "Testing your
plugin" guide shows, and the one rule both plugin folders follow: the entry point names the ``hooks`` module."""

import importlib.util
import pathlib
import re
import sys

import numpy as np
import pytest

import sb3_grpo
from sb3_grpo import GRPO, AdaptiveKLPPO, AdvantageInputs, EstimatorError, ExactTRPO
from sb3_grpo.common.advantages import run_estimator

PLUGINS = pathlib.Path(__file__).resolve().parents[1] / "plugins"
TEMPLATE = PLUGINS / "sb3-grpo-rank-plugin" / "sb3_grpo_rank_plugin"


def _load_source(alias="rank_template_source"):
    """The template's package from this repository's source, imported under another name (its modules import
    each other relatively, so an installed copy of the distribution is not used)."""
    if alias not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            alias, TEMPLATE / "__init__.py", submodule_search_locations=[str(TEMPLATE)]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[alias] = module
        spec.loader.exec_module(module)
    return sys.modules[alias], importlib.import_module(f"{alias}.hooks")


template, hooks = _load_source()


def _critic_inputs(gae_lambda=1.0):
    """Two env slots, four steps, gamma = 0.5. Slot 0: one episode, cut by the end of the rollout (bootstrap with
    last_values). Slot 1: an episode ends after step 1, the next starts at step 2 and ends at the last step."""
    return AdvantageInputs(
        rewards=np.array([[1.0, 0.0], [0.0, 3.0], [2.0, 1.0], [1.0, 0.0]]),
        values=np.array([[1.0, 2.0], [1.0, 1.0], [1.0, 0.0], [1.0, 4.0]]),
        episode_starts=np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]]),
        last_values=np.array([2.0, 5.0]),
        dones=np.array([False, True]),
        gamma=0.5,
        gae_lambda=gae_lambda,
    )


def test_upgo_by_hand():
    # one-step estimates Q_t = r_t + gamma * (episode goes on) * V(s_{t+1}):
    #   slot 0: (1.5, 0.5, 2.5, 2.0)   slot 1: (0.5, 3.0, 3.0, 0.0)
    # slot 0, backwards: G3 = Q3 = 2; Q3 >= V3 -> G2 = 2 + .5 * 2 = 3; Q2 = 2.5 >= V2 -> G1 = 0 + .5 * 3 = 1.5;
    #   Q1 = 0.5 < V1 = 1 -> G0 = 1 + .5 * V1 = 1.5.  A = G - V = (0.5, 0.5, 2, 1)
    # slot 1: G3 = 0 (done); Q3 = 0 < V3 = 4 -> G2 = 1 + .5 * 4 = 3; the episode ends at step 1 -> G1 = r1 = 3;
    #   Q1 = 3 >= V1 = 1 -> G0 = 0 + .5 * 3 = 1.5.  A = (1.5 - 2, 3 - 1, 3 - 0, 0 - 4)
    out = run_estimator(template.UPGO(), _critic_inputs())
    np.testing.assert_allclose(out.advantages, [[0.5, -0.5], [0.5, 2.0], [2.0, 3.0], [1.0, -4.0]])
    # returns with lambda = 1: discounted rewards, bootstrapped with last_values where the rollout cuts the episode
    #   slot 0: (1 + .5 * 1.5, 0 + .5 * 3, 2 + .5 * 2, 1 + .5 * 2) = (1.75, 1.5, 3, 2); slot 1: (1.5, 3, 1, 0)
    np.testing.assert_allclose(out.returns, [[1.75, 1.5], [1.5, 3.0], [3.0, 1.0], [2.0, 0.0]])
    # lambda = 0: the one-step estimates
    out = run_estimator(template.UPGO(gae_lambda=0.0), _critic_inputs(gae_lambda=1.0))
    np.testing.assert_allclose(out.returns, [[1.5, 0.5], [0.5, 3.0], [2.5, 3.0], [2.0, 0.0]])


@pytest.mark.parametrize("lam", [0.0, 0.7, 1.0])
def test_upgo_returns_are_sb3_gae_returns(lam):
    rng = np.random.default_rng(0)
    starts = (rng.random((16, 3)) < 0.2).astype(float)
    inputs = AdvantageInputs(
        rewards=rng.normal(size=(16, 3)),
        values=rng.normal(size=(16, 3)),
        episode_starts=starts,
        last_values=rng.normal(size=3),
        dones=np.array([True, False, False]),
        gamma=0.9,
        gae_lambda=lam,
    )
    gae = run_estimator(sb3_grpo.get_advantage_estimator("gae"), inputs)
    np.testing.assert_allclose(run_estimator(template.UPGO(), inputs).returns, gae.returns, rtol=1e-5, atol=1e-5)


def test_upgo_rejects_a_bad_lambda():
    with pytest.raises(ValueError, match="upgo: gae_lambda must be in"):
        template.UPGO(gae_lambda=1.5)


def test_the_hooks_register_the_objects():
    """A hook in isolation: call it with a register callback that records what it registers."""
    registered = {}
    hooks.register_advantage_estimators(registered.__setitem__)
    hooks.register_reward_functions(registered.__setitem__)
    assert registered == {
        "group_rank": template.GroupRank,
        "upgo": template.UPGO,
        "survival_bonus": template.survival_bonus,
        "action_smoothness": template.action_smoothness,
    }


@pytest.fixture
def template_registered(fresh_plugins, monkeypatch):
    """The template's hooks module registered as a plugin, with no installed plugin loaded (their names would clash)."""
    monkeypatch.setenv("SB3_GRPO_LOAD_PLUGINS", "")
    fresh_plugins._reset_for_tests()
    sb3_grpo.register_plugin(hooks, name="rank-template")
    yield
    fresh_plugins._reset_for_tests()


def test_list_plugins_shows_the_template_names(template_registered):
    plugins = {p["name"]: p["hooks"] for p in sb3_grpo.list_plugins()}
    assert plugins["rank-template"] == {
        "register_advantage_estimators": ["group_rank", "upgo"],
        "register_reward_functions": ["survival_bonus", "action_smoothness"],
    }


@pytest.mark.parametrize("cls", [ExactTRPO, AdaptiveKLPPO])
def test_upgo_trains_the_critic_algorithms_by_name(template_registered, cls):
    extra = dict(n_critic_updates=2) if cls is ExactTRPO else dict(n_epochs=2)
    model = cls(
        "MlpPolicy", "CartPole-v1", advantage_estimator="upgo", n_steps=64, batch_size=64, seed=0, device="cpu", **extra
    )
    model.learn(128)
    assert model.num_timesteps == 128 and isinstance(model._estimator, template.UPGO)


def test_grpo_refuses_upgo(template_registered):
    with pytest.raises(EstimatorError, match=r"'upgo' needs a critic's value estimates \('values'\), which GRPO does not"):
        GRPO("MlpPolicy", "CartPole-v1", advantage_estimator="upgo")


@pytest.mark.parametrize("folder", ["sb3-grpo-rank-plugin", "sb3-grpo-example-plugin"])
def test_entry_points_name_the_hooks_module(folder):
    """The one rule of the docs: the entry point's value is ``<package>.hooks``, the module with the hooks."""
    text = (PLUGINS / folder / "pyproject.toml").read_text()
    section = text.split("[project.entry-points.sb3_grpo]", 1)[1].split("\n[", 1)[0]
    (value,) = re.findall(r'^\s*[\w-]+\s*=\s*"([^"]+)"', section, flags=re.M)
    package, module = value.split(".")
    assert module == "hooks" and (PLUGINS / folder / package / "hooks.py").is_file()
    assert "@hookimpl" in (PLUGINS / folder / package / "hooks.py").read_text()
