"""The named tuples ``td.linalg`` returns, with jax's names and fields (still unpackable as
plain tuples: ``sign, logdet = td.linalg.slogdet(a)``)."""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["EigResult", "EighResult", "QRResult", "SVDResult", "SlogdetResult"]


class SlogdetResult(NamedTuple):
    """``slogdet``'s result: the sign (or phase) and log|det|."""
    sign: Any
    logabsdet: Any


class EigResult(NamedTuple):
    """``eig``'s result: the eigenvalues and the eigenvectors as columns (complex)."""
    eigenvalues: Any
    eigenvectors: Any


class EighResult(NamedTuple):
    """``eigh``'s result: ascending eigenvalues and the eigenvectors as columns."""
    eigenvalues: Any
    eigenvectors: Any


class SVDResult(NamedTuple):
    """``svd``'s result: a = U @ diag(S) @ Vh."""
    U: Any
    S: Any
    Vh: Any


class QRResult(NamedTuple):
    """``qr``'s result: a = Q @ R."""
    Q: Any
    R: Any
