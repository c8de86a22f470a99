"""The errors of grad/vjp where jax has them (issue #28, class 12): each reproducer is run
under jax too, and both must raise the same exception type; tidu's message is matched."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

# (name, tidu reproducer, jax reproducer, exception type, regex for tidu's message)
CASES = [
    # td.grad(f)() with no arguments: jax "requires at least 1 positional arguments"
    ("grad_no_args", lambda: td.grad(lambda: 1.0)(), lambda: jax.grad(lambda: 1.0)(),
     TypeError, r"argnums=0 needs at least 1 positional argument to differentiate, but the "
                r"function was called with 0"),
    ("grad_argnums_past_end", lambda: td.grad(lambda x, y: x, argnums=(0, 2))(1.0, 2.0),
     lambda: jax.grad(lambda x, y: x, argnums=(0, 2))(1.0, 2.0),
     TypeError, r"needs at least 3 positional arguments"),
    # a tuple output without has_aux: jax "Gradient only defined for scalar-output functions"
    ("grad_tuple_output", lambda: td.grad(lambda x: (x, x))(1.0),
     lambda: jax.grad(lambda x: (x, x))(1.0),
     TypeError, r"scalar output.*fn returned a container of 2 values, not a scalar.*"
                r"use has_aux=True"),
    ("grad_one_tuple_output", lambda: td.grad(lambda x: (x,))(1.0),
     lambda: jax.grad(lambda x: (x,))(1.0),
     TypeError, r"fn returned a container of 1 value, not a scalar"),
    ("value_and_grad_list_output", lambda: td.value_and_grad(lambda x: [x, x])(1.0),
     lambda: jax.value_and_grad(lambda x: [x, x])(1.0),
     TypeError, r"container of 2 values.*has_aux=True"),
    ("grad_vector_output", lambda: td.grad(lambda x: x * np.ones(3))(1.0),
     lambda: jax.grad(lambda x: x * jnp.ones(3))(1.0),
     TypeError, r"an output of shape \(3,\), not a scalar"),
    # jax's test_grad_and_aux_error: has_aux=True misused
    ("aux_not_a_pair", lambda: td.grad(lambda x: x * 2.0, has_aux=True)(1.0),
     lambda: jax.grad(lambda x: x * 2.0, has_aux=True)(1.0),
     TypeError, r"has_aux=True requires fn to return a pair \(output, aux\), got a single "
                r"value, not a pair"),
    ("aux_triple", lambda: td.grad(lambda x: (x, x, x), has_aux=True)(1.0),
     lambda: jax.grad(lambda x: (x, x, x), has_aux=True)(1.0),
     TypeError, r"has_aux=True requires fn to return a pair.*a tuple of length 3"),
    ("aux_first_is_tuple", lambda: td.grad(lambda x: ((x, x), x), has_aux=True)(1.0),
     lambda: jax.grad(lambda x: ((x, x), x), has_aux=True)(1.0),
     TypeError, r"the output \(the pair's first element\) is a container of 2 values"),
    ("aux_first_not_scalar",
     lambda: td.grad(lambda x: (x * np.ones(2), x), has_aux=True)(1.0),
     lambda: jax.grad(lambda x: (x * jnp.ones(2), x), has_aux=True)(1.0),
     TypeError, r"an output of shape \(2,\), not a scalar"),
]


@pytest.mark.parametrize("name, tidu_fn, jax_fn, exc, match", CASES, ids=[c[0] for c in CASES])
def test_errors_as_jax(name, tidu_fn, jax_fn, exc, match):
    with pytest.raises(exc):
        jax_fn()
    with pytest.raises(exc, match=match):
        tidu_fn()


@pytest.mark.parametrize("primals, i, dtype", [
    ((np.int32(3),), 0, "int32"),
    ((1.0, np.arange(3)), 1, "int64"),
    ((1.0, (2.0, True)), 1, "bool"),
])
def test_vjp_integer_argument_refused_naming_it(primals, i, dtype):
    """On purpose unlike jax (whose vjp_fn gives float0 cotangents; docs/frontend.md): tidu
    refuses integer/bool primals when vjp is called, naming the argument."""
    def f(*a):
        return sum(td.sum(td.asarray(x, "float64")) for x in jax.tree_util.tree_leaves(a))

    _, jax_vjp = jax.vjp(lambda *a: sum(jnp.sum(jnp.asarray(x, "float64"))
                                        for x in jax.tree_util.tree_leaves(a)), *primals)
    cts = jax_vjp(1.0)
    assert any(getattr(c, "dtype", None) == jax.dtypes.float0
               for c in jax.tree_util.tree_leaves(cts))
    with pytest.raises(TypeError, match=rf"vjp: cannot differentiate with respect to argument "
                                        rf"{i} \(primals\[{i}\]\), of dtype {dtype}.*float0"):
        td.vjp(f, *primals)
    with pytest.raises(TypeError, match=rf"argument {i} \(primals\[{i}\]\), of dtype {dtype}"):
        td.jit(lambda *a: td.vjp(f, *a)[0])(*primals)
