"""Sphinx configuration of kernelpath's documentation site (``sphinx-build -W -n docs
docs/_build/html``): MyST pages, numpydoc API pages, a sphinx-gallery of examples and the
benchmark tables generated from ``benchmarks/results/``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402  (docs/generate.py: the pages made from the results)

import kernelpath  # noqa: E402

generate.write_all()

project = "kernelpath"
author = "the kernelpath developers"
copyright = "2026, the kernelpath developers"
release = kernelpath.__version__
version = release

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "_generated", "auto_examples/*.ipynb", "auto_examples/*.py", "**.zip"]
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

autosummary_generate = True
autodoc_typehints = "none"  # the docstrings give the types, with shapes
templates_path = ["_templates"]
autodoc_default_options = {"members": False, "inherited-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
# every public name's docstring is checked (warnings are errors with -W): every parameter
# documented and no others, a summary, known sections in order (the estimators document
# their own parameters before the common ones, so PR03's signature order is not asked)
numpydoc_validation_checks = {"PR01", "PR02", "PR10", "GL02", "GL03", "GL06", "GL07", "SS01"}
# the kernels' block protocol (what the operator calls; docs/design.md, "Kernels") is not
# user API: its methods are listed on the kernel pages but not held to the user API's rules
numpydoc_validation_exclude = {
    r"\.(block|prepare|clip_needed|check_data|widths|set_width|sq_norms|max_feature_weight)$",
    r"\.(width_factor|scaled_by|candidates|resolve|needs_norms|per_feature|distance_based)$",
}

intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable", None),
    "sklearn": ("https://scikit-learn.org/stable", None),
}
# no network on the build machines: the references stay unresolved text there
if os.environ.get("KERNELPATH_DOCS_OFFLINE", "1") == "1":
    intersphinx_mapping = {}

sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "matplotlib_animations": False,
    "reset_modules": ("matplotlib",),
}

html_theme = "pydata_sphinx_theme"
html_title = "kernelpath"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path: list[str] = []
nitpicky = True
# scikit-learn's own docstrings (inherited methods) cite its site's labels
suppress_warnings = ["ref.ref"]
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|np|scipy|sklearn|torch|dask|h5py|zarr|pathlib|typing|os|collections)\..*"),
    (r"py:.*", r"kernelpath\.data\.sources\.RowSource"),  # documented as kernelpath.data.RowSource
    (r"py:.*", r"(array-like|ndarray|array|int|float|str|bool|dict|list|tuple|callable)"),
]
