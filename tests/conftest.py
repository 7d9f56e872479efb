import multiprocessing
import os

import pytest

# Runs must not depend on how many threads the CI machine offers (and 2 threads on 2 cores collapse).
os.environ.setdefault("OMP_NUM_THREADS", "1")

# SubprocVecEnv workers start from a forkserver (SB3's default start method); with SB3 (hence torch) imported there
# once, a worker starts in milliseconds instead of importing torch again (seconds each on a loaded machine).
multiprocessing.set_forkserver_preload(["__main__", "stable_baselines3.common.vec_env.subproc_vec_env"])


@pytest.fixture
def fresh_plugins():
    """Reload the plugin registries from scratch before and after the test (in-process registrations vanish)."""
    from sb3_grpo import plugins

    plugins._reset_for_tests()
    yield plugins
    plugins._reset_for_tests()


def pytest_configure(config):
    import torch

    torch.set_num_threads(1)
