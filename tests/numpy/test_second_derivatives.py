"""First and second derivatives of the elementwise functions at the special points of their rules,
against jax in x64 (issue #28).

A rule is most often wrong where it has a special case: a tie (x == y) for the functions built on
max/min/abs, a zero for the products and powers, equal arguments. There a first derivative can be
right while the derivative of the rule itself (the second derivative) is cut by a select or a
0.5 split. Each row below is evaluated with grad of grad in each argument and, for binary
functions, with jacfwd(jacfwd(f, (0, 1)), (0, 1)) for the mixed partials too.

A row's last field says what it is compared with:

- ``JAX``: jax's answer, to 1e-10 (NaN matches NaN, inf matches inf of the same sign). Where
  jax's value at a non-differentiable point is a convention, the row's comment names it, and
  tidu documents the same one (docs/frontend.md, "Derivative conventions").
- ``Exact(first, second, hess)``: the true values, where jax's own answer is wrong (each such row
  says why).
- ``Differs("reason")``: tidu deliberately differs from jax at this point (docs/frontend.md,
  "What differs from jax on purpose"); the row is kept so that the table lists every point, and
  tidu's documented value is checked instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

import tidu as td
from _support.compare import jax_value

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jax.scipy.special as jss  # noqa: E402


class _Jax:
    def __repr__(self):
        return "JAX"


JAX = _Jax()


@dataclass(frozen=True)
class Exact:
    """The true derivatives: unary (first, second); binary (grad (2,), hessian (2, 2))."""

    first: tuple | float
    second: tuple | float


@dataclass(frozen=True)
class Differs:
    """tidu's documented value differs from jax's; ``first``/``second`` are tidu's values."""

    reason: str
    first: tuple | float
    second: tuple | float


# ---- binary functions: (name, tidu f, jax f, x, y, compare with) ----

def _hyp_hess(x, y):
    r = math.hypot(x, y)
    return ((y * y / r**3, -x * y / r**3), (-x * y / r**3, x * x / r**3))


BINARY = [
    # maximum/minimum at a tie: 0.5 to each argument is a convention, jax's and tidu's
    # (docs/frontend.md); the rule is piecewise constant, so every second derivative is 0.
    ("maximum_tie", td.maximum, jnp.maximum, 0.4, 0.4, JAX),
    ("maximum_tie_0", td.maximum, jnp.maximum, 0.0, 0.0, JAX),
    ("minimum_tie", td.minimum, jnp.minimum, 0.4, 0.4, JAX),
    ("minimum_tie_0", td.minimum, jnp.minimum, 0.0, 0.0, JAX),
    # fmax/fmin are maximum/minimum away from NaN, so tidu splits a tie 0.5/0.5 as for those;
    # jax's fmax is where(x > y, x, y), which hands the whole derivative to y (docs/frontend.md)
    ("fmax_tie", td.fmax, jnp.fmax, 0.4, 0.4,
     Differs("fmax/fmin at a tie: 0.5 to each, as maximum (jax: all to y)",
             (0.5, 0.5), ((0.0, 0.0), (0.0, 0.0)))),
    ("fmin_tie", td.fmin, jnp.fmin, -0.4, -0.4,
     Differs("fmax/fmin at a tie: 0.5 to each, as minimum (jax: all to y)",
             (0.5, 0.5), ((0.0, 0.0), (0.0, 0.0)))),
    ("fmax_apart", td.fmax, jnp.fmax, 0.4, -0.4, JAX),
    # logaddexp is smooth everywhere: at a tie its derivatives are sigmoid's at 0 (issue #28, 4)
    ("logaddexp_tie", td.logaddexp, jnp.logaddexp, 0.4, 0.4, JAX),
    ("logaddexp_tie_0", td.logaddexp, jnp.logaddexp, 0.0, 0.0, JAX),
    ("logaddexp_tie_neg", td.logaddexp, jnp.logaddexp, -3.0, -3.0, JAX),
    ("logaddexp_tie_large", td.logaddexp, jnp.logaddexp, 800.0, 800.0, JAX),
    ("logaddexp_apart", td.logaddexp, jnp.logaddexp, 0.4, -1.1, JAX),
    ("logaddexp_far_apart", td.logaddexp, jnp.logaddexp, 800.0, 0.0, JAX),
    ("logaddexp2_tie", td.logaddexp2, jnp.logaddexp2, 0.4, 0.4, JAX),
    ("logaddexp2_tie_0", td.logaddexp2, jnp.logaddexp2, 0.0, 0.0, JAX),
    ("logaddexp2_apart", td.logaddexp2, jnp.logaddexp2, 0.4, 2.5, JAX),
    # hypot is smooth away from (0, 0), ties included. jax writes it with maximum/minimum, whose
    # 0.5 split makes its second derivatives at |x| == |y| come out 0: compared with the truth.
    ("hypot_tie", td.hypot, jnp.hypot, 0.4, 0.4,
     Exact((1 / math.sqrt(2), 1 / math.sqrt(2)), _hyp_hess(0.4, 0.4))),
    ("hypot_tie_abs", td.hypot, jnp.hypot, 0.4, -0.4,
     Exact((1 / math.sqrt(2), -1 / math.sqrt(2)), _hyp_hess(0.4, -0.4))),
    ("hypot_apart", td.hypot, jnp.hypot, 0.4, -1.5, JAX),
    ("arctan2_tie", td.arctan2, jnp.arctan2, 0.4, 0.4, JAX),
    ("arctan2_tie_neg", td.arctan2, jnp.arctan2, -0.4, -0.4, JAX),
    ("arctan2_y0", td.arctan2, jnp.arctan2, 0.0, 0.7, JAX),
    # power: y = 0 keeps its y-dependence (issue #28, 5); x = 0 as jax's rule
    ("power_y0", td.power, jnp.power, 4.0, 0.0, JAX),
    ("power_y0_small_x", td.power, jnp.power, 0.3, 0.0, JAX),
    ("power_x0_y2", td.power, jnp.power, 0.0, 2.0, JAX),
    ("power_x0_y3", td.power, jnp.power, 0.0, 3.0, JAX),
    ("power_equal", td.power, jnp.power, 1.5, 1.5, JAX),
    ("power_x1", td.power, jnp.power, 1.0, 0.0, JAX),
    # x = y = 0: x**0 == 1 for every x, so tidu keeps d/dx = 0 there (jax's rule for an integer
    # exponent; its float rule gives 0 * inf = nan). Every second derivative there is a limit
    # of log(x) / x terms that diverge; tidu's rules give 0 (log(0) read as log(1), jax's own
    # guard in d/dy), jax's are NaN.
    ("power_x0_y0", td.power, jnp.power, 0.0, 0.0,
     Differs("d/dx 0**y at y = 0 is 0: x**0 is constant (jax's float rule: nan)",
             (0.0, 0.0), ((0.0, 0.0), (0.0, 0.0)))),
    ("multiply_0", lambda x, y: x * y, lambda x, y: x * y, 0.0, 0.0, JAX),
    ("multiply_x0", lambda x, y: x * y, lambda x, y: x * y, 0.0, 0.7, JAX),
    ("multiply_equal", lambda x, y: x * y, lambda x, y: x * y, 0.7, 0.7, JAX),
    ("divide_x0", lambda x, y: x / y, lambda x, y: x / y, 0.0, 0.7, JAX),
    ("divide_equal", lambda x, y: x / y, lambda x, y: x / y, 0.7, 0.7, JAX),
    # (y = 0 is a pole of x / y, not a special case of a rule: not in the table)
    ("add_equal", lambda x, y: x + y, lambda x, y: x + y, 0.7, 0.7, JAX),
    ("subtract_equal", lambda x, y: x - y, lambda x, y: x - y, 0.7, 0.7, JAX),
    # x == y sits on a jump of remainder: jax's rule (x - floor(x / y) * y, floor' = 0) is the
    # convention, and tidu's is the same
    ("remainder_equal", td.remainder, jnp.remainder, 0.7, 0.7, JAX),
    ("fmod_equal", td.fmod, jnp.fmod, 0.7, 0.7, JAX),
]


# ---- unary functions: (name, tidu f, jax f, x, compare with) ----

UNARY = [
    ("abs_0", td.abs, jnp.abs, 0.0,
     Differs("abs'(0) is 0, the midpoint of -1 and 1 (jax: 1)", 0.0, 0.0)),
    ("abs_pos", td.abs, jnp.abs, 0.4, JAX),
    ("maximum_x_negx_0", lambda x: td.maximum(x, -x), lambda x: jnp.maximum(x, -x), 0.0, JAX),
    ("sign_0", td.sign, jnp.sign, 0.0, JAX),
    ("sqrt_0", td.sqrt, jnp.sqrt, 0.0, JAX),  # inf, then -inf
    ("cbrt_0", td.cbrt, jnp.cbrt, 0.0, JAX),  # inf, -inf (was nan: 0 * inf / 0 in the rule)
    ("cbrt_neg", td.cbrt, jnp.cbrt, -3.0, JAX),
    ("square_0", td.square, jnp.square, 0.0, JAX),
    ("power_2_0", lambda x: x**2, lambda x: x**2, 0.0, JAX),
    ("power_3_0", lambda x: x**3, lambda x: x**3, 0.0, JAX),
    ("power_half_0", lambda x: x**0.5, lambda x: x**0.5, 0.0, JAX),
    ("power_0_x0", lambda x: x**0.0, lambda x: x**0.0, 0.0,
     Differs("d/dx x**0.0 at 0 is 0: x**0 is constant (jax's float rule: nan)", 0.0, 0.0)),
    ("power_0_x", lambda x: x**0.0, lambda x: x**0.0, 3.0, JAX),
    ("self_power_1", lambda x: x**x, lambda x: x**x, 1.0, JAX),
    ("reciprocal_1", td.reciprocal, jnp.reciprocal, 1.0, JAX),
    ("exp_0", td.exp, jnp.exp, 0.0, JAX),
    ("exp2_0", td.exp2, jnp.exp2, 0.0, JAX),
    ("expm1_0", td.expm1, jnp.expm1, 0.0, JAX),
    ("log_1", td.log, jnp.log, 1.0, JAX),
    ("log2_1", td.log2, jnp.log2, 1.0, JAX),
    ("log10_1", td.log10, jnp.log10, 1.0, JAX),
    ("log1p_0", td.log1p, jnp.log1p, 0.0, JAX),
    ("sin_0", td.sin, jnp.sin, 0.0, JAX),
    ("cos_0", td.cos, jnp.cos, 0.0, JAX),
    ("tan_0", td.tan, jnp.tan, 0.0, JAX),
    ("tanh_0", td.tanh, jnp.tanh, 0.0, JAX),
    ("arcsin_0", td.arcsin, jnp.arcsin, 0.0, JAX),
    ("arccos_0", td.arccos, jnp.arccos, 0.0, JAX),
    ("arctan_0", td.arctan, jnp.arctan, 0.0, JAX),
    ("sinh_0", td.sinh, jnp.sinh, 0.0, JAX),
    ("cosh_0", td.cosh, jnp.cosh, 0.0, JAX),
    ("arcsinh_0", td.arcsinh, jnp.arcsinh, 0.0, JAX),
    ("arccosh_2", td.arccosh, jnp.arccosh, 2.0, JAX),
    ("arctanh_0", td.arctanh, jnp.arctanh, 0.0, JAX),
    ("erf_0", td.erf, jss.erf, 0.0, JAX),
    ("erfc_0", td.erfc, jss.erfc, 0.0, JAX),
    ("erfinv_0", td.erfinv, jss.erfinv, 0.0, JAX),
    ("deg2rad_0", td.deg2rad, jnp.deg2rad, 0.0, JAX),
    ("rad2deg_0", td.rad2deg, jnp.rad2deg, 0.0, JAX),
    ("angle_0", td.angle, jnp.angle, 0.0, JAX),
    ("floor_0", td.floor, jnp.floor, 0.0, JAX),
    ("ceil_0", td.ceil, jnp.ceil, 0.0, JAX),
    ("round_half", td.round, jnp.round, 0.5, JAX),
    ("trunc_0", td.trunc, jnp.trunc, 0.0, JAX),
    # clip at a bound is maximum/minimum at a tie: 0.5, the convention of both
    ("clip_at_bound", lambda x: td.clip(x, -0.5, 0.7), lambda x: jnp.clip(x, -0.5, 0.7), 0.7, JAX),
    ("nan_to_num_0", td.nan_to_num, jnp.nan_to_num, 0.0, JAX),
    ("sigmoid_0", td.nn.sigmoid, jax.nn.sigmoid, 0.0, JAX),
    ("softplus_0", td.nn.softplus, jax.nn.softplus, 0.0, JAX),
    ("log_sigmoid_0", td.nn.log_sigmoid, jax.nn.log_sigmoid, 0.0, JAX),
    ("silu_0", td.nn.silu, jax.nn.silu, 0.0, JAX),
    ("gelu_0", td.nn.gelu, jax.nn.gelu, 0.0, JAX),
    ("gelu_exact_0", lambda x: td.nn.gelu(x, approximate=False),
     lambda x: jax.nn.gelu(x, approximate=False), 0.0, JAX),
    ("relu_0", td.nn.relu, jax.nn.relu, 0.0, JAX),  # relu'(0) = 0: jax's custom rule and tidu's
    ("relu6_0", td.nn.relu6, jax.nn.relu6, 0.0, JAX),
    ("elu_0", td.nn.elu, jax.nn.elu, 0.0, JAX),
    ("leaky_relu_0", td.nn.leaky_relu, jax.nn.leaky_relu, 0.0, JAX),
    ("logit_half", td.scipy.special.logit, jss.logit, 0.5, JAX),
    # equal arguments: a binary function of (x, x)
    ("maximum_xx", lambda x: td.maximum(x, x), lambda x: jnp.maximum(x, x), 0.4, JAX),
    ("minimum_xx", lambda x: td.minimum(x, x), lambda x: jnp.minimum(x, x), 0.4, JAX),
    ("logaddexp_xx", lambda x: td.logaddexp(x, x), lambda x: jnp.logaddexp(x, x), 0.4, JAX),
    ("logaddexp2_xx", lambda x: td.logaddexp2(x, x), lambda x: jnp.logaddexp2(x, x), 0.4, JAX),
    ("hypot_xx", lambda x: td.hypot(x, x), lambda x: jnp.hypot(x, x), 0.4, JAX),
    ("arctan2_xx", lambda x: td.arctan2(x, x), lambda x: jnp.arctan2(x, x), 0.4, JAX),
    ("multiply_xx_0", lambda x: x * x, lambda x: x * x, 0.0, JAX),
    ("divide_xx", lambda x: x / x, lambda x: x / x, 0.4, JAX),
    ("power_xx", lambda x: x**x, lambda x: x**x, 0.4, JAX),
]


def _close(got, want):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=1e-10, atol=1e-10, equal_nan=True)


def _binary_derivatives(grad, jacfwd, f, x, y):
    """(d/dx, d/dy), (grad of grad in x, in y), jacfwd(jacfwd) over both arguments (a pair of
    pairs: _matrix makes it an array, outside the jax reference's jit)."""
    first = (grad(f, 0)(x, y), grad(f, 1)(x, y))
    second = (grad(grad(f, 0), 0)(x, y), grad(grad(f, 1), 1)(x, y))
    hess = jacfwd(jacfwd(f, (0, 1)), (0, 1))(x, y)
    return first, second, hess


def _matrix(hess):
    return np.asarray([[h for h in row] for row in hess], np.float64)


@pytest.mark.parametrize("row", BINARY, ids=[r[0] for r in BINARY])
def test_binary_second_derivatives_at_special_points(row):
    _, f, g, x, y, want = row
    first, second, hess = _binary_derivatives(td.grad, td.jacfwd, f, x, y)
    hess = _matrix(hess)
    if want is JAX:
        jfirst, jsecond, jhess = jax_value(
            lambda a, b: _binary_derivatives(jax.grad, jax.jacfwd, g, a, b), x, y)
        _close(first, jfirst)
        _close(second, jsecond)
        _close(hess, _matrix(jhess))
    else:  # Exact or Differs: the values tidu documents
        want_hess = np.asarray(want.second)
        _close(first, want.first)
        _close(second, np.diag(want_hess))
        _close(hess, want_hess)
    # the mixed partials agree (where they are defined)
    if np.all(np.isfinite(hess)):
        _close(hess[0, 1], hess[1, 0])


@pytest.mark.parametrize("row", UNARY, ids=[r[0] for r in UNARY])
def test_unary_second_derivatives_at_special_points(row):
    _, f, g, x, want = row
    got = (td.grad(f)(x), td.grad(td.grad(f))(x), td.jacfwd(td.jacfwd(f))(x))
    if want is JAX:
        _close(got, jax_value(lambda v: (jax.grad(g)(v), jax.grad(jax.grad(g))(v),
                                         jax.jacfwd(jax.jacfwd(g))(v)), x))
    else:
        _close(got, (want.first, want.second, want.second))


def test_issue_28_logaddexp_second_derivative_at_a_tie():
    """td.grad(td.grad(lambda a: td.logaddexp(a, 0.4)))(0.4) gave -0.0; jax gives 0.25. The
    maximum/abs formulation's derivative at a == b went through maximum's 0.5 split and abs'(0),
    both constant in a; every order is now taken through one analytic branch."""
    for t, j in [(td.logaddexp, jnp.logaddexp), (td.logaddexp2, jnp.logaddexp2)]:
        got = td.grad(td.grad(lambda a, t=t: t(a, 0.4)))(0.4)
        want = jax_value(jax.grad(jax.grad(lambda a, j=j: j(a, 0.4))), 0.4)
        _close(got, want)
        got3 = td.grad(td.grad(td.grad(lambda a, t=t: t(a, 0.4))))(0.4)
        want3 = jax_value(jax.grad(jax.grad(jax.grad(lambda a, j=j: j(a, 0.4)))), 0.4)
        _close(got3, want3)
    assert td.grad(td.grad(lambda a: td.logaddexp(a, 0.4)))(0.4) == pytest.approx(0.25)
    # reverse over reverse, and an array with ties and non-ties, on both backends
    a = np.array([0.4, -1.0, 3.0, 800.0])
    b = np.array([0.4, 2.0, 3.0, 800.0])
    want = jax_value(jax.hessian(lambda u: jnp.sum(jnp.logaddexp(u, b))), a)
    for backend in ["cpu", "xla"]:
        got = td.jit(td.hessian(lambda u: td.sum(td.logaddexp(u, b))), backend=backend)(a)
        _close(got, want)


def test_issue_28_power_mixed_partials_at_y0_are_symmetric():
    """td.jacfwd(td.jacfwd(td.power, (0, 1)), (0, 1))(4.0, 0.0) gave d2/dxdy = 0 and
    d2/dydx = 0.25; jax gives 0.25 for both (d/dy of y * x**(y - 1) at y = 0 is 1 / x): a select
    on y == 0 in Pow's rule cut the y-dependence of d/dx."""
    got = td.jacfwd(td.jacfwd(td.power, (0, 1)), (0, 1))(4.0, 0.0)
    want = jax_value(jax.jacfwd(jax.jacfwd(jnp.power, (0, 1)), (0, 1)), 4.0, 0.0)
    _close(np.asarray(got), np.asarray(want))
    assert float(got[0][1]) == float(got[1][0]) == pytest.approx(0.25)
    x = np.array([4.0, 0.5, 2.0, 0.0])
    y = np.array([0.0, 0.0, 1.5, 2.0])
    want = jax_value(jax.hessian(lambda u, v: jnp.sum(u**v), (0, 1)), x, y)
    for backend in ["cpu", "xla"]:
        got = td.jit(td.hessian(lambda u, v: td.sum(u**v), (0, 1)), backend=backend)(x, y)
        _close(np.asarray(got), np.asarray(want))
