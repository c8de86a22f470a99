"""Name coverage against jax (issue #32): every public name of jax.numpy, jax.numpy.linalg,
jax.numpy.fft, jax.nn, jax.scipy.special, jax.scipy.linalg, jax.scipy.stats, jax.random and
every public method of jax.Array either exists in tidu (the module of the same path; for methods, on a traced
value) or is listed in docs/numpy.md's "Deliberately absent" section with the reason, and at least
95% of them exist.

What is not counted, by rule (``_excluded``):
- jax.numpy's submodules (``jax.numpy.linalg`` is walked as a module of its own; the
  submodules of jax.scipy.stats, ``norm``, ``t``, ..., and ``jax.nn.initializers`` are counted as
  names);
- dtype objects: scalar types and their abstract categories (``jnp.float32``, ``jnp.floating``);
  the ones whose dtype tidu has must exist all the same (``test_dtype_names_tidu_has``);
- deprecated aliases: names in a module's ``_deprecations`` table (jax warns on their use);
- jax.Array's device, sharding and buffer-lifetime names (``DEVICE_METHODS``): a traced value
  lives in no buffer on no device.

Methods are looked up on a traced value (tidu's Tracer, inside ``td.jit``); what ``td.jit``
returns is a numpy array, with numpy's methods, so it is not walked.

Values and derivatives of the names are checked elsewhere (test_parity_names.py,
test_numpy_extras.py, test_more_names.py, ...); this test checks the vocabulary is complete and
that the documentation's list of what is missing is true: a name listed as absent that tidu has is
a failure too.
"""

from __future__ import annotations

import re
import types
from pathlib import Path

import numpy as np
import pytest

import tidu as td
from _support.markdown import rows, section

pytest.importorskip("jax")
import jax  # noqa: E402
import jax.nn  # noqa: E402
import jax.random  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.numpy.fft  # noqa: E402
import jax.numpy.linalg  # noqa: E402
import jax.scipy.linalg  # noqa: E402
import jax.scipy.special  # noqa: E402
import jax.scipy.stats  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "numpy.md"

# (path under tidu, the jax module, its heading in docs/numpy.md's absent tables)
MODULES = [
    ("", jnp, "jax.numpy"),
    ("linalg", jnp.linalg, "jax.numpy.linalg"),
    ("fft", jnp.fft, "jax.numpy.fft"),
    ("nn", jax.nn, "jax.nn"),
    ("scipy.special", jax.scipy.special, "jax.scipy.special"),
    ("scipy.linalg", jax.scipy.linalg, "jax.scipy.linalg"),
    ("scipy.stats", jax.scipy.stats, "jax.scipy.stats"),
    ("random", jax.random, "jax.random"),
]
METHODS_HEADING = "jax.Array methods"

# jax.Array names about devices, sharding and buffer lifetime: a traced value has none of them
DEVICE_METHODS = {
    "addressable_data", "addressable_shards", "block_until_ready", "committed",
    "copy_to_host_async", "delete", "device", "device_buffer", "device_buffers", "devices",
    "format", "global_shards", "is_deleted", "is_fully_addressable", "is_fully_replicated",
    "is_ready", "on_device_size_in_bytes", "platform", "sharding", "to_device", "traceback",
    "unsafe_buffer_pointer",
}

TD_DTYPES = {np.dtype(d) for d in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128")}


def _public(mod):
    return [n for n in dir(mod) if not n.startswith("_")]


def _is_dtype_object(o) -> bool:
    return isinstance(o, type) and (issubclass(o, np.generic)
                                    or type(o).__name__ == "_ScalarMeta")


def _excluded(mod, name) -> str | None:
    """Why `name` of `mod` is not counted, or None."""
    o = getattr(mod, name)
    if isinstance(o, types.ModuleType) and mod is jnp:
        return "module"
    if _is_dtype_object(o):
        return "dtype object"
    if name in getattr(mod, "_deprecations", {}):
        return "deprecated"
    return None


def _td_module(path):
    m = td
    for p in filter(None, path.split(".")):
        m = getattr(m, p, None)
        if m is None:
            return None
    return m


def _has(obj, name) -> bool:
    try:
        getattr(obj, name)
    except AttributeError:
        return False
    return True


def _tracer_attributes(names) -> set[str]:
    """The names a traced value has (looked up inside a trace)."""
    found: set[str] = set()

    def f(x):
        found.update(n for n in names if _has(x, n))
        return x

    td.jit(f)(np.ones((2, 3)))
    return found


def absent_tables() -> dict[str, dict[str, str]]:
    """docs/numpy.md's "Deliberately absent" section: heading -> {name: reason}. A row's first
    cell holds one or more backquoted names, its second the reason."""
    text = section(DOC, "Deliberately absent")
    tables: dict[str, dict[str, str]] = {
        h[1].strip("` "): {} for h in re.finditer(r"^### (.+?)\s*$", text, re.M)}
    for heading, line, cells in rows(text, "name"):
        if heading is None:
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        assert names and cells[1], f"docs/numpy.md: absent row without a name or reason: {line}"
        for n in names:
            tables[heading][n] = cells[1]
    return tables


def coverage():
    """{heading: (counted names, names tidu has)} for the seven modules and the methods."""
    out = {}
    for path, mod, heading in MODULES:
        counted = [n for n in _public(mod) if _excluded(mod, n) is None]
        tm = _td_module(path)
        have = {n for n in counted if tm is not None and _has(tm, n)}
        out[heading] = (counted, have)
    methods = [n for n in _public(jnp.ones(1)) if n not in DEVICE_METHODS]
    out[METHODS_HEADING] = (methods, _tracer_attributes(methods))
    return out


@pytest.fixture(scope="module")
def cov():
    return coverage()


def test_every_missing_name_is_listed_as_deliberately_absent(cov):
    tables = absent_tables()
    unlisted, stale = [], []
    for heading, (counted, have) in cov.items():
        listed = tables.get(heading, {})
        unlisted += [f"{heading}: {n}" for n in counted if n not in have and n not in listed]
        stale += [f"{heading}: {n}" for n in listed if n in have or n not in counted]
    assert not unlisted, ("missing from tidu and not listed in docs/numpy.md's 'Deliberately "
                          "absent' tables:\n  " + "\n  ".join(unlisted))
    assert not stale, ("listed as absent in docs/numpy.md but tidu has them (or jax has no "
                       "such name to count):\n  " + "\n  ".join(stale))
    assert set(tables) <= set(cov), set(tables) - set(cov)


def test_at_least_95_percent_of_jax_names_exist(cov, capsys):
    total = sum(len(c) for c, _ in cov.values())
    have = sum(len(h) for _, h in cov.values())
    with capsys.disabled():
        for heading, (c, h) in cov.items():
            print(f"\n  {heading}: {len(h)}/{len(c)}", end="")
        print(f"\n  name coverage: {have}/{total} = {have / total:.1%}")
    assert have / total >= 0.95, f"{have}/{total} = {have / total:.1%} of jax's names"


def test_jax_numpy_and_array_methods_at_least_95_percent(cov):
    """The part this branch owns: jax.numpy's names and jax.Array's methods."""
    parts = [cov["jax.numpy"], cov[METHODS_HEADING]]
    total = sum(len(c) for c, _ in parts)
    have = sum(len(h) for _, h in parts)
    assert have / total >= 0.95, f"{have}/{total} = {have / total:.1%}"


def test_dtype_names_tidu_has():
    """The scalar types are not counted, but each one naming a dtype tidu has exists, as that
    dtype (``td.double`` is float64); the abstract categories exist as numpy's."""
    for name in _public(jnp):
        o = getattr(jnp, name)
        if not _is_dtype_object(o):
            continue
        if isinstance(o, type) and issubclass(o, np.generic) and o.__module__ == "numpy":
            assert getattr(td, name, None) is o, name  # np.floating, np.integer, ...
            continue
        dt = np.dtype(o)
        if dt in TD_DTYPES:
            assert hasattr(td, name), name
            assert np.dtype(getattr(td, name)) == dt, (name, getattr(td, name), dt)


def test_the_rule_excludes_what_it_says():
    assert _excluded(jnp, "float32") == "dtype object"
    assert _excluded(jnp, "floating") == "dtype object"
    assert _excluded(jnp, "linalg") == "module"
    assert _excluded(jnp, "add") is None and _excluded(jnp, "ndarray") is None
    assert {"sharding", "device", "devices"} <= DEVICE_METHODS
