"""Which aten ops a block of torch code runs: for tests that pin a formulation free of CUDA's atomic reductions."""

from torch.utils._python_dispatch import TorchDispatchMode

#: Reductions whose CUDA kernels add with atomics, in an order that changes from run to run.
ATOMIC_ON_CUDA = {"index_add", "scatter_add", "scatter_reduce", "index_reduce", "put", "bincount", "histc"}


class RecordOps(TorchDispatchMode):
    """The names of the aten ops run inside the block (forward and backward), without a trailing ``_``."""

    def __init__(self):
        super().__init__()
        self.ops = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func.overloadpacket.__name__.rstrip("_"))
        return func(*args, **(kwargs or {}))
