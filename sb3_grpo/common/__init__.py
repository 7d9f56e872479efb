"""Shared building blocks: estimator interface, reward functions, buffers, group sampling, Fisher and KL maths."""
