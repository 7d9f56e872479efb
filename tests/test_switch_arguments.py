"""SwitchArguments: a training in stages as one ``learn`` call, for every algorithm. One call with the callback is the
same, parameter for parameter, as the three steps it stands for (learn stopped at the step, save, load with the
arguments and learn on); it switches once, at once where the model is past the step, keeps the model object, its
other callbacks and its logger, and refuses arguments the model does not take before any training."""

import pytest
import torch as th
from sb3_conformance import ALGOS, algo_kwargs, algo_params
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure

from sb3_grpo import GRPO, SwitchArguments

NEW = {"gamma": 0.9, "learning_rate": 1e-3}  # arguments every algorithm takes


def make_model(model_class: type, seed: int = 0):
    env = make_vec_env("CartPole-v1", n_envs=2, seed=seed)
    return model_class("MlpPolicy", env, seed=seed, policy_kwargs=dict(net_arch=[16]), **algo_kwargs(model_class))


class StopAt(BaseCallback):
    """Stops training once ``num_timesteps`` reaches ``at`` (what SwitchArguments does before switching)."""

    def __init__(self, at: int):
        super().__init__()
        self.at = at

    def _on_step(self) -> bool:
        return self.num_timesteps < self.at


class Gammas(BaseCallback):
    """Records the model's gamma at the end of every rollout, and the model object it sees."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[int, float, int]] = []

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self.seen.append((self.model.num_timesteps, self.model.gamma, id(self.model)))


@algo_params(ALGOS)
def test_one_learn_call_is_learn_save_load_and_learn_on(tmp_path, model_class):
    switched = make_model(model_class)
    gammas = Gammas()
    switched.learn(1000, callback=[gammas, SwitchArguments(400, NEW)])

    staged = make_model(model_class)
    staged.learn(1000, callback=StopAt(400))
    staged.save(tmp_path / "stage")
    staged = model_class.load(tmp_path / "stage", env=staged.get_env(), **NEW)
    staged.learn(1000 - staged.num_timesteps, reset_num_timesteps=False)

    assert switched.num_timesteps == staged.num_timesteps >= 1000
    assert (switched.gamma, switched.learning_rate) == (0.9, 1e-3)
    for (name, a), b in zip(switched.policy.state_dict().items(), staged.policy.state_dict().values(), strict=True):
        assert th.equal(a, b), name
    # the other callback saw the arguments change, on the same model object, after the step
    assert {g for t, g, _ in gammas.seen if t < 400} == {0.99}
    assert {g for t, g, _ in gammas.seen if t >= 400} == {0.9}
    assert {i for *_, i in gammas.seen} == {id(switched)}


@pytest.mark.filterwarnings("ignore:.*more than twice the steps")  # short learn calls on whole episodes
def test_switches_once_and_at_once_past_its_step():
    model = make_model(GRPO)
    switch = SwitchArguments(300, {"gamma": 0.9})
    logger = configure(None, ["csv"])
    model.set_logger(logger)
    model.learn(600, callback=CallbackList([switch]))
    assert switch.switched and model.gamma == 0.9
    assert model.logger is logger  # a logger the user set is kept
    model.gamma = 0.95  # set by hand after the switch: a second learn with the same callback leaves it
    model.learn(200, callback=switch, reset_num_timesteps=False)
    assert model.gamma == 0.95

    steps = model.num_timesteps
    late = SwitchArguments(100, {"ent_coef": 0.02})  # the model is past its step: it switches before any rollout
    gammas = Gammas()
    model.learn(200, callback=[late, gammas], reset_num_timesteps=False)
    assert late.switched and model.ent_coef == 0.02
    assert gammas.seen[0][0] > steps and model.num_timesteps >= steps + 200


def test_a_zoo_config_builds_it():
    get_callback_list = pytest.importorskip("rl_zoo3.utils", reason="the [zoo] extra").get_callback_list

    arguments = {"reward_functions": ["without_healthy_reward", "healthy_reward"], "reward_gammas": [0.97, 0.999]}
    (callback,) = get_callback_list({"callback": [{"sb3_grpo.SwitchArguments": {"at": 5e5, "arguments": arguments}}]})
    assert isinstance(callback, SwitchArguments)
    assert (callback.at, callback.arguments) == (500_000, arguments)


@pytest.mark.parametrize(
    ("at", "arguments", "match"),
    [
        (0, {"gamma": 0.9}, "positive whole number"),
        (10.5, {"gamma": 0.9}, "positive whole number"),
        (True, {"gamma": 0.9}, "positive whole number"),
        (10, {}, "non-empty dict"),
        (10, [("gamma", 0.9)], "non-empty dict"),
    ],
)
def test_bad_step_or_arguments_are_refused(at, arguments, match):
    with pytest.raises(ValueError, match=match):
        SwitchArguments(at, arguments)


def test_arguments_the_model_refuses_are_refused_before_training():
    model = make_model(GRPO)
    before = [p.detach().clone() for p in model.policy.parameters()]
    with pytest.raises(ValueError, match=r"GRPO takes no argument 'gama'; it takes .*gamma"):
        model.learn(500, callback=SwitchArguments(200, {"gama": 0.9}))
    with pytest.raises(ValueError, match=r"gamma.*given to SwitchArguments\(at=200\)"):
        model.learn(500, callback=SwitchArguments(200, {"gamma": 2.0}))
    with pytest.raises(ValueError, match="policy_kwargs cannot change"):
        model.learn(500, callback=SwitchArguments(200, {"policy_kwargs": dict(net_arch=[32])}))
    with pytest.raises(ValueError, match="env"):
        model.learn(500, callback=SwitchArguments(200, {"env": "CartPole-v1"}))
    assert model.num_timesteps == 0
    assert all(th.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True))
    assert model.gamma == 0.99  # the trial did not touch the model


def test_a_switch_of_the_estimator_arguments_takes_effect_and_is_checked_before_training():
    """advantage_kwargs switched partway build the estimator again (the saved one was built from the old ones), and
    an estimator or reward arguments that do not fit are refused before any training."""
    model = make_model(GRPO)
    model.learn(
        600, callback=SwitchArguments(300, {"advantage_estimator": "group_step_baseline", "advantage_kwargs": {"lam": 0.9}})
    )
    assert type(model._estimator).__name__ == "GroupStepBaseline" and model._estimator.lam == 0.9
    fresh = make_model(GRPO)
    with pytest.raises(ValueError, match=r"lam must be in \[0, 1\], got 2.*given to SwitchArguments\(at=200\)"):
        fresh.learn(
            500, callback=SwitchArguments(200, {"advantage_estimator": "group_step_baseline", "advantage_kwargs": {"lam": 2}})
        )
    each = {"advantage_estimator": "group_step_baseline", "advantage_kwargs": {"stream_scale": "each"}}
    with pytest.raises(ValueError, match=r"give reward_gammas.*given to SwitchArguments\(at=200\)"):
        fresh.learn(500, callback=SwitchArguments(200, each))
    assert fresh.num_timesteps == 0 and fresh._estimator is not None
