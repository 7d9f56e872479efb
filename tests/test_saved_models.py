"""Loading saved files: files of earlier releases keep loading, a file saved by another algorithm is refused at
``load()`` naming the class that saved it, and a model whose plugin is switched off or missing neither runs that
plugin's code nor gives a garbled message."""

import importlib.metadata
import json
import os
import pathlib
import sys
import zipfile

import numpy as np
import pytest
from sb3_contrib import TRPO
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

import sb3_grpo
from sb3_grpo import GRPO, AdaptiveKLPPO, ExactTRPO, PluginError
from sb3_grpo._moved import MOVED_MODULES
from sb3_grpo.common.saved_models import SAVED_BY_KEY, saved_algorithm

DATA = pathlib.Path(__file__).parent / "data"
#: Files saved by sb3_grpo 0.1.0, before save() recorded the class (see tests/data/README.md).
OLD_FILES = {
    GRPO: DATA / "grpo_0.1.0_cartpole.zip",
    ExactTRPO: DATA / "exact_trpo_0.1.0_cartpole.zip",
    AdaptiveKLPPO: DATA / "adaptive_kl_ppo_0.1.0_cartpole.zip",
}
SMALL = dict(policy_kwargs=dict(net_arch=[8]), seed=0, device="cpu")


def _new(cls, env="CartPole-v1", **kwargs):
    extra = dict(group_size=2) if cls is GRPO else dict(batch_size=16)
    return cls("MlpPolicy", env, n_steps=16, **extra, **SMALL, **kwargs)


def _data(path):
    return json.loads(zipfile.ZipFile(path).read("data"))


@pytest.mark.skipif(
    int(np.__version__.split(".")[0]) < 2,
    reason="the files were saved under numpy 2: their pickled spaces name numpy._core, which numpy 1.x cannot import",
)
@pytest.mark.parametrize("cls", list(OLD_FILES), ids=lambda c: c.__name__)
def test_files_of_the_previous_release_load_and_train(cls):
    path = OLD_FILES[cls]
    assert SAVED_BY_KEY not in _data(path)
    assert saved_algorithm(_data(path)) == (cls.__name__, f"sb3_grpo.{cls.__name__}", False)
    model = cls.load(path, env=make_vec_env("CartPole-v1", n_envs=2, seed=0), device="cpu")
    assert SAVED_BY_KEY not in model.__dict__
    assert model.predict(np.zeros(4, dtype=np.float32), deterministic=True)[0] in (0, 1)
    model.learn(64)


@pytest.mark.parametrize("cls", list(OLD_FILES), ids=lambda c: c.__name__)
def test_save_records_the_class_and_a_new_file_round_trips(cls, tmp_path):
    _new(cls).save(tmp_path / "m.zip")
    record = _data(tmp_path / "m.zip")[SAVED_BY_KEY]
    assert record["algorithm"] == cls.__name__
    assert record["class"] == f"{cls.__module__}.{cls.__qualname__}"
    assert record["sb3_grpo_version"] == sb3_grpo.__version__
    assert record["plugins"] == []  # built-in estimator and reward functions only
    loaded = cls.load(tmp_path / "m.zip", device="cpu")
    assert SAVED_BY_KEY not in loaded.__dict__


def test_a_subclass_saves_and_loads_as_its_algorithm(tmp_path):
    class MyGRPO(GRPO):
        pass

    _new(MyGRPO).save(tmp_path / "m.zip")
    assert _data(tmp_path / "m.zip")[SAVED_BY_KEY]["algorithm"] == "GRPO"
    GRPO.load(tmp_path / "m.zip", device="cpu")
    with pytest.raises(ValueError, match=r"saved by GRPO \(.*MyGRPO\).*Load it with GRPO.load"):
        ExactTRPO.load(tmp_path / "m.zip")


WRONG = [(target, saved) for target in OLD_FILES for saved in OLD_FILES if target is not saved]


@pytest.mark.parametrize("target, saved", WRONG, ids=lambda c: c.__name__)
@pytest.mark.parametrize("age", ["0.1.0", "new"])
def test_a_file_of_another_algorithm_is_refused_at_load_naming_both(target, saved, age, tmp_path):
    if age == "0.1.0":
        path = OLD_FILES[saved]
        by = rf"{saved.__name__} \(inferred from its saved settings: an earlier sb3_grpo did not record the class\)"
    else:
        path = tmp_path / "m.zip"
        _new(saved).save(path)
        by = rf"{saved.__name__} \({saved.__module__}.{saved.__name__}\)"
    with pytest.raises(
        ValueError,
        match=rf"Cannot load .* with {target.__name__}.load: the file was saved by {by}, and {target.__name__} cannot "
        rf"continue another algorithm's model. Load it with {saved.__name__}.load\(path\)\.",
    ):
        target.load(path, device="cpu")


@pytest.fixture(scope="module")
def foreign_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("foreign")
    PPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=16, **SMALL).save(folder / "ppo.zip")
    TRPO("MlpPolicy", "CartPole-v1", n_steps=16, batch_size=16, **SMALL).save(folder / "trpo.zip")
    return folder


@pytest.mark.parametrize(
    "target, file, match",
    [
        (GRPO, "ppo", r"saved by stable_baselines3's PPO .*not by GRPO. Load it with stable_baselines3.PPO.load\(path\). "
                      r"GRPO's policy has no critic"),
        (GRPO, "trpo", r"saved by sb3_contrib's TRPO .*Load it with sb3_contrib.TRPO.load\(path\)"),
        (AdaptiveKLPPO, "ppo", r"saved by stable_baselines3's PPO \(inferred from its saved settings\), not by "
                               r"AdaptiveKLPPO.*To start AdaptiveKLPPO from its policy's weights"),
        (AdaptiveKLPPO, "trpo", r"saved by sb3_contrib's TRPO"),
        (ExactTRPO, "ppo", r"saved by stable_baselines3's PPO"),
    ],
)  # fmt: skip
def test_ppo_and_trpo_files_are_refused_where_they_cannot_work(foreign_files, target, file, match):
    with pytest.raises(ValueError, match=match):
        target.load(foreign_files / f"{file}.zip", device="cpu")


def test_the_policy_weights_hint_works(foreign_files):
    ppo = PPO.load(foreign_files / "ppo.zip", device="cpu")
    model = AdaptiveKLPPO("MlpPolicy", "CartPole-v1", **SMALL)
    model.policy.load_state_dict(ppo.policy.state_dict())


def test_exact_trpo_continues_a_trpo_file(foreign_files):
    model = ExactTRPO.load(foreign_files / "trpo.zip", env=make_vec_env("CartPole-v1", n_envs=2, seed=0), device="cpu")
    model.learn(64)


# -------------------------------------------------------------------------
# A model whose plugin is switched off, or not installed
# -------------------------------------------------------------------------

PLANTED = {
    "planted_plugin/__init__.py": (
        "import os\n"
        "import numpy as np\n"
        "from sb3_grpo import AdvantageEstimator, AdvantageOutputs\n"
        "os.environ['PLANTED_PLUGIN_RAN'] = '1'  # what importing the plugin does\n\n"
        "class Planted(AdvantageEstimator):\n"
        "    requires = frozenset({'outcome_rewards', 'group_ids'})\n\n"
        "    def compute(self, inputs):\n"
        "        centred = inputs.outcome_rewards - inputs.outcome_rewards.mean()\n"
        "        return AdvantageOutputs(advantages=inputs.broadcast(centred))\n\n"
        "def planted_reward(trajectory):\n"
        "    return float(trajectory.length)\n"
    ),
    "planted_plugin/hooks.py": (
        "from sb3_grpo import hookimpl\n"
        "from planted_plugin import Planted, planted_reward\n\n"
        "@hookimpl\n"
        "def register_advantage_estimators(register):\n"
        "    register('planted', Planted)\n\n"
        "@hookimpl\n"
        "def register_reward_functions(register):\n"
        "    register('planted_reward', planted_reward)\n"
    ),
}


@pytest.fixture
def planted(tmp_path, monkeypatch, fresh_plugins):
    """A model file saved with the estimator and reward function of an installed plugin ("planted"); returns a
    function that forgets the plugin module and installs it again (``installed=True``) or not."""
    for relative, text in PLANTED.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    real = importlib.metadata.entry_points
    entry_point = importlib.metadata.EntryPoint(name="planted", value="planted_plugin.hooks", group="sb3_grpo")

    def setup(installed):
        for name in [m for m in sys.modules if m.partition(".")[0] == "planted_plugin"]:
            del sys.modules[name]
        monkeypatch.delenv("PLANTED_PLUGIN_RAN", raising=False)
        while str(tmp_path) in sys.path:
            sys.path.remove(str(tmp_path))
        eps = []
        if installed:
            monkeypatch.syspath_prepend(str(tmp_path))
            eps = [entry_point]
        monkeypatch.setattr(
            importlib.metadata, "entry_points", lambda **kw: eps if kw.get("group") == "sb3_grpo" else real(**kw)
        )
        fresh_plugins._reset_for_tests()

    monkeypatch.delenv("SB3_GRPO_LOAD_PLUGINS", raising=False)
    setup(installed=True)
    model = _new(GRPO, advantage_estimator="planted", reward_functions=["planted_reward"])
    model.save(tmp_path / "planted.zip")
    yield setup, tmp_path / "planted.zip"
    setup(installed=False)


def test_the_file_records_the_plugins_its_names_come_from(planted):
    _, path = planted
    assert _data(path)[SAVED_BY_KEY]["plugins"] == [
        {"kind": "advantage estimator", "name": "planted", "plugin": "planted", "source": "planted_plugin.hooks"},
        {"kind": "reward function", "name": "planted_reward", "plugin": "planted", "source": "planted_plugin.hooks"},
    ]


def test_a_plugin_switched_off_is_not_imported_by_load(planted, monkeypatch):
    setup, path = planted
    setup(installed=True)
    monkeypatch.setenv("SB3_GRPO_LOAD_PLUGINS", "")
    # every argument that cannot be loaded is named at once, by the constructor argument it belongs to
    with pytest.raises(
        PluginError,
        match=r"(?s)Cannot load .*planted.zip as a GRPO model: these 2 saved arguments cannot be loaded here:\n"
        r"  - advantage_estimator: its advantage estimator 'planted' is planted_plugin.Planted, from the sb3_grpo plugin "
        r"'planted' \(planted_plugin.hooks\), which SB3_GRPO_LOAD_PLUGINS='' leaves out \(it was not unpickled: that "
        r"would import the plugin and run its code\)\n"
        r"  - reward_functions: it scores trajectories with the reward function 'planted_reward' from the sb3_grpo "
        r"plugin 'planted' \(planted_plugin.hooks\), which no loaded plugin provides.*\n"
        r"SB3_GRPO_LOAD_PLUGINS='' is set, so only the plugins it names load; installed but not loaded: 'planted' .*"
        r"To load it, add 'planted' to SB3_GRPO_LOAD_PLUGINS \(or unset it\), or pass replacements for all of them: "
        r"GRPO.load\(path, custom_objects=\{'advantage_estimator': .*, 'reward_functions': ",
    ) as info:
        GRPO.load(path, device="cpu")
    assert "'_estimator'" not in str(info.value)
    assert "planted_plugin" not in sys.modules and "PLANTED_PLUGIN_RAN" not in os.environ

    # replacements for the arguments named: the estimator is rebuilt from the replacement
    replaced = {"advantage_estimator": "group_mean", "reward_functions": ["episodic_return"]}
    model = GRPO.load(path, env=make_vec_env("CartPole-v1", n_envs=2, seed=0), device="cpu", custom_objects=replaced)
    assert type(model._estimator).__name__ == "GroupMean" or model.advantage_estimator == "group_mean"
    model.learn(64)
    assert "planted_plugin" not in sys.modules and "PLANTED_PLUGIN_RAN" not in os.environ

    monkeypatch.setenv("SB3_GRPO_LOAD_PLUGINS", "planted")  # enabled: loads as saved
    setup(installed=True)
    assert type(GRPO.load(path, device="cpu")._estimator).__name__ == "Planted"


def test_a_plugin_that_is_not_installed_is_named(planted):
    setup, path = planted
    setup(installed=False)
    with pytest.raises(
        PluginError,
        match=r"(?s)Cannot load .*planted.zip as a GRPO model: these 2 saved arguments cannot be loaded here:\n"
        r"  - advantage_estimator: its advantage estimator 'planted' \(planted_plugin.Planted\) from the sb3_grpo plugin "
        r"'planted' \(planted_plugin.hooks\) needs the module 'planted_plugin', which is not installed\n"
        r"  - reward_functions: .*'planted_reward' from the sb3_grpo plugin 'planted'.*"
        r"To load it, install the plugin \(or package\) that provides 'planted_plugin', or pass replacements for all "
        r"of them: GRPO.load\(path, custom_objects=\{'advantage_estimator': ",
    ) as info:
        GRPO.load(path, device="cpu")
    assert "lacks" not in str(info.value) and "SB3_GRPO_LOAD_PLUGINS" not in str(info.value)
    assert "'_estimator'" not in str(info.value)
    estimator = {"_estimator": sb3_grpo.get_advantage_estimator("group_mean")}  # the object itself is accepted too
    with pytest.raises(PluginError, match=r"reward function 'planted_reward' from the sb3_grpo plugin 'planted'"):
        GRPO.load(path, device="cpu", custom_objects=estimator)


def test_a_file_object_is_checked_and_left_where_it_was():
    import io

    buffer = io.BytesIO()
    _new(ExactTRPO).save(buffer)
    buffer.seek(0)
    with pytest.raises(ValueError, match=r"saved by ExactTRPO .*Load it with ExactTRPO.load"):
        GRPO.load(buffer, device="cpu")
    assert buffer.tell() == 0
    assert isinstance(ExactTRPO.load(buffer, device="cpu"), ExactTRPO)


@pytest.mark.parametrize("old, new", sorted(MOVED_MODULES.items()))
def test_a_moved_module_keeps_its_old_path_for_imports_and_pickles(old, new):
    import importlib
    import inspect
    import pickle

    module = importlib.import_module(new)
    assert importlib.import_module(old) is module
    classes = [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == new]
    functions = [f for _, f in inspect.getmembers(module, inspect.isfunction) if f.__module__ == new]
    for obj in classes + functions:
        # what a file saved before the move holds: a reference to the object under the old module path
        reference = f"c{old}\n{obj.__qualname__}\n.".encode()
        assert pickle.loads(reference) is obj
