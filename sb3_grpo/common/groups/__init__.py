"""Group sampling, shared by the algorithms that learn from groups of trajectories started from one state (GRPO,
OnlineDPO): the seeded-reset hook, the group scheduler, the rollout collectors, the scored trajectories, the batch
buffer and the base class :class:`~sb3_grpo.common.groups.algorithm.GroupSamplingAlgorithm`."""
