"""Mistakes with plugins and with the arguments that name plugin objects, each refused with a message that names the
culprit (the plugin, the saved argument, the reward function and trajectory, or the argument) and the fix:

- a plugin whose hook raises or registers something invalid is refused by ``register_plugin`` (the registries are
  left as they were); a name claimed by two plugins is unusable, and nothing else breaks;
- an installed plugin that fails to import, implements a hook sb3_grpo does not define, or whose hook raises or
  registers something invalid is left out with a warning naming it; every algorithm still builds with its defaults,
  an unknown name mentions it, and ``sb3-grpo plugins`` lists it as failed;
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
    PluginWarning,
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
    """A plugin registering ``estimators`` / ``rewards`` / ``snapshotters`` (name -> object), or raising ``error`` in
    the hook of the kind ``error_in``."""

    def __init__(self, estimators=None, rewards=None, snapshotters=None, error=None, error_in=None):
        self.estimators, self.rewards, self.snapshotters = estimators or {}, rewards or {}, snapshotters or {}
        self.error, self.error_in = error, error_in

    def _register(self, register, objects, kind):
        if self.error is not None and self.error_in == kind:
            raise self.error
        for name, obj in objects.items():
            register(name, obj)

    @hookimpl
    def register_advantage_estimators(self, register):
        self._register(register, self.estimators, "estimators")

    @hookimpl
    def register_reward_functions(self, register):
        self._register(register, self.rewards, "rewards")

    @hookimpl
    def register_state_snapshots(self, register):
        self._register(register, self.snapshotters, "snapshotters")


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


# -------------------------------------------------------------------------
# register_plugin: refused when a hook raises or registers something invalid; clashes make one name unusable
# -------------------------------------------------------------------------

KINDS = {
    "estimators": ("advantage estimator", lambda: sb3_grpo.available_advantage_estimators()),
    "rewards": ("reward function", lambda: sb3_grpo.available_reward_functions()),
    "snapshotters": ("state snapshotter", lambda: sb3_grpo.plugins.available_state_snapshots()),
}


class StringRequires(AdvantageEstimator):
    requires = "values"

    def compute(self, inputs):
        return AdvantageOutputs(advantages=inputs.rewards)


def plain_advantages(inputs):
    return inputs.rewards


class ScoreClass:
    def __call__(self, trajectory):
        return 1.0


class Snap:
    def supports(self, env):
        return False

    def get(self, env):
        return None

    def set(self, env, state):
        return None


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("cls", ALL, ids=_ids)
def test_a_plugin_whose_hook_raises_is_refused_and_nothing_else_breaks(registered, kind, cls):
    what, available = KINDS[kind]
    with pytest.raises(
        PluginError,
        match=rf"Cannot register plugin 'flaky': Plugin 'flaky' raised while registering {what}s: RuntimeError\('down'\)"
        r".* It was not registered.",
    ):
        registered(Plugin(error=RuntimeError("down"), error_in=kind), name="flaky")
    assert sb3_grpo.plugins.pm.get_plugin("flaky") is None
    available()
    _new(cls)  # the next, unrelated lookup (the algorithm's defaults) works


@pytest.mark.parametrize(
    "plugin, match",
    [
        (Plugin(estimators={"stringy": StringRequires}), r"invalid advantage estimator 'stringy': requires must be a set "
         r"\(a collection\) of names such as \{'values'\}.*got 'values'.*frozenset\(\{'values'\}\)"),
        (Plugin(estimators={"plain": plain_advantages}), r"invalid advantage estimator 'plain': plain_advantages\(inputs\) "
         r"is a function with required arguments, not an estimator: an advantage estimator is a class whose instances "
         r"have a `requires` set"),
        (Plugin(estimators={"lambda": lambda: 3}), r"<lambda> is a function that returns 3 \(a int\), not an estimator"),
        (Plugin(rewards={"score_class": ScoreClass}), r"invalid reward function 'score_class'.*ScoreClass is a class: "
         r"register an instance \(ScoreClass\(\)\)"),
        (Plugin(snapshotters={"bad": plain_advantages}), r"invalid state snapshotter 'bad': a state snapshotter needs "
         r"supports\(env\), get\(env\) and set\(env, state\)"),
        (Plugin(rewards={" padded ": lambda t: 1.0}), r"registered a reward function with an invalid name ' padded '"),
        (Plugin(snapshotters={"": Snap}), r"registered a state snapshotter with an invalid name ''"),
    ],
    ids=["requires_string", "plain_function", "factory_not_estimator", "reward_class", "snapshot_function",
         "reward_name", "snapshot_name"],
)  # fmt: skip
def test_a_plugin_registering_an_invalid_object_is_refused_at_registration(registered, plugin, match):
    with pytest.raises(PluginError, match=r"Cannot register plugin 'bad-plugin': Plugin 'bad-plugin' " + f"(.*){match}"):
        registered(plugin, name="bad-plugin")
    assert sb3_grpo.plugins.pm.get_plugin("bad-plugin") is None
    for _what, available in KINDS.values():
        available()


@pytest.mark.parametrize("cls", ALL, ids=_ids)
def test_a_name_two_plugins_claim_is_unusable_and_nothing_else_breaks(registered, cls):
    objects = dict(estimators={"median": Median}, rewards={"length": lambda t: float(t.length)}, snapshotters={"snap": Snap})
    registered(Plugin(**objects), name="first")
    with pytest.warns(PluginWarning) as record:
        registered(Plugin(**objects), name="second")
    messages = [str(w.message) for w in record]
    for what, name in [("advantage estimator", "median"), ("reward function", "length"), ("state snapshotter", "snap")]:
        assert any(
            f"Two plugins claim the {what} name {name!r}: 'first' (registered in-process) and 'second' (registered "
            "in-process)" in m
            for m in messages
        ), messages
    assert "median" not in sb3_grpo.available_advantage_estimators()
    _new(cls)  # defaults: an unrelated lookup works
    with pytest.raises(PluginError, match=r"Two plugins claim the advantage estimator name 'median': 'first' .* 'second'"):
        sb3_grpo.get_advantage_estimator("median")
    with pytest.raises(PluginError, match=r"Two plugins claim the reward function name 'length': 'first' .* 'second'"):
        sb3_grpo.get_reward_function("length")
    if cls in GROUP_ALGOS:
        with pytest.raises(PluginError, match=r"reward function name 'length': 'first' .* 'second'"):
            _new(cls, reward_functions=["length"])
    sb3_grpo.unregister_plugin("second")
    assert "median" in sb3_grpo.available_advantage_estimators()  # usable again


HOOKS = {
    "estimators": "register_advantage_estimators",
    "rewards": "register_reward_functions",
    "snapshotters": "register_state_snapshots",
}

FAILING_MODULE = """
from sb3_grpo import AdvantageEstimator, AdvantageOutputs, hookimpl


class Est(AdvantageEstimator):
    requires = frozenset({{"step_rewards"}})

    def compute(self, inputs):
        return AdvantageOutputs(advantages=inputs.rewards)


class Snap:
    def supports(self, env):
        return False

    def get(self, env):
        return None

    def set(self, env, state):
        return None


VALID = {{"estimators": Est, "rewards": lambda t: 1.0, "snapshotters": Snap}}


@hookimpl
def {hook}(register):
    register("broken_first", VALID[{kind!r}])  # registered before the failure: left out too
    {failure}


@hookimpl
def {other_hook}(register):
    register("still_here", VALID[{other_kind!r}])
"""
FAILURES = {"raises": "raise RuntimeError('database unreachable')", "invalid": "register('broken_bad', 42)"}

INSTALLED_MODULES = {
    "clash_a.py": "from sb3_grpo import hookimpl\n\n@hookimpl\ndef register_reward_functions(register):\n"
    "    register('shared', lambda t: 1.0)\n    register('only_a', lambda t: 2.0)\n",
    "clash_b.py": "from sb3_grpo import hookimpl\n\n@hookimpl\ndef register_reward_functions(register):\n"
    "    register('shared', lambda t: 3.0)\n",
    "hook_typo.py": "from sb3_grpo import hookimpl\n\n@hookimpl\ndef register_reward_fnctions(register):\n"
    "    register('typo_reward', lambda t: 1.0)\n",
    "import_fails.py": "raise ImportError('needs libfoo')\n",
    **{
        f"failing_{kind}_{failure}.py": FAILING_MODULE.format(
            hook=HOOKS[kind],
            kind=kind,
            failure=statement,
            other_kind="estimators" if kind == "rewards" else "rewards",
            other_hook=HOOKS["estimators" if kind == "rewards" else "rewards"],
        )
        for kind in HOOKS
        for failure, statement in FAILURES.items()
    },
}


@pytest.fixture
def entry_points(tmp_path, monkeypatch, fresh_plugins):
    """``install(*(name, module))``: entry points of the ``sb3_grpo`` group naming modules written to ``tmp_path``."""
    import importlib.metadata

    for relative, text in INSTALLED_MODULES.items():
        (tmp_path / relative).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("SB3_GRPO_LOAD_PLUGINS", raising=False)
    real = importlib.metadata.entry_points

    def install(*plugins):
        eps = [importlib.metadata.EntryPoint(name=n, value=v, group="sb3_grpo") for n, v in plugins]
        monkeypatch.setattr(
            importlib.metadata, "entry_points", lambda **kw: eps if kw.get("group") == "sb3_grpo" else real(**kw)
        )
        fresh_plugins._reset_for_tests()

    yield install
    for name in INSTALLED_MODULES:
        sys.modules.pop(name.removesuffix(".py"), None)


def _construct_every_algorithm_with_defaults():
    for cls in ALL:
        cls("MlpPolicy", "CartPole-v1", device="cpu")


@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize("kind", list(HOOKS))
def test_an_installed_plugin_whose_hook_fails_is_left_out_and_nothing_else_breaks(entry_points, kind, failure):
    what, available = KINDS[kind]
    hook = HOOKS[kind]
    problem = {
        "raises": rf"its {hook} hook raised RuntimeError\('database unreachable'\)",
        "invalid": rf"its {hook} hook registered an invalid {what} 'broken_bad': ",
    }[failure]
    entry_points(("flaky", f"failing_{kind}_{failure}"))
    with pytest.warns(
        PluginWarning,
        match=rf"The sb3_grpo plugin 'flaky' \(failing_{kind}_{failure}\) failed to load: {problem}.*None of its {what}s "
        r"are registered \(every other name works\)\. Fix or uninstall it, or leave it out with SB3_GRPO_LOAD_PLUGINS",
    ):
        sb3_grpo.plugins.load_plugins()
    assert "broken_first" not in available() and "broken_bad" not in available()  # all or nothing
    other = "estimators" if kind == "rewards" else "rewards"
    assert "still_here" in KINDS[other][1]()  # its other hook works
    _construct_every_algorithm_with_defaults()
    lookup = {
        "estimators": sb3_grpo.get_advantage_estimator,
        "rewards": sb3_grpo.get_reward_function,
        "snapshotters": sb3_grpo.plugins._snapshots.lookup,
    }
    with pytest.raises(
        sb3_grpo.UnknownNameError,
        match=rf"Unknown {what} 'broken_first'.* Plugin 'flaky' \(failing_{kind}_{failure}\) failed to load: {problem}.*"
        r"; its names may be among the missing\.",
    ):
        lookup[kind]("broken_first")
    with pytest.raises(sb3_grpo.UnknownNameError) as info:  # another kind: that hook of the plugin worked
        lookup[other]("not_there")
    assert "flaky" not in str(info.value)
    (listed,) = [p for p in sb3_grpo.list_plugins() if p["name"] == "flaky"]
    assert listed["hooks"] == {hook: [], HOOKS[other]: ["still_here"]}
    assert list(listed["failed"]) == [hook] and listed["failed"][hook].startswith(f"its {hook} hook")


@pytest.mark.parametrize(
    "module, match",
    [
        ("import_fails", r"importing its entry point 'import_fails' raised ImportError\('needs libfoo'\)"),
        ("hook_typo", r"it implements a hook that sb3_grpo does not define \(unknown hook 'register_reward_fnctions'"),
    ],
)
def test_an_installed_plugin_that_fails_to_load_is_left_out_and_nothing_else_breaks(entry_points, module, match):
    entry_points(("broken", module), ("plugin_a", "clash_a"))
    with pytest.warns(PluginWarning, match=rf"The sb3_grpo plugin 'broken' \({module}\) failed to load: {match}.*Nothing "
                      r"of it is loaded \(every other name works\)"):  # fmt: skip
        sb3_grpo.plugins.load_plugins()
    assert sb3_grpo.plugins.pm.get_plugin("broken") is None
    assert "only_a" in sb3_grpo.available_reward_functions()  # the other installed plugin works
    _construct_every_algorithm_with_defaults()
    for lookup in (sb3_grpo.get_advantage_estimator, sb3_grpo.get_reward_function, sb3_grpo.plugins._snapshots.lookup):
        with pytest.raises(sb3_grpo.UnknownNameError, match=rf"Plugin 'broken' \({module}\) failed to load: {match}"):
            lookup("typo_reward")
    (listed,) = [p for p in sb3_grpo.list_plugins() if p["name"] == "broken"]
    assert listed["hooks"] == {} and list(listed["failed"]) == ["load"]


def test_cli_lists_failed_plugins_and_clashes_with_a_mark_and_succeeds(entry_points, capsys):
    from sb3_grpo.cli import main

    entry_points(
        ("flaky", "failing_rewards_raises"), ("broken", "import_fails"), ("plugin_a", "clash_a"), ("plugin_b", "clash_b")
    )
    assert main(["plugins"]) == 0
    captured = capsys.readouterr()
    assert "flaky  (failing_rewards_raises)  FAILED\n" in captured.out
    assert (
        "    register_reward_functions: FAILED, registers nothing: its register_reward_functions hook raised "
        "RuntimeError('database unreachable')\n" in captured.out
    )
    assert "    register_advantage_estimators: still_here\n" in captured.out
    assert "broken  (import_fails)  FAILED\n    FAILED to load, nothing of it is loaded: importing" in captured.out
    assert "    register_reward_functions: shared [CLASH with 'plugin_b': unusable], only_a\n" in captured.out
    assert "    register_reward_functions: shared [CLASH with 'plugin_a': unusable]\n" in captured.out
    assert "sb3-grpo: warning: The sb3_grpo plugin 'flaky' (failing_rewards_raises) failed to load" in captured.err
    assert "sb3-grpo: warning: Two plugins claim the reward function name 'shared'" in captured.err
    sb3_grpo.plugins._reset_for_tests()
    assert main(["plugins", "--strict"]) == 1  # for CI: a failed plugin or a clash fails
    capsys.readouterr()
    sb3_grpo.plugins._reset_for_tests()
    assert main(["plugins", "--json"]) == 0
    import json

    listed = {p["name"]: p for p in json.loads(capsys.readouterr().out)}
    assert listed["plugin_a"]["clashes"] == {"register_reward_functions": {"shared": ["plugin_b"]}}
    assert listed["broken"]["failed"]["load"].startswith("importing its entry point 'import_fails' raised ImportError")


@pytest.mark.parametrize("cls", ALL, ids=_ids)
def test_installed_plugins_claiming_one_name_break_only_that_name(entry_points, cls):
    entry_points(("plugin_a", "clash_a"), ("plugin_b", "clash_b"))
    with pytest.warns(PluginWarning, match=r"Two plugins claim the reward function name 'shared': 'plugin_a' .* and "
                      r"'plugin_b' .*uninstall one, or leave one out with SB3_GRPO_LOAD_PLUGINS"):  # fmt: skip
        names = sb3_grpo.available_reward_functions()
    assert "only_a" in names and "shared" not in names
    _new(cls)
    sb3_grpo.list_plugins()
    with pytest.raises(PluginError, match=r"reward function name 'shared': 'plugin_a' .* and 'plugin_b'"):
        sb3_grpo.get_reward_function("shared")


def test_two_distributions_declaring_one_plugin_name_both_load(entry_points):
    entry_points(("dup", "clash_a"), ("dup", "clash_b"))
    with pytest.warns(PluginWarning) as record:  # both at load
        sb3_grpo.plugins.load_plugins()
    messages = [str(w.message) for w in record]
    assert any("Two installed distributions declare the sb3_grpo plugin 'dup'" in m for m in messages), messages
    assert any("reward function name 'shared': 'dup' (clash_a) and 'dup (clash_b)'" in m for m in messages), messages
    names = sb3_grpo.available_reward_functions()
    assert "only_a" in names and "shared" not in names
    assert sb3_grpo.get_advantage_estimator("gae") is not None


def test_every_registry_verb_names_what_it_cannot_find(fresh_plugins):
    with pytest.raises(KeyError, match=r"No sb3_grpo plugin named 'never-registered' is registered"):
        sb3_grpo.unregister_plugin("never-registered")
    with pytest.raises(KeyError, match=r"No state snapshotter named 'nope' was registered in-process"):
        sb3_grpo.unregister_state_snapshot("nope")
    sb3_grpo.register_state_snapshot("mine", Snap)
    assert "mine" in sb3_grpo.plugins.available_state_snapshots()
    sb3_grpo.unregister_state_snapshot("mine")
    assert "mine" not in sb3_grpo.plugins.available_state_snapshots()
    with pytest.raises(PluginError, match=r"invalid advantage estimator 'plain': plain_advantages\(inputs\) is a function"):
        sb3_grpo.register_advantage_estimator("plain", plain_advantages)
    with pytest.raises(PluginError, match=r"invalid advantage estimator 'stringy': requires must be a set"):
        sb3_grpo.register_advantage_estimator("stringy", StringRequires)
    with pytest.raises(PluginError, match=r"invalid reward function 'score_class'.*register an instance"):
        sb3_grpo.register_reward_function("score_class", ScoreClass)
    assert "plain" not in sb3_grpo.available_advantage_estimators()


# -------------------------------------------------------------------------
# Reward functions returning the wrong thing; arguments of the wrong type
# -------------------------------------------------------------------------


def score_and_info(trajectory):
    return float(trajectory.length), {"length": trajectory.length}


def score_dict(trajectory):
    return {"score": 1.0}


def score_string(trajectory):
    return "1.0"


def score_none(trajectory):
    pass


@pytest.mark.parametrize(
    "fn, returned",
    [
        (score_and_info, r"returned \(\d+\.0, \{'length': \d+\}\) \(a tuple\) \(a \(score, info\) pair\? return the "
         r"score alone\)"),
        (score_dict, r"returned \{'score': 1.0\} \(a dict\)"),
        (score_string, r"returned '1.0' \(a str\)"),
        (score_none, r"returned None \(a missing return statement\?\)"),
    ],
    ids=["tuple", "dict", "str", "none"],
)  # fmt: skip
@pytest.mark.parametrize("cls", GROUP_ALGOS, ids=_ids)
def test_a_reward_function_returning_no_number_is_named_with_the_trajectory(cls, fn, returned):
    from sb3_grpo import RewardFunctionError

    model = _new(cls, reward_functions=[fn])
    with pytest.raises(
        RewardFunctionError,
        match=rf"Reward function '{fn.__name__}' {returned} on trajectory \d+ \(group \d+, member \d+, length \d+, "
        r".*\); it must return one number",
    ):
        model.learn(16)


CONTAINER_CASES = [
    # (algorithms, argument, value, match)
    (GROUP_ALGOS, "reward_weights", "[1.0, -1.0]", r"reward_weights must be a list of numbers .* got '\[1.0, -1.0\]' "
     r"\(a str\). "
     r"A list in quotes is a string: pass a list, e.g. reward_weights=\[1.0, -1.0\] \(in a zoo YAML file .*without quotes\)"),
    (GROUP_ALGOS, "reward_weights", [1.0, "x"], r"reward_weights must be a list of numbers .* These entries are not: \['x'\]"),
    (GROUP_ALGOS, "reward_functions", {"a": 1}, r"reward_functions must be a reward function .* or a list of them"),
    (GROUP_ALGOS, "reward_functions", ["episodic_return", 3], r"reward_functions must be .* These entries are not: \[3\]"),
    (ADVANTAGE_ALGOS, "advantage_kwargs", "{'eps': 0.1}", r"advantage_kwargs must be a dict of options .* got \"\{'eps': "
     r"0.1\}\" \(a str\). A dict in quotes is a string: pass a dict"),
    (ADVANTAGE_ALGOS, "advantage_estimator", None, r"advantage_estimator must be a registered estimator name, an "
     r"estimator class .* got None"),
    ([REINFORCE], "baseline_kwargs", ["decay", 0.5], r"baseline_kwargs must be a dict of options .* got \['decay', 0.5\] "
     r"\(a list\)"),
    ([REINFORCE], "baseline", 3, r"baseline must be a registered estimator name, .* got 3 \(a int\)"),
]  # fmt: skip


@pytest.mark.parametrize(
    "cls, argument, value, match",
    [(cls, argument, value, match) for classes, argument, value, match in CONTAINER_CASES for cls in classes],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_container_arguments_of_the_wrong_type_name_the_argument(cls, argument, value, match):
    kwargs = {argument: value}
    if argument == "baseline_kwargs":
        kwargs["baseline"] = "reinforce_baseline"  # a registered estimator, which takes options
    with pytest.raises(sb3_grpo.ArgumentTypeError, match=rf"{cls.__name__}: {match}"):
        _new(cls, **kwargs)


@pytest.mark.parametrize("cls", [*ADVANTAGE_ALGOS, REINFORCE], ids=_ids)
def test_an_estimator_object_whose_requires_is_a_string_is_refused(cls):
    argument = "baseline" if cls is REINFORCE else "advantage_estimator"
    with pytest.raises(TypeError, match=r"'StringRequires' is not usable: requires must be a set \(a collection\) of "
                       r"names such as \{'values'\}.*got 'values'"):  # fmt: skip
        _new(cls, **{argument: StringRequires})
