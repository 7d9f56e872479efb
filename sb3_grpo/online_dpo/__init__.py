from sb3_grpo.common.policies import ActorPolicy, CnnPolicy, MlpPolicy, MultiInputPolicy
from sb3_grpo.online_dpo.online_dpo import OnlineDPO

__all__ = ["ActorPolicy", "CnnPolicy", "MlpPolicy", "MultiInputPolicy", "OnlineDPO"]
