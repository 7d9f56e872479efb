"""The same seed gives the same parameters as the committed reference runs (tests/data/make_reference_params.py).

A change meant to keep behaviour (a refactor, a move) must leave every parameter of these short training runs as it
was; a change meant to alter training remakes the references and says so.

"As it was" is up to float32 rounding, not bit for bit: the references were made with one build of torch, and
another version, CPU or BLAS library sums in another order (differences of 1e-10 to 1e-7 were seen with torch 2.11
against 2.13). Each run is a few updates of an 8-unit network: a parameter is the sum of a few dozen Adam or SGD
steps, each a product of float32 values rounded at ~6e-8 of their size. The tolerance, ``rtol=1e-5`` (about 80 float32
ulps) plus ``atol=1e-6`` for the parameters near zero, lies two orders of magnitude above that rounding and below
what a change to the maths moves: OnlineDPO's ``beta`` changed by 0.5% moves its run's parameters by three times
the tolerance, changed by 5% thirty times. Bitwise comparisons stay where one process compares two code paths
(``tests/test_sb3_deterministic.py``, ``tests/test_resume.py``).
"""

import importlib.util
import pathlib

import numpy as np
import pytest

_SPEC = importlib.util.spec_from_file_location(
    "make_reference_params", pathlib.Path(__file__).parent / "data" / "make_reference_params.py"
)
assert _SPEC is not None and _SPEC.loader is not None
reference = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(reference)

RUNS = [name for name in reference.RUNS if reference.path(name).exists()]
#: float32 rounding across torch builds (see the module docstring)
RTOL, ATOL = 1e-5, 1e-6


def test_every_algorithm_has_a_reference_run():
    algorithms = {"grpo", "exact_trpo", "adaptive_kl_ppo", "reinforce", "online_dpo"}
    assert {name.rsplit("_", 1)[0] for name in RUNS} >= algorithms
    assert set(RUNS) == set(reference.RUNS)  # every run's file is committed


@pytest.mark.parametrize("name", RUNS)
def test_training_gives_the_reference_parameters(name):
    expected = dict(np.load(reference.path(name)))
    got = reference.train(name)
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        assert got[key].dtype == value.dtype and got[key].shape == value.shape, key
        np.testing.assert_allclose(
            got[key], value, rtol=RTOL, atol=ATOL, err_msg=f"{name}: parameter {key} differs from the reference"
        )
