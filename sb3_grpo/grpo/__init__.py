from sb3_grpo.grpo.grpo import GRPO, NonReproducibleResetError
from sb3_grpo.grpo.policies import ActorPolicy, CnnPolicy, MlpPolicy, MultiInputPolicy

__all__ = ["GRPO", "ActorPolicy", "CnnPolicy", "MlpPolicy", "MultiInputPolicy", "NonReproducibleResetError"]
