"""Sphinx configuration of statekit's documentation site (``make docs``).

Built offline: no intersphinx, no remote images, no CDN. Generated pages (the REST API from
the OpenAPI schema, the layer table from ``tests/project/test_layers.py``, the notebooks list,
the API reference stubs) are written under ``docs/_generated/`` at build time by
``_ext/statekit_docs``.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT), str(DOCS / "_ext")]

project = "statekit"
author = "statekit contributors"
copyright = "statekit contributors"
release = version = "0.1.0"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "statekit_docs",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "_generated/*.md", "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]

# --- MyST ---------------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3  # "#the-changelog-topic" anchors, as GitHub makes them

# --- API reference from docstrings ----------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_member_order = "bysource"
autodoc_preserve_defaults = True
# statekit has no "# type:" comments; looking for them read every function's source again
# (4 % of a profiled build). Sphinx 9 has the option; older ones ignore it.
autodoc_use_type_comments = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_attr_annotations = True
napoleon_use_ivar = True  # "Attributes:" as fields of the class (members are documented once)
nitpicky = False

# --- HTML -------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "statekit"
html_static_path: list[str] = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "icon_links": [],  # no remote icons or links
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_copy_source = False
html_show_sourcelink = False
html_sidebars = {"**": ["sidebar-nav-bs"]}

# --- offline --------------------------------------------------------------------------------
intersphinx_mapping: dict = {}
# bench/README.md (included as is) steps from "##" to "####" in places
suppress_warnings = ["myst.header"]
