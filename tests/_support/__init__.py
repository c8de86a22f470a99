"""Helpers shared by the test folders (not tests themselves): the forged-file tools, the
primitive x dtype tables of ``values`` and the C++ consumer build.  pytest puts ``tests/`` on
``sys.path`` (``pythonpath`` in pyproject.toml), so every folder imports them as
``from _support import values``."""
