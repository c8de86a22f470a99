"""``tidu.scipy``: the jax.scipy names tidu provides (``tidu.scipy.special``)."""
from __future__ import annotations

from tidu.numpy.scipy import special

__all__ = ["special"]
