"""The plugin manager and registries: discovery, clashes, faulty plugins, wrong signatures, in-process use."""

import importlib
import importlib.metadata
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest
import torch as th

import sb3_grpo
from sb3_grpo import AdvantageEstimator, AdvantageInputs, AdvantageOutputs, hookimpl, hookspecs
from sb3_grpo.common.advantages import run_estimator
from sb3_grpo.plugins import PluginError, UnknownNameError


class Median(AdvantageEstimator):
    requires = frozenset({"outcome_rewards", "group_ids"})

    def compute(self, inputs):
        return AdvantageOutputs(advantages=inputs.broadcast(inputs.outcome_rewards - np.median(inputs.outcome_rewards)))


class EstimatorPlugin:
    def __init__(self, name="median", obj=Median):
        self.name, self.obj = name, obj

    @hookimpl
    def register_advantage_estimators(self, register):
        register(self.name, self.obj)


class RewardPlugin:
    def __init__(self, name="length", fn=lambda t: float(t.length)):
        self.name, self.fn = name, fn

    @hookimpl
    def register_reward_functions(self, register):
        register(self.name, self.fn)


def test_builtins_are_registered_through_the_hooks(fresh_plugins):
    assert set(sb3_grpo.available_advantage_estimators()) >= {
        "gae", "n_step", "td", "monte_carlo", "group_zscore", "group_mean", "leave_one_out", "group_process",
        "reinforce_baseline", "group_step_baseline",
    }  # fmt: skip
    assert set(sb3_grpo.available_reward_functions()) >= {
        "episodic_return",
        "discounted_return",
        "success",
        "terminal_reward",
        "healthy_reward",
        "without_healthy_reward",
        "forward_reward",
        "cost_reward",
    }
    sources = {p["name"]: p["source"] for p in sb3_grpo.list_plugins()}
    assert sources["sb3_grpo.default_plugins.advantage_estimators"] == "built-in"


def test_hook_register_advantage_estimators(fresh_plugins):
    sb3_grpo.register_plugin(EstimatorPlugin(), name="median-plugin")
    est = sb3_grpo.get_advantage_estimator("median")
    inputs = AdvantageInputs.from_trajectories([np.ones(2), np.ones(1), np.ones(3)], gamma=1.0, group_ids=np.zeros(3))
    np.testing.assert_allclose(run_estimator(est, inputs).advantages[0], [0, -1, 1])
    sb3_grpo.unregister_plugin("median-plugin")
    assert "median" not in sb3_grpo.available_advantage_estimators()


def test_hook_register_state_snapshots(fresh_plugins):
    import gymnasium as gym

    from sb3_grpo.common.snapshots import StateSnapshotter, find_snapshotter

    class Snap(StateSnapshotter):
        def supports(self, env):
            return type(env.unwrapped).__name__ == "TargetEnv"

        def get(self, env):
            return env.unwrapped.target

        def set(self, env, state):
            env.unwrapped.target = state
            return env.unwrapped._obs()

    class SnapPlugin:
        @sb3_grpo.hookimpl
        def register_state_snapshots(self, register):
            register("target_env", Snap)

    from envs import TargetEnv

    sb3_grpo.register_plugin(SnapPlugin(), name="snap-plugin")
    assert "target_env" in sb3_grpo.plugins.available_state_snapshots()
    name, snapshotter = find_snapshotter(TargetEnv())
    assert name == "target_env" and isinstance(snapshotter, Snap)
    assert find_snapshotter(gym.make("CartPole-v1"))[0] == "classic_control"


def test_hook_register_reward_functions(fresh_plugins):
    sb3_grpo.register_plugin(RewardPlugin(), name="length-plugin")
    assert sb3_grpo.get_reward_function("length")(type("T", (), {"length": 7})()) == 7.0


def test_hook_register_policy_losses(fresh_plugins):
    """The hook's own example, run as written: the loss it registers trains GRPO by name, with its options."""
    import textwrap
    import types

    doc = inspect.getdoc(hookspecs.register_policy_losses)
    example = textwrap.dedent(doc.split("Example::", 1)[1])
    module = types.ModuleType("truncated_pg_plugin")
    exec(compile(example, "<register_policy_losses example>", "exec"), module.__dict__)
    sb3_grpo.register_plugin(module, name="truncated-pg")
    assert "truncated_pg" in sb3_grpo.available_policy_losses()
    model = sb3_grpo.GRPO(
        "MlpPolicy", "CartPole-v1", n_steps=32, group_size=4, policy_loss="truncated_pg", policy_loss_kwargs={"cap": 1.5},
        seed=0, device="cpu",
    )  # fmt: skip
    model.learn(128)
    assert model._policy_loss.cap == 1.5 and "train/cap_fraction" in model.logger.name_to_value
    sb3_grpo.unregister_plugin("truncated-pg")
    assert "truncated_pg" not in sb3_grpo.available_policy_losses()


def test_unknown_name_lists_what_exists(fresh_plugins):
    with pytest.raises(UnknownNameError, match=r"Unknown advantage estimator 'gea'. Available: (.*, )?gae, .*group_zscore"):
        sb3_grpo.get_advantage_estimator("gea")
    with pytest.raises(
        KeyError, match=r"Unknown reward function 'episodic'. Available: .*discounted_return, .*episodic_return, .*success"
    ):
        sb3_grpo.get_reward_function("episodic")


def test_two_plugins_claiming_one_name_are_both_named(fresh_plugins):
    sb3_grpo.register_plugin(EstimatorPlugin(), name="first-plugin")
    with pytest.warns(sb3_grpo.PluginWarning, match=r"Two plugins claim the advantage estimator name 'median'"):
        sb3_grpo.register_plugin(EstimatorPlugin(), name="second-plugin")
    assert "median" not in sb3_grpo.available_advantage_estimators()  # unusable, and nothing else breaks
    assert sb3_grpo.get_advantage_estimator("gae") is not None
    with pytest.raises(
        PluginError,
        match=r"Two plugins claim the advantage estimator name 'median': 'first-plugin' \(registered in-process\) and "
        r"'second-plugin' \(registered in-process\)",
    ):
        sb3_grpo.get_advantage_estimator("median")


def test_a_plugin_clashing_with_a_builtin_is_named(fresh_plugins):
    with pytest.warns(sb3_grpo.PluginWarning, match=r"advantage estimator name 'gae'"):
        sb3_grpo.register_plugin(EstimatorPlugin(name="gae"), name="shadow-plugin")
    with pytest.raises(
        PluginError, match=r"'gae': 'sb3_grpo.default_plugins.advantage_estimators' \(built-in\) and 'shadow-plugin'"
    ):
        sb3_grpo.get_advantage_estimator("gae")


def test_a_plugin_that_raises_is_named(fresh_plugins):
    class Raising:
        @hookimpl
        def register_reward_functions(self, register):
            raise RuntimeError("database unreachable")

    with pytest.raises(
        PluginError,
        match=r"Cannot register plugin 'flaky-plugin': Plugin 'flaky-plugin' raised while registering reward functions: "
        r".*database unreachable",
    ):
        sb3_grpo.register_plugin(Raising(), name="flaky-plugin")
    assert sb3_grpo.plugins.pm.get_plugin("flaky-plugin") is None
    assert "episodic_return" in sb3_grpo.available_reward_functions()


class TwoArgCompute(AdvantageEstimator):
    requires = frozenset({"outcome_rewards"})

    def compute(self, inputs, extra):
        return inputs


class UnknownNeed(AdvantageEstimator):
    requires = frozenset({"crystal_ball"})

    def compute(self, inputs):
        return inputs


@pytest.mark.parametrize(
    "plugin, match",
    [
        (
            EstimatorPlugin(obj=TwoArgCompute),
            r"'bad-plugin' registered an invalid advantage estimator 'median'.*exactly one argument",
        ),
        (EstimatorPlugin(obj=UnknownNeed), r"unknown needs \['crystal_ball'\]"),
        (EstimatorPlugin(obj=AdvantageEstimator), r"is abstract"),
        (EstimatorPlugin(obj=42), r"expected an AdvantageEstimator"),
        (
            RewardPlugin(fn=lambda trajectory, scale: 1.0),
            r"'bad-plugin' registered an invalid reward function 'length'.*exactly one argument",
        ),
        (RewardPlugin(fn="not callable"), r"not callable"),
        (RewardPlugin(name=""), r"invalid name ''"),
    ],
)
def test_wrong_signatures_fail_at_registration(fresh_plugins, plugin, match):
    with pytest.raises(PluginError, match=match):
        sb3_grpo.register_plugin(plugin, name="bad-plugin")
    assert sb3_grpo.plugins.pm.get_plugin("bad-plugin") is None
    sb3_grpo.available_advantage_estimators()
    sb3_grpo.available_reward_functions()


def test_unknown_hook_name_is_refused(fresh_plugins):
    class Typo:
        @hookimpl
        def register_advantage_estimator(self, register):  # missing "s"
            pass

    with pytest.raises(PluginError, match="does not define"):
        sb3_grpo.register_plugin(Typo(), name="typo-plugin")


def test_in_process_registration(fresh_plugins):
    sb3_grpo.register_advantage_estimator("median", Median)
    sb3_grpo.register_reward_function("double", lambda t: 2.0)
    assert "median" in sb3_grpo.available_advantage_estimators()
    assert sb3_grpo.get_reward_function("double")(None) == 2.0
    with pytest.raises(PluginError, match="already registered in-process"):
        sb3_grpo.register_advantage_estimator("median", Median)
    with pytest.raises(PluginError, match="already provided by plugin"):
        sb3_grpo.register_advantage_estimator("gae", Median)
    sb3_grpo.register_advantage_estimator("gae", Median, replace=True)
    assert isinstance(sb3_grpo.get_advantage_estimator("gae"), Median)
    with pytest.raises(PluginError, match="exactly one argument"):
        sb3_grpo.register_reward_function("two", lambda a, b: 1.0)
    sb3_grpo.unregister_advantage_estimator("median")
    assert "median" not in sb3_grpo.available_advantage_estimators()


def test_objects_can_be_passed_directly(fresh_plugins):
    assert isinstance(sb3_grpo.get_advantage_estimator(Median), Median)
    instance = Median()
    assert sb3_grpo.get_advantage_estimator(instance) is instance
    with pytest.raises(TypeError, match="cannot be applied to the estimator instance"):
        sb3_grpo.get_advantage_estimator(instance, scale="group")

    def fn(trajectory):
        return 1.0

    assert sb3_grpo.get_reward_function(fn) is fn


def test_loading_happens_once(fresh_plugins, monkeypatch):
    calls = []
    real = importlib.metadata.entry_points
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **kw: calls.append(kw) or real(**kw))
    sb3_grpo.available_advantage_estimators()
    sb3_grpo.available_reward_functions()
    sb3_grpo.get_advantage_estimator("gae")
    assert len(calls) == 1


# -------------------------------------------------------------------------
# The example distribution, really installed (by .ci/run), found by entry point
# -------------------------------------------------------------------------


def _example_installed():
    try:
        importlib.metadata.distribution("sb3-grpo-example-plugin")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


needs_example = pytest.mark.skipif(
    not _example_installed() and not os.environ.get("CI"),
    reason="pip install ./plugins/sb3-grpo-example-plugin (CI installs it, and there this test must not skip)",
)


@needs_example
def test_example_plugin_found_by_entry_point(fresh_plugins):
    dist = importlib.metadata.distribution("sb3-grpo-example-plugin")
    assert [ep.name for ep in dist.entry_points if ep.group == "sb3_grpo"] == ["example"]
    assert "example_group_median" in sb3_grpo.available_advantage_estimators()
    assert "example_episode_length" in sb3_grpo.available_reward_functions()
    sources = {p["name"]: p["source"] for p in sb3_grpo.list_plugins()}
    assert sources["example"] == f"sb3-grpo-example-plugin {dist.version}"
    inputs = AdvantageInputs.from_trajectories([np.ones(1), np.ones(2), np.ones(6)], gamma=1.0, group_ids=np.zeros(3))
    np.testing.assert_allclose(
        run_estimator(sb3_grpo.get_advantage_estimator("example_group_median"), inputs).advantages[0], [-1, 0, 4]
    )
    # its policy loss: -min(r, cap) A, the ratio capped at cap (here 1.5): ratios 1.2, 2.0 and 0.5
    assert "example_capped_ratio" in sb3_grpo.available_policy_losses()
    loss = sb3_grpo.get_policy_loss("example_capped_ratio", cap=1.5)
    log_prob = th.log(th.tensor([1.2, 2.0, 0.5])).requires_grad_(True)
    outputs = loss.compute(
        sb3_grpo.PolicyLossInputs(
            log_prob=log_prob, old_log_prob=th.zeros(3), advantages=th.tensor([1.0, 1.0, -2.0]), weights=th.ones(3),
            trajectory=th.zeros(3, dtype=th.long), n_trajectories=1, clip_range_low=0.2, clip_range_high=0.2,
        )
    )  # fmt: skip
    th.testing.assert_close(outputs.per_step, th.tensor([-1.2, -1.5, 1.0]))
    outputs.per_step.sum().backward()
    th.testing.assert_close(log_prob.grad, th.tensor([-1.2, 0.0, 1.0]))  # no gradient where the cap holds
    model = sb3_grpo.GRPO(
        "MlpPolicy", "CartPole-v1", n_steps=32, group_size=4, policy_loss="example_capped_ratio",
        policy_loss_kwargs={"cap": 1.5}, seed=0, device="cpu",
    )  # fmt: skip
    model.learn(128)
    assert 0.0 <= model.logger.name_to_value["train/example_capped_fraction"] <= 1.0


@needs_example
@pytest.mark.parametrize("setting, loaded", [(None, True), ("", False), ("example", True), ("someone_else", False)])
def test_load_plugins_env_var(setting, loaded):
    env = {k: v for k, v in os.environ.items() if k != "SB3_GRPO_LOAD_PLUGINS"}
    if setting is not None:
        env["SB3_GRPO_LOAD_PLUGINS"] = setting
    code = "import sb3_grpo; print('example_group_median' in sb3_grpo.available_advantage_estimators())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert out == str(loaded)


def test_a_plugin_that_fails_to_import_is_named_and_left_out(fresh_plugins, monkeypatch):
    class BrokenEntryPoint:
        name = "broken"
        value = "broken_pkg.module"
        dist = None

        def load(self):
            raise ImportError("No module named 'broken_pkg'")

    monkeypatch.setattr(sb3_grpo.plugins, "_selected_entry_points", lambda: [BrokenEntryPoint()])
    with pytest.warns(
        sb3_grpo.PluginWarning,
        match=r"plugin 'broken' \(broken_pkg.module\) failed to load: importing its entry point 'broken_pkg.module' "
        r"raised ImportError.*broken_pkg.*SB3_GRPO_LOAD_PLUGINS",
    ):
        assert "gae" in sb3_grpo.available_advantage_estimators()
    with pytest.raises(UnknownNameError, match=r"Plugin 'broken' \(broken_pkg.module\) failed to load: .*broken_pkg"):
        sb3_grpo.get_advantage_estimator("group_rank")


# -------------------------------------------------------------------------
# Hook documentation (datasette's test_docs): every hook documents its parameter and shows an example
# -------------------------------------------------------------------------

HOOKS = [name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction) if hasattr(fn, "sb3_grpo_spec")]


def test_every_hook_has_a_test():
    tested = {name[len("test_hook_") :] for name in globals() if name.startswith("test_hook_")}
    assert set(HOOKS) <= tested, f"hooks without a test_hook_<name>: {set(HOOKS) - tested}"


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_documented(hook):
    fn = getattr(hookspecs, hook)
    doc = inspect.getdoc(fn) or ""
    for param in inspect.signature(fn).parameters:
        assert f":param {param}:" in doc, f"{hook} does not document {param}"
    assert "Example::" in doc and "@hookimpl" in doc, f"{hook} has no example"
    assert "Called once" in doc, f"{hook} does not say when it is called"


# -------------------------------------------------------------------------
# Plugins that register nothing, SB3_GRPO_LOAD_PLUGINS naming nothing installed, list_plugins, `sb3-grpo plugins`
# -------------------------------------------------------------------------

PLUGIN_MODULES = {
    # a hook function without the marker
    "nomarker_mod.py": "def register_reward_functions(register):\n    register('nomarker_reward', lambda t: 1.0)\n",
    # another project's marker
    "othermarker_mod.py": (
        "import pluggy\nhookimpl = pluggy.HookimplMarker('llm')\n\n"
        "@hookimpl\ndef register_reward_functions(register):\n    register('other_reward', lambda t: 1.0)\n"
    ),
    # an installed plugin whose hook raises
    "raising_mod.py": (
        "from sb3_grpo import hookimpl\n\n"
        "@hookimpl\ndef register_reward_functions(register):\n    raise RuntimeError('database unreachable')\n"
    ),
    # the entry point names the package, the hooks are in its hooks module
    "hookspkg/__init__.py": "",
    "hookspkg/hooks.py": (
        "from sb3_grpo import hookimpl\n\n"
        "@hookimpl\ndef register_reward_functions(register):\n    register('pkg_reward', lambda t: 1.0)\n"
    ),
}


@pytest.fixture
def fake_entry_points(tmp_path, monkeypatch, fresh_plugins):
    """Install entry points of the ``sb3_grpo`` group that name modules written to ``tmp_path``."""
    for relative, text in PLUGIN_MODULES.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    real = importlib.metadata.entry_points

    def install(**plugins):
        eps = [importlib.metadata.EntryPoint(name=n, value=v, group="sb3_grpo") for n, v in plugins.items()]
        monkeypatch.setattr(
            importlib.metadata, "entry_points", lambda **kw: eps if kw.get("group") == "sb3_grpo" else real(**kw)
        )

    return install


@pytest.mark.parametrize(
    "value, match",
    [
        ("nomarker_mod", r"its register_reward_functions is not decorated with @sb3_grpo.hookimpl"),
        ("othermarker_mod", r"its register_reward_functions is marked with the hookimpl of another project \('llm'\)"),
        ("hookspkg", r"'hookspkg' holds none of the hook functions \(they may be in hookspkg.hooks: .*hookspkg.hooks"),
    ],
)
def test_a_plugin_that_implements_no_hook_is_named_with_the_reason(fake_entry_points, monkeypatch, value, match):
    monkeypatch.delenv("SB3_GRPO_LOAD_PLUGINS", raising=False)
    fake_entry_points(silent=value)
    with pytest.warns(sb3_grpo.PluginWarning, match=r"The sb3_grpo plugin 'silent' \(.*\) implements no hook, so it "
                      r"registers nothing: " + match):  # fmt: skip
        plugins = sb3_grpo.list_plugins()
    assert {p["name"]: p["hooks"] for p in plugins}["silent"] == {}
    assert "silent  (" in _cli_output("plugins") and "implements no hook: registers nothing" in _cli_output("plugins")


def test_cli_strict_fails_on_a_plugin_that_registers_nothing(fake_entry_points, monkeypatch, capsys):
    from sb3_grpo.cli import main

    monkeypatch.delenv("SB3_GRPO_LOAD_PLUGINS", raising=False)
    fake_entry_points(silent="nomarker_mod")
    assert main(["plugins", "--strict"]) == 1
    assert "sb3-grpo: warning: The sb3_grpo plugin 'silent'" in capsys.readouterr().err
    fake_entry_points(pkg="hookspkg.hooks")
    sb3_grpo.plugins._reset_for_tests()
    assert main(["plugins", "--strict"]) == 0


def test_a_plugin_object_registered_in_process_with_no_hook_warns(fresh_plugins):
    class NoMarker:
        def register_advantage_estimators(self, register):
            register("median", Median)

    with pytest.warns(sb3_grpo.PluginWarning, match=r"'no-marker' \(registered in-process\) implements no hook.*"
                      r"register_advantage_estimators is not decorated with @sb3_grpo.hookimpl"):  # fmt: skip
        sb3_grpo.register_plugin(NoMarker(), name="no-marker")


def test_a_plugin_with_hooks_does_not_warn(fake_entry_points, monkeypatch, recwarn):
    monkeypatch.delenv("SB3_GRPO_LOAD_PLUGINS", raising=False)
    fake_entry_points(pkg="hookspkg.hooks")
    assert "pkg_reward" in sb3_grpo.available_reward_functions()
    assert not [w for w in recwarn if issubclass(w.category, sb3_grpo.PluginWarning)]


def test_list_plugins_shows_what_each_plugin_registered(fresh_plugins):
    sb3_grpo.register_plugin(EstimatorPlugin(), name="median-plugin")
    sb3_grpo.register_reward_function("double", lambda t: 2.0)
    plugins = {p["name"]: p for p in sb3_grpo.list_plugins()}
    builtin = plugins["sb3_grpo.default_plugins.advantage_estimators"]
    assert builtin["source"] == "built-in"
    assert set(builtin["hooks"]) == {"register_advantage_estimators"}
    assert {"gae", "group_zscore", "n_step"} <= set(builtin["hooks"]["register_advantage_estimators"])
    assert plugins["sb3_grpo.default_plugins.state_snapshots"]["hooks"] == {
        "register_state_snapshots": ["classic_control", "mujoco"]
    }
    assert plugins["median-plugin"] == {
        "name": "median-plugin",
        "source": "<in-process>",
        "hooks": {"register_advantage_estimators": ["median"]},
        "failed": {},
        "clashes": {},
    }
    assert plugins["<in-process>"]["hooks"] == {"register_reward_functions": ["double"]}


def test_load_plugins_naming_a_plugin_that_is_not_installed_warns(fake_entry_points, monkeypatch):
    fake_entry_points(pkg="hookspkg.hooks", other="nomarker_mod")
    monkeypatch.setenv("SB3_GRPO_LOAD_PLUGINS", "pgk")
    with pytest.warns(
        sb3_grpo.PluginWarning,
        match=r"SB3_GRPO_LOAD_PLUGINS='pgk' names 'pgk', which no installed distribution provides as an sb3_grpo "
        r"plugin, so nothing is loaded for it. Installed sb3_grpo plugins \(entry-point names\): other, pkg\.",
    ):
        names = sb3_grpo.available_reward_functions()
    assert "pkg_reward" not in names


@pytest.mark.parametrize("lookup", ["estimator", "reward", "snapshot"])
def test_unknown_name_errors_mention_the_plugin_filter(fake_entry_points, fresh_plugins, monkeypatch, lookup):
    fake_entry_points(pkg="hookspkg.hooks")
    monkeypatch.setenv("SB3_GRPO_LOAD_PLUGINS", "")
    function = {
        "estimator": sb3_grpo.get_advantage_estimator,
        "reward": sb3_grpo.get_reward_function,
        "snapshot": sb3_grpo.plugins._snapshots.lookup,
    }[lookup]
    with pytest.raises(
        UnknownNameError,
        match=r"Unknown .* 'pkg_thing'.* SB3_GRPO_LOAD_PLUGINS='' is set, so only the plugins it names load; installed but "
        r"not loaded: 'pkg' \(hookspkg.hooks\)\. Add the plugin's entry-point name to SB3_GRPO_LOAD_PLUGINS",
    ):
        function("pkg_thing")
    monkeypatch.delenv("SB3_GRPO_LOAD_PLUGINS")
    fresh_plugins._reset_for_tests()
    with pytest.raises(UnknownNameError) as info:
        function("pkg_thing")
    assert "SB3_GRPO_LOAD_PLUGINS" not in str(info.value)


def _cli_output(*argv):
    import contextlib
    import io

    from sb3_grpo.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()


def test_cli_plugins_lists_names_per_hook(fresh_plugins):
    sb3_grpo.register_plugin(EstimatorPlugin(), name="median-plugin")
    text = _cli_output("plugins")
    assert "sb3_grpo.default_plugins.advantage_estimators  (built-in)\n    register_advantage_estimators: gae, " in text
    assert "median-plugin  (<in-process>)\n    register_advantage_estimators: median\n" in text
    import json

    assert json.loads(_cli_output("plugins", "--json")) == sb3_grpo.list_plugins()


def test_cli_runs_as_a_module():
    env = {**os.environ, "SB3_GRPO_LOAD_PLUGINS": ""}
    run = subprocess.run([sys.executable, "-m", "sb3_grpo", "plugins"], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    expected = "sb3_grpo.default_plugins.reward_functions  (built-in)\n    register_reward_functions: episodic_return"
    assert expected in run.stdout


def test_cli_lists_a_plugin_that_raises_as_failed(fake_entry_points, monkeypatch, capsys):
    from sb3_grpo.cli import main

    monkeypatch.delenv("SB3_GRPO_LOAD_PLUGINS", raising=False)
    fake_entry_points(flaky="raising_mod")
    assert main(["plugins"]) == 0
    captured = capsys.readouterr()
    assert (
        "flaky  (raising_mod)  FAILED\n    register_reward_functions: FAILED, registers nothing: its "
        "register_reward_functions hook raised RuntimeError('database unreachable')" in captured.out
    )
    assert "sb3-grpo: warning: The sb3_grpo plugin 'flaky' (raising_mod) failed to load" in captured.err
    sb3_grpo.plugins._reset_for_tests()
    assert main(["plugins", "--strict"]) == 1


def test_console_script_is_declared():
    import pathlib
    import re

    from sb3_grpo.cli import main

    text = (pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    scripts = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    (target,) = re.findall(r'^sb3-grpo\s*=\s*"([^"]+)"', scripts, flags=re.M)
    module, _, function = target.partition(":")
    assert getattr(importlib.import_module(module), function) is main
    installed = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="console_scripts")}
    assert installed.get("sb3-grpo", target) == target  # where the package is installed with it, it points there


def test_every_registry_kind_lists_what_is_registered(fresh_plugins):
    """One verb per kind: registered_<kind>() maps each available name to what was registered."""
    from sb3_grpo import plugins

    assert set(plugins.registered_advantage_estimators()) == set(plugins.available_advantage_estimators())
    assert set(plugins.registered_reward_functions()) == set(plugins.available_reward_functions())
    assert set(plugins.registered_state_snapshotters()) == set(plugins.available_state_snapshots())
    assert callable(plugins.registered_reward_functions()["episodic_return"])
