"""The same seed gives the same parameters as the committed reference runs (tests/data/make_reference_params.py).

A change meant to keep behaviour (a refactor, a move) must leave every parameter of these short training runs
bitwise equal; a change meant to alter training remakes the references and says so.
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


def test_every_algorithm_has_a_reference_run():
    assert {name.rsplit("_", 1)[0] for name in RUNS} >= {"exact_trpo", "adaptive_kl_ppo"}


@pytest.mark.parametrize("name", RUNS)
def test_training_gives_the_reference_parameters(name):
    expected = dict(np.load(reference.path(name)))
    got = reference.train(name)
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        assert got[key].dtype == value.dtype and got[key].shape == value.shape, key
        np.testing.assert_array_equal(got[key], value, err_msg=f"{name}: parameter {key} differs from the reference")
