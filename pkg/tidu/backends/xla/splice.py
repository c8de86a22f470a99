"""Lowering a primitive by splicing the StableHLO that jax emits for the same computation.

StableHLO has no LU, eigen, QR or SVD operation: jax lowers ``jax.lax.linalg`` to custom calls
whose targets jaxlib registers (``lapack_dgetrf_ffi`` on CPU, cuSOLVER on GPUs) plus StableHLO
around them.  ``call_jax`` lowers a small jax function over the operands' (batched) types for the
target platform, copies its functions into the module being written as private ``func.func``s
(renamed so that they cannot collide) and ``func.call``s them.  jaxlib compiles the result as it
compiles jax's own programs.  Lowered text is cached per (key, operand types, platform).
"""

from __future__ import annotations

import itertools
import re

import numpy as np

from tidu.backends.xla.hlo import ELEMENT_DTYPE
from tidu.graph.memory import register_cache

__all__ = ["call_jax"]


_cache: dict[tuple, tuple[str, list[str]]] = {}
register_cache("xla_splice", _cache)
_serial = itertools.count()


def _parse_type(ty: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of ``tensor<2x3xf64>``."""
    dims, elem = re.fullmatch(r"tensor<((?:\d+x)*)(.+)>", ty).groups()
    return tuple(int(d) for d in dims.split("x")[:-1]), np.dtype(ELEMENT_DTYPE[elem])


def _functions(text: str) -> list[tuple[str, str]]:
    """(name, text) of each top-level func.func of a printed module."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("  func.func "):
            name = re.search(r"@([\w.$-]+)\(", line).group(1)
            j = i
            while lines[j] != "  }":
                j += 1
            out.append((name, "\n".join(lines[i:j + 1])))
            i = j + 1
        else:
            i += 1
    return out


def _lowered(key: str, fn, arg_types: tuple[str, ...], platform: str) -> tuple[str, list[str]]:
    """(entry name, private function texts) for fn over arg_types on platform."""
    ck = (key, arg_types, platform)
    hit = _cache.get(ck)
    if hit is not None:
        return hit
    import jax  # noqa: PLC0415 - optional dependency, imported on first use

    specs = [jax.ShapeDtypeStruct(*_parse_type(t)) for t in arg_types]
    with jax.enable_x64(True):
        text = jax.jit(fn).trace(*specs).lower(lowering_platforms=(platform,)).as_text()
    prefix = f"tidu_{key}_{next(_serial)}"  # unique after a clear_caches too
    funcs = _functions(text)
    names = {name: (prefix if name == "main" else f"{prefix}_{name}") for name, _ in funcs}
    pattern = re.compile(r"@([\w.$-]+)\b")
    texts = []
    for name, body in funcs:
        body = pattern.sub(lambda mt: "@" + names.get(mt.group(1), mt.group(1)), body)
        body = re.sub(r"^  func\.func (public |private )?", "  func.func private ", body, count=1)
        texts.append(body)
    hit = _cache[ck] = (prefix, texts)
    return hit


def call_jax(lo, out, args, key: str, fn):
    """``func.call`` of fn (a jax function of the operands, batch axes included) lowered for
    lo's platform; returns the result Value (of out's batched type)."""
    entry, texts = _lowered(key, fn, tuple(a.type for a in args), getattr(lo, "platform", "cpu"))
    for t in texts:
        name = re.search(r"@([\w.$-]+)\(", t).group(1)
        lo.funcs.setdefault(name, t)
    return lo.op("func.call", args, out, f"callee = @{entry}")
