"""``tidu.scipy``: the jax.scipy names tidu provides (``special``, ``stats``, ``linalg``,
``signal``)."""
from __future__ import annotations

from tidu.numpy.scipy import linalg, signal, special, stats

__all__ = ["linalg", "signal", "special", "stats"]
