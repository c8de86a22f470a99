"""Sphinx configuration of tidu's API reference (built from the docstrings by autodoc).

Build: ``python -m sphinx -W -b html docs/api build/api`` (needs the ``docs`` extra).
tests/test_docs.py builds it with warnings as errors."""

project = "tidu"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
autodoc_default_options = {"members": False, "undoc-members": False}
autodoc_typehints = "none"        # signatures as written; types are named in the docstrings
napoleon_google_docstring = True
napoleon_numpy_docstring = False
suppress_warnings = ["duplicate_declaration.py"]
html_theme = "alabaster"
exclude_patterns = ["_build"]
