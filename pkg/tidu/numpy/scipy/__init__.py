"""``tidu.scipy``: the jax.scipy names tidu provides (``special``, ``stats``, ``linalg``)."""
from __future__ import annotations

from tidu.numpy.scipy import linalg, special, stats

__all__ = ["linalg", "special", "stats"]
