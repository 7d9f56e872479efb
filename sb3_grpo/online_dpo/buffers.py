"""OnlineDPO's batch: the group batch of whole trajectories plus its preference pairs."""

from __future__ import annotations

import numpy as np

from sb3_grpo.common.groups.buffers import GroupRolloutBuffer

__all__ = ["PreferenceRolloutBuffer"]


class PreferenceRolloutBuffer(GroupRolloutBuffer):
    """A :class:`~sb3_grpo.common.groups.buffers.GroupRolloutBuffer` with the rollout's preference pairs.

    ``pairs`` is ``(P, 2)``: (preferred, other) trajectory indices of the batch.
    """

    def reset(self) -> None:
        super().reset()
        self.pairs = np.zeros((0, 2), dtype=np.int64)
