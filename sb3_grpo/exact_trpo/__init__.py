from sb3_grpo.exact_trpo.exact_trpo import AUTO_FISHER_DIRECTIONS, ExactTRPO
from sb3_grpo.exact_trpo.policies import CnnPolicy, MlpPolicy, MultiInputPolicy

__all__ = ["AUTO_FISHER_DIRECTIONS", "CnnPolicy", "ExactTRPO", "MlpPolicy", "MultiInputPolicy"]
