"""Sphinx configuration of kue's documentation: Markdown pages (MyST), the furo theme, the API
reference from the docstrings, and the HTTP routes rendered from the OpenAPI document.

Build with ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (CI does, with
warnings as errors)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "kue"
author = "The kue authors"
copyright = "2026, the kue authors"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "kue_routes",
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
# Headings up to ### get GitHub's anchors, so [text](page.md#a-heading) links work as on GitHub.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}

html_theme = "furo"
html_title = "kue"
html_static_path: list[str] = []
