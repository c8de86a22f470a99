"""``td.lax.linalg``: ``jax.lax.linalg.eig`` (the general eigen-decomposition with its
``enable_eigvec_derivs`` opt-in, docs/linalg.md).  jax.lax.linalg's other names are served as
``td.linalg`` and ``td.scipy.linalg``."""

from __future__ import annotations

from tidu.numpy.linalg.eig import eig_lax as eig

__all__ = ["eig"]


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"td.lax.linalg has no {name!r}: jax.lax.linalg's other names are "
                         f"td.linalg and td.scipy.linalg (docs/linalg.md)")
