"""sb3_grpo: GRPO, ExactTRPO, AdaptiveKLPPO, REINFORCE and OnlineDPO for Stable-Baselines3, with pluggable estimators,
rewards and policy losses."""

import sb3_grpo.envs  # noqa: F401  (registers sb3_grpo/Arithmetic-v0 with gymnasium)
from sb3_grpo._moved import alias_moved_modules
from sb3_grpo._version import __version__
from sb3_grpo.adaptive_kl_ppo import AdaptiveKLPPO
from sb3_grpo.common.advantages import AdvantageEstimator, AdvantageInputs, AdvantageOutputs, EstimatorError
from sb3_grpo.common.arguments import ArgumentTypeError
from sb3_grpo.common.callbacks import SwitchArguments
from sb3_grpo.common.policy_losses import PolicyLoss, PolicyLossInputs, PolicyLossOutputs
from sb3_grpo.common.reward_scoring import RewardFunctionError, Trajectory
from sb3_grpo.common.schedules import KLAdaptiveLR
from sb3_grpo.common.snapshots import SnapshotError
from sb3_grpo.common.worker_faults import WorkerDiedError
from sb3_grpo.exact_trpo import ExactTRPO
from sb3_grpo.grpo import GRPO
from sb3_grpo.grpo.grpo import NonReproducibleResetError
from sb3_grpo.hookspecs import hookimpl
from sb3_grpo.online_dpo import OnlineDPO
from sb3_grpo.plugins import (
    PluginError,
    PluginWarning,
    UnknownNameError,
    available_advantage_estimators,
    available_policy_losses,
    available_reward_functions,
    available_state_snapshots,
    get_advantage_estimator,
    get_policy_loss,
    get_reward_function,
    list_plugins,
    register_advantage_estimator,
    register_plugin,
    register_policy_loss,
    register_reward_function,
    register_state_snapshot,
    unregister_advantage_estimator,
    unregister_plugin,
    unregister_policy_loss,
    unregister_reward_function,
    unregister_state_snapshot,
)
from sb3_grpo.reinforce import REINFORCE

alias_moved_modules()  # old module paths (saved models, plugins) keep importing

__all__ = [
    "GRPO",
    "REINFORCE",
    "AdaptiveKLPPO",
    "AdvantageEstimator",
    "AdvantageInputs",
    "AdvantageOutputs",
    "ArgumentTypeError",
    "EstimatorError",
    "ExactTRPO",
    "KLAdaptiveLR",
    "NonReproducibleResetError",
    "OnlineDPO",
    "PluginError",
    "PluginWarning",
    "PolicyLoss",
    "PolicyLossInputs",
    "PolicyLossOutputs",
    "RewardFunctionError",
    "SnapshotError",
    "SwitchArguments",
    "Trajectory",
    "UnknownNameError",
    "WorkerDiedError",
    "__version__",
    "available_advantage_estimators",
    "available_policy_losses",
    "available_reward_functions",
    "available_state_snapshots",
    "get_advantage_estimator",
    "get_policy_loss",
    "get_reward_function",
    "hookimpl",
    "list_plugins",
    "register_advantage_estimator",
    "register_plugin",
    "register_policy_loss",
    "register_reward_function",
    "register_state_snapshot",
    "unregister_advantage_estimator",
    "unregister_plugin",
    "unregister_policy_loss",
    "unregister_reward_function",
    "unregister_state_snapshot",
]
