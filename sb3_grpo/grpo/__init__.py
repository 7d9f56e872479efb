from sb3_grpo.common.policies import ActorPolicy, CnnPolicy, MlpPolicy, MultiInputPolicy
from sb3_grpo.grpo.grpo import GRPO, NonReproducibleResetError

__all__ = ["GRPO", "ActorPolicy", "CnnPolicy", "MlpPolicy", "MultiInputPolicy", "NonReproducibleResetError"]
