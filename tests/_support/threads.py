"""The interpreter's thread count set for a block of a test."""

from __future__ import annotations

import contextlib

import tidu as td


@contextlib.contextmanager
def threads(n):
    """The interpreter's thread count set to n for the block, then restored."""
    before = td.get_num_threads()
    td.set_num_threads(n)
    try:
        yield
    finally:
        td.set_num_threads(before)
