"""Sphinx configuration of the sb3_grpo documentation (Read the Docs style, as SB3 and sb3-contrib).

Build locally, warnings as errors, as CI does::

    pip install -e ".[docs]"
    sphinx-build -W --keep-going -b html docs docs/_build/html
"""

import os
import sys
from pathlib import Path

from sphinx import addnodes
from sphinx.transforms.post_transforms import SphinxPostTransform

# The package is imported from the source tree, so the docs describe the code next to them.
sys.path.insert(0, os.path.abspath(".."))
# Installed third-party plugins run code on import; the docs describe sb3_grpo alone.
os.environ.setdefault("SB3_GRPO_LOAD_PLUGINS", "")

import sb3_grpo

project = "sb3_grpo"
author = "sb3_grpo developers"
copyright = "sb3_grpo developers"
version = release = sb3_grpo.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    # MathJax from the built site's _static/mathjax (a copy the package ships), not from a CDN: the maths renders in
    # a build read offline or from disk, the way the README builds it.
    "sphinx-mathjax-offline",
    "sphinx.ext.viewcode",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
# Markdown pages and the included README/BENCHMARKS/CHANGELOG: $...$ maths, ::: fences, heading anchors.
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"
autodoc_default_options = {"show-inheritance": True}
autoclass_content = "class"

html_theme = "sphinx_rtd_theme"
html_title = f"sb3_grpo {release}"
html_theme_options = {"navigation_depth": 3}
pygments_style = "sphinx"
html_static_path = ["_static"]
# The theme keeps table cells on one line and hides what does not fit behind a scrollbar: wrap them instead.
html_css_files = ["wrap_tables.css"]


REPOSITORY = Path(__file__).resolve().parent.parent


class RepositoryPathLinks(SphinxPostTransform):
    """Links of README.md (included by several pages) to repository paths, which GitHub renders: here a link to a
    docs page (``docs/guide/zoo.md``) goes to that page, and a link to any other file or folder of the repository
    (``examples/``, ``sb3_grpo/hookspecs.py``) keeps its text without a link, as the site holds no such page."""

    default_priority = 5  # before myst-parser's reference resolver (9), which would warn of a missing target

    def run(self, **kwargs):
        for node in list(self.document.findall(addnodes.pending_xref)):
            target = node.get("reftarget", "")
            if node.get("reftype") != "myst" or node.get("refdomain") == "doc" or "://" in target:
                continue
            if not target or target.startswith("#") or not (REPOSITORY / target).exists():
                continue
            page = target.removeprefix("docs/").rsplit(".", 1)[0]
            if target.startswith("docs/") and target.endswith(".md") and page in self.env.all_docs:
                node["refdomain"], node["reftarget"], node["reftargetid"] = "doc", page, None
            else:
                node.replace_self(node[0].deepcopy())


def setup(app):
    app.add_post_transform(RepositoryPathLinks)
