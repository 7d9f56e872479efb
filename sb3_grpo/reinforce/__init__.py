from sb3_grpo.common.policies import ActorPolicy, CnnPolicy, MlpPolicy, MultiInputPolicy
from sb3_grpo.reinforce.reinforce import REINFORCE

__all__ = ["REINFORCE", "ActorPolicy", "CnnPolicy", "MlpPolicy", "MultiInputPolicy"]
