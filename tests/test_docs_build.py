"""The built HTML works offline: Sphinx builds a small page with the project's own ``docs/conf.py`` (``-c docs``).

The whole site is built in CI (``sphinx-build -W``, the README's test command); this builds one page in a few
seconds and reads what the configuration puts in it. Skipped without the ``docs`` extra.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
pytest.importorskip("myst_parser")
pytest.importorskip("sphinx_rtd_theme")
pytest.importorskip("sphinx-mathjax-offline")  # docs/conf.py loads it (the [docs] extra installs it)

DOCS = Path(__file__).resolve().parent.parent / "docs"

PAGE = """# Page

Inline maths $\\mathbb{E}[A_t] = 0$ and a display:

$$
\\hat A_i = \\frac{r_i - \\operatorname{mean}(r)}{\\operatorname{std}(r)}
$$

The README's links to repository paths: [`examples/`](examples/), [`sb3_grpo/hookspecs.py`](sb3_grpo/hookspecs.py).
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The HTML folder of ``PAGE`` built with ``docs/conf.py``, warnings as errors."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("html")
    (source / "index.md").write_text(PAGE)
    command = [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", "-c", str(DOCS), str(source), str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_mathjax_is_served_from_the_built_site(built):
    html = (built / "index.html").read_text()
    scripts = re.findall(r"<script[^>]*src=\"([^\"]*mathjax[^\"]*)\"", html, flags=re.IGNORECASE)
    assert scripts, "no MathJax script in a page with maths"
    for src in scripts:
        assert not re.match(r"(https?:)?//", src), f"MathJax loaded from {src}, not from the built site"
        assert (built / src).is_file(), f"{src} is not in the built site"
    assert "cdn.jsdelivr" not in html and "cdnjs" not in html


def test_readme_repository_links_build(built):
    """A link to a repository path that is no docs page (GitHub renders it) keeps its text and builds without a
    warning (``-W`` above); docs/conf.py's ``RepositoryPathLinks`` turns ``docs/...md`` links into page links."""
    html = (built / "index.html").read_text()
    for path in ("examples/", "sb3_grpo/hookspecs.py"):
        assert f'<span class="pre">{path}</span>' in html
        assert f'href="{path}"' not in html and f'href="#{path}"' not in html


def test_table_cells_wrap(built):
    """The theme's ``white-space: nowrap`` on table cells (wide tables behind a scrollbar) is overridden."""
    html = (built / "index.html").read_text()
    sheets = [href.split("?")[0] for href in re.findall(r"<link[^>]*href=\"([^\"]*\.css[^\"]*)\"", html)]
    assert "_static/wrap_tables.css" in sheets, sheets
    assert sheets.index("_static/wrap_tables.css") > sheets.index("_static/css/theme.css"), "must come after the theme"
    css = (built / "_static" / "wrap_tables.css").read_text()
    assert re.search(r"\.wy-table-responsive table td[^{]*\{[^}]*white-space: normal", css)
