"""The documentation stays complete: every hook on the hooks page, every constructor argument in its docstring.

Like datasette's ``tests/test_docs.py``: these read files and docstrings only. The Sphinx build itself
(``sphinx-build -W``) runs in CI, not here.
"""

import inspect
import re
from pathlib import Path

import pytest

from sb3_grpo import GRPO, REINFORCE, AdaptiveKLPPO, ExactTRPO, OnlineDPO, hookspecs

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
HOOKS_PAGE = DOCS / "plugins" / "hooks.rst"


def hook_names() -> list[str]:
    """Every function of ``sb3_grpo/hookspecs.py`` marked with ``@hookspec``."""
    marker = f"{hookspecs.hookspec.project_name}_spec"
    return sorted(name for name, obj in vars(hookspecs).items() if inspect.isfunction(obj) and hasattr(obj, marker))


def test_there_are_hooks():
    assert "register_advantage_estimators" in hook_names()


@pytest.mark.parametrize("hook", hook_names())
def test_hook_is_documented(hook):
    page = HOOKS_PAGE.read_text()
    assert f".. _plugin_hook_{hook}:" in page, f"{HOOKS_PAGE.relative_to(ROOT)} has no section label for {hook}"
    assert re.search(rf"^\.\. autofunction:: sb3_grpo\.hookspecs\.{hook}$", page, re.M), (
        f"{HOOKS_PAGE.relative_to(ROOT)} does not document {hook} with '.. autofunction:: sb3_grpo.hookspecs.{hook}'"
    )


@pytest.mark.parametrize("hook", hook_names())
def test_hook_docstring_documents_its_arguments(hook):
    fn = getattr(hookspecs, hook)
    doc = inspect.getdoc(fn) or ""
    for name in inspect.signature(fn).parameters:
        assert f":param {name}:" in doc, f"hook {hook}: no ':param {name}:' in its docstring"
    assert "Example::" in doc, f"hook {hook}: its docstring has no example"


@pytest.mark.parametrize("algorithm", [GRPO, ExactTRPO, AdaptiveKLPPO, REINFORCE, OnlineDPO], ids=lambda cls: cls.__name__)
def test_every_constructor_argument_has_a_param(algorithm):
    doc = inspect.getdoc(algorithm) or ""
    arguments = [name for name in inspect.signature(algorithm.__init__).parameters if name != "self"]
    missing = [name for name in arguments if not re.search(rf"^:param {re.escape(name)}:", doc, re.M)]
    assert not missing, f"{algorithm.__name__}'s docstring has no ':param name:' for {missing}"
    documented = re.findall(r"^:param (\w+):", doc, re.M)
    assert not sorted(set(documented) - set(arguments)), f"{algorithm.__name__} documents arguments it does not take"


def test_algorithm_pages_autodoc_their_class():
    for page, cls in [
        ("grpo", "GRPO"),
        ("exact_trpo", "ExactTRPO"),
        ("adaptive_kl_ppo", "AdaptiveKLPPO"),
        ("reinforce", "REINFORCE"),
        ("online_dpo", "OnlineDPO"),
    ]:
        text = (DOCS / "modules" / f"{page}.rst").read_text()
        assert f".. autoclass:: sb3_grpo.{cls}\n" in text, f"docs/modules/{page}.rst does not autodoc sb3_grpo.{cls}"


# The pages include fragments of README.md, BENCHMARKS.md, ... between marker texts. A marker that no longer exists
# (a heading renamed in the README) fails the Sphinx build; this finds it in a second, naming page and text.
_INCLUDE = re.compile(
    r"(?:```\{include\}|\.\. include::)\s+(?P<path>\S+)\n(?P<options>(?:[ \t]*:[\w-]+:.*\n)*)",
)
_OPTION = re.compile(r"^[ \t]*:(start-after|end-before):[ \t]*(.*)$", re.M)


def include_markers() -> list[tuple[str, str, str]]:
    found = []
    for page in sorted(DOCS.rglob("*")):
        if page.suffix not in (".rst", ".md") or "_build" in page.parts:
            continue
        for match in _INCLUDE.finditer(page.read_text()):
            target = (page.parent / match["path"]).resolve()
            for option, value in _OPTION.findall(match["options"]):
                value = value.strip()
                if page.suffix == ".md" and len(value) >= 2 and value[0] == value[-1] == '"':
                    value = value[1:-1]
                found.append((str(page.relative_to(ROOT)), str(target), f"{option}: {value}"))
    return found


def test_includes_have_markers():
    assert len(include_markers()) > 10


@pytest.mark.parametrize("page, target, marker", include_markers())
def test_include_marker_exists(page, target, marker):
    text = marker.split(": ", 1)[1]
    assert Path(target).is_file(), f"{page} includes {target}, which does not exist"
    assert text in Path(target).read_text(), f"{page}: '{text}' is no longer in {Path(target).relative_to(ROOT)}"
