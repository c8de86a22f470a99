"""Parameter parity against jax (issue #32): for every name tidu shares with jax.numpy,
jax.numpy.linalg, jax.numpy.fft, jax.nn, jax.scipy.special, jax.scipy.linalg, jax.scipy.stats
and jax.lax (test_name_coverage.py and tests/api/test_lax_names.py check the names exist),
tidu's function takes jax's parameters the way jax does:
- a parameter jax takes by position or keyword sits at the same position in tidu's signature,
  under the same name, so ``jnp.nansum(a, 0, None, None, True)`` and ``nansum(a, keepdims=True)``
  mean the same in both;
- a keyword-only parameter of jax's is a keyword of tidu's;
- a positional-only parameter of jax's is a position tidu accepts.

What is not checked, by rule (``_exempt``): jax's placement arguments (``device``,
``out_sharding``, ``sharding``: tidu computes on the host, and ``td.jit`` returns numpy arrays),
jax's private parameters (a leading underscore), and ``where``/``out`` of jax's ``ufunc``
objects (jax raises NotImplementedError for them).
Anything else tidu does not take is listed, with the reason, in docs/numpy.md's "Parameters
tidu does not take" table; a listed parameter that tidu takes is a failure too.

Values of the parameters added for parity are checked against jax in
test_parameter_parity_values.py.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import tidu as td
from _support.markdown import rows, section

pytest.importorskip("jax")
import jax  # noqa: E402
import jax.nn  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.numpy.fft  # noqa: E402
import jax.numpy.linalg  # noqa: E402
import jax.scipy.linalg  # noqa: E402
import jax.scipy.special  # noqa: E402
import jax.scipy.stats  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "numpy.md"

PLACEMENT = {"device", "out_sharding", "sharding"}
P = inspect.Parameter


def _pairs():
    """(label, jax namespace, tidu namespace) for every module walked."""
    mods = [("", jnp, td), ("linalg.", jnp.linalg, td.linalg), ("fft.", jnp.fft, td.fft),
            ("nn.", jax.nn, td.nn), ("scipy.special.", jax.scipy.special, td.scipy.special),
            ("scipy.linalg.", jax.scipy.linalg, td.scipy.linalg), ("lax.", jax.lax, td.lax)]
    for name in dir(jax.scipy.stats):
        jm, tm = getattr(jax.scipy.stats, name), getattr(td.scipy.stats, name, None)
        if not name.startswith("_") and inspect.ismodule(jm) and tm is not None:
            mods.append((f"scipy.stats.{name}.", jm, tm))
    return mods


def _signature(f):
    try:
        return inspect.signature(f)
    except (TypeError, ValueError):
        return None


def _exempt(jf, param: str) -> bool:
    if param in PLACEMENT or param.startswith("_"):  # jax's private parameters
        return True
    return isinstance(jf, jnp.ufunc) and param in ("where", "out")


def mismatches() -> dict[str, str]:
    """{"module.name(param)": what differs} over every shared callable."""
    found: dict[str, str] = {}
    for label, jm, tm in _pairs():
        for name in dir(jm):
            if name.startswith("_") or not hasattr(tm, name):
                continue
            jf, tf = getattr(jm, name), getattr(tm, name)
            if inspect.isclass(jf) or inspect.ismodule(jf) or not callable(jf) or not callable(tf):
                continue
            js, ts = _signature(jf), _signature(tf)
            if js is None or ts is None:
                continue
            tps = list(ts.parameters.values())
            var_pos = any(p.kind == P.VAR_POSITIONAL for p in tps)
            var_kw = any(p.kind == P.VAR_KEYWORD for p in tps)
            positional = [p for p in tps if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
            for i, jp in enumerate(js.parameters.values()):
                if jp.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD) or _exempt(jf, jp.name):
                    continue
                key = f"{label}{name}({jp.name})"
                tp = ts.parameters.get(jp.name)
                if jp.kind == P.POSITIONAL_ONLY:
                    if i >= len(positional) and not var_pos:
                        found[key] = f"jax takes it at position {i}; tidu takes {len(positional)}"
                elif jp.kind == P.POSITIONAL_OR_KEYWORD:
                    if tp is None or tp.kind not in (P.POSITIONAL_OR_KEYWORD,):
                        found[key] = "not a positional-or-keyword parameter of tidu's" \
                            if tp is not None else "missing"
                    elif i >= len(positional) or positional[i].name != jp.name:
                        found[key] = (f"jax's position {i}, tidu's "
                                      f"{[p.name for p in positional].index(jp.name)}")
                elif tp is None and not var_kw:  # keyword-only in jax
                    found[key] = "missing"
                elif tp is not None and tp.kind == P.POSITIONAL_ONLY:
                    found[key] = "positional only in tidu, a keyword in jax"
    return found


def listed() -> dict[str, str]:
    """docs/numpy.md's "Parameters tidu does not take" table: {"name(param)": reason}."""
    out: dict[str, str] = {}
    for _, line, cells in rows(section(DOC, "Parameters tidu does not take"), "parameter"):
        keys = re.findall(r"`([^`]+\([^`]+\))`", cells[0])
        assert keys and cells[1], f"docs/numpy.md: a row without a parameter or reason: {line}"
        for k in keys:
            out[k] = cells[1]
    return out


@pytest.fixture(scope="module")
def found():
    return mismatches()


def test_every_parameter_differing_from_jax_is_listed_with_its_reason(found):
    table = listed()
    unlisted = [f"{k}: {v}" for k, v in sorted(found.items()) if k not in table]
    stale = [k for k in table if k not in found]
    assert not unlisted, ("tidu's signature differs from jax's and docs/numpy.md does not say "
                          "why:\n  " + "\n  ".join(unlisted))
    assert not stale, ("listed in docs/numpy.md as a parameter tidu does not take, but it "
                       "takes it as jax does:\n  " + "\n  ".join(stale))


def test_the_walk_sees_the_shared_functions(found):
    """The check must have looked at something: the walk reaches the functions it is about."""
    seen = 0
    for _label, jm, tm in _pairs():
        for name in dir(jm):
            if not name.startswith("_") and hasattr(tm, name) and callable(getattr(tm, name)) \
                    and _signature(getattr(tm, name)) is not None:
                seen += 1
    assert seen > 600, seen
    assert len(found) < 40, sorted(found)
