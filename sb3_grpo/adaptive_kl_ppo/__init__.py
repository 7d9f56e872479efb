from sb3_grpo.adaptive_kl_ppo.adaptive_kl_ppo import KL_ESTIMATOR_CHOICES, AdaptiveKLPPO, supports_exact_kl
from sb3_grpo.adaptive_kl_ppo.policies import CnnPolicy, MlpPolicy, MultiInputPolicy

__all__ = ["KL_ESTIMATOR_CHOICES", "AdaptiveKLPPO", "CnnPolicy", "MlpPolicy", "MultiInputPolicy", "supports_exact_kl"]
