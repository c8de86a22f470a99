"""The jax.lax names that ``td.lax`` leaves out on purpose, each with its reason (docs/lax.md
prints this table; tests/api/test_lax_vocab.py checks it against ``dir(jax.lax)``)."""

from __future__ import annotations

__all__ = ["ABSENT", "message"]

_PRIM = ("jax's primitive objects are internal to jax's tracing machinery; tidu's primitives are "
         "the classes in tidu.ops")

_RAGGED = ("a ragged all-to-all exchanges variable-size blocks between devices; tidu's named "
           "axes serve no all-to-all")
_SENDRECV = ("a point-to-point send/receive pair ordered by effect tokens; tidu has no tokens, "
             "and ppermute gives the same data movement")
_PCAST = ("a cast between jax's varying/invariant manual-axis types (shard_map's vma typing), "
          "which tidu's shard_map does not track")
_TOKEN = "effect tokens: tidu orders its effects itself (docs/evaluator.md)"
_RNG = ("XLA's stateful bit generators: tidu.random is counter-based (threefry keys), as "
        "jax.random")
_JAXINT = "a jax tracing/lowering internal with no meaning outside jax's staging"

ABSENT: dict[str, str] = {
    "scaled_dot": "a block-scaled low-precision (FP8/MX) matmul for accelerators",
    "ragged_all_to_all": _RAGGED,
    "psend": _SENDRECV, "precv": _SENDRECV, "pcast": _PCAST,
    "after_all": _TOKEN, "create_token": _TOKEN,
    "RandomAlgorithm": _RNG, "rng_bit_generator": _RNG, "rng_uniform": _RNG,
    "dce_sink": _JAXINT, "shape_as_value": _JAXINT, "stage": _JAXINT,
}


def message(name: str, served: int) -> str:
    """The AttributeError text for a name ``td.lax`` does not have."""
    why = ABSENT.get(name)
    if why is None and name.endswith("_p"):
        why = _PRIM
    if why is not None:
        return (f"td.lax has no {name!r}: {why} (td.lax serves {served} of jax.lax's names; "
                f"docs/lax.md lists the rest and why)")
    return (f"td.lax has no {name!r} (td.lax serves {served} of jax.lax's names; docs/lax.md "
            f"lists those it leaves out, and most numpy-style names are top-level tidu "
            f"functions, docs/numpy.md)")
