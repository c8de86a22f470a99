"""``tidu.scipy.special``: jax.scipy.special's elementwise functions on traced values.

Composites of existing primitives, written as jax (or XLA, for its ``lgamma``/``digamma``
kernels) writes them, so values agree with jax's to rounding:

- ``gammaln`` is the primitive ``ops.Lgamma`` (XLA:CPU's kernel, float32 bit for bit as jax's),
  its derivative ``digamma``; ``digamma`` is XLA's Lanczos approximation (g = 7, nine
  coefficients) with Euler's reflection below 1/2, its derivative that of the approximation
  (jax's is ``polygamma(1, .)``: the two agree to about 1e-12 relative).
- ``ndtri`` is Cephes' piecewise rational approximation, ``log_ndtr`` jax's three segments
  (``log(ndtr)``, ``-ndtr(-x)`` above 8, the asymptotic series below -20 in float64).
- ``xlogy``/``xlog1py`` give 0 where ``x == 0`` and their derivative in ``x`` there is
  ``log(y)`` where ``y > 0`` (jax's); where ``x == 0`` and ``y <= 0`` it is 0 (jax: -inf or NaN).
"""

from __future__ import annotations

import math

import numpy as np

from tidu.graph.dtypes import kind_of
from tidu.numpy.core import abs as _abs
from tidu.numpy.core import broadcast_to, cos, exp, log, log1p, maximum, minimum, sin, sqrt, where
from tidu.numpy.nn import log_softmax, logsumexp, softmax
from tidu.numpy.nn import sigmoid as _sigmoid
from tidu.numpy.ufuncs import erf, erfc, erfinv, floor
from tidu.ops import Lgamma
from tidu.trace.tracer import Tracer, _emit, _promote, _trace_of

__all__ = ["betainc", "betaln", "digamma", "entr", "erf", "erfc", "erfinv", "expit", "gammainc",
           "gammaincc", "gammaln", "i0", "i0e", "i1", "i1e", "log_ndtr", "log_softmax", "logit",
           "logsumexp", "ndtr", "ndtri", "polygamma", "softmax", "xlog1py", "xlogy", "zeta"]

# ---- functions that iterate (tidu.api.special: they need td.while_loop and td.custom_jvp,
# which live in the api layer, so it registers them here when tidu is imported) ----

_LOOPS: dict = {}


def _register_loops(**fns) -> None:
    _LOOPS.update(fns)


def _loop(name: str):
    try:
        return _LOOPS[name]
    except KeyError:
        raise RuntimeError(f"{name}: tidu.api.special is not loaded (import tidu)") from None


def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x) (jax's algorithm and
    derivatives: tidu.api.special)."""
    return _loop("igamma")(a, x)


def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return _loop("igammac")(a, x)


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b); differentiable in x."""
    return _loop("betainc")(a, b, x)


def i0e(x):
    """exp(-|x|) I0(x)."""
    return _loop("i0e")(x)


def i1e(x):
    """exp(-|x|) I1(x)."""
    return _loop("i1e")(x)


def i0(x):
    """The modified Bessel function of the first kind, order 0."""
    (x,) = _real("i0", x)
    return _loop("i0e")(x) * exp(_abs(x))


def i1(x):
    """The modified Bessel function of the first kind, order 1."""
    (x,) = _real("i1", x)
    return _loop("i1e")(x) * exp(_abs(x))


def zeta(x, q=None):
    """The Hurwitz zeta function (jax requires q; so does tidu)."""
    if q is None:
        raise NotImplementedError("zeta: the Riemann zeta function (q=None) is not supported; "
                                  "pass q=1.0")
    return _loop("zeta")(x, q)


def polygamma(n, x):
    """The n-th derivative of digamma; n of an integer dtype (as jax's), >= 0."""
    dt = n.dtype if hasattr(n, "dtype") else np.asarray(n).dtype
    if kind_of(dt) not in "iu":
        raise ValueError(f"polygamma: n must be of an integer dtype, got {dt} (jax's rule; "
                         f"td.lax.polygamma takes floats)")
    return _loop("polygamma")(n, x)



def _inexact(*xs) -> list[Tracer]:
    """Lift to one float dtype (jax's lattice, then to_inexact_dtype: int32 and bool become
    float32, int64 float64), numpy-broadcast."""
    t = _trace_of(*xs)
    lifted = _promote("scipy.special", t, *xs, min_dtype=True)
    shape = np.broadcast_shapes(*[x.shape for x in lifted])
    return [broadcast_to(x, shape) for x in lifted]


def _real(name, *xs):
    out = _inexact(*xs)
    if kind_of(out[0].dtype) == "c":
        raise TypeError(f"{name}: complex input is not supported (jax's {name} takes real "
                        f"float32/float64 only), got {out[0].dtype}")
    return out


def expit(x):
    """1 / (1 + exp(-x)); bool and integer input in jax's to_inexact_dtype (jax.nn.sigmoid
    refuses them, jax.scipy.special.expit promotes)."""
    (x,) = _inexact(x)
    return _sigmoid(x)


def logit(x):
    """log(x / (1 - x)), the inverse of expit."""
    (x,) = _real("logit", x)
    return log(x / (1 - x))


# ---- gamma family (XLA's Lanczos approximation) ----

_LANCZOS_G = 7.0
_LANCZOS_BASE = 0.99999999999980993227684700473478
_LANCZOS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283,
            771.3234287776530788486528258894, -176.61502916214059906584551354,
            12.507343278686904814458936853, -0.13857109526572011689554706,
            9.984369578019570859563e-6, 1.50563273514931155834e-7)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def gammaln(x):
    """log|Gamma(x)| (jax.scipy.special.gammaln, jax.lax.lgamma): +inf at the poles 0, -1, -2,
    ... and at +-inf, NaN for NaN.  One primitive (ops.Lgamma), XLA:CPU's kernel: float32
    values are jax's to the bit."""
    (x,) = _real("gammaln", x)
    return _emit(x._t, Lgamma(), x)


def digamma(x):
    """d/dx log Gamma(x) (jax.scipy.special.digamma): NaN at 0 and the negative integers."""
    (x,) = _real("digamma", x)
    reflect = x < 0.5
    z = where(reflect, -x, x - 1)
    num = 0.0
    den = _LANCZOS_BASE
    for i, c in enumerate(_LANCZOS):
        zi = z + (i + 1)
        num = num - c / (zi * zi)
        den = den + c / zi
    t = z + (_LANCZOS_G + 0.5)
    log_t = math.log(_LANCZOS_G + 0.5) + log1p(z / (_LANCZOS_G + 0.5))
    y = log_t + num / den - _LANCZOS_G / t
    xr = where(reflect, x, 0.25)
    reduced = xr + _abs(floor(xr + 0.5))
    reflection = y - math.pi * cos(math.pi * reduced) / sin(math.pi * reduced)
    out = where(reflect, reflection, y)
    return where((x <= 0) & (x == floor(x)), np.nan, out)


def _algdiv(a, b):
    """log(Gamma(b) / Gamma(a + b)) for b >= 8 and a <= b (cdflib's algdiv, as jax's)."""
    c0, c1, c2 = 0.833333333333333e-01, -0.277777777760991e-02, 0.793650666825390e-03
    c3, c4, c5 = -0.595202931351870e-03, 0.837308034031215e-03, -0.165322962780713e-02
    h = a / b
    c = h / (1 + h)
    x = h / (1 + h)
    d = b + (a - 0.5)
    x2 = x * x
    s3 = 1.0 + (x + x2)
    s5 = 1.0 + (x + x2 * s3)
    s7 = 1.0 + (x + x2 * s5)
    s9 = 1.0 + (x + x2 * s7)
    s11 = 1.0 + (x + x2 * s9)
    t = (1.0 / b) * (1.0 / b)
    w = ((((c5 * s11 * t + c4 * s9) * t + c3 * s7) * t + c2 * s5) * t + c1 * s3) * t + c0
    w = w * (c / b)
    u = d * log1p(a / b)
    v = a * (log(b) - 1.0)
    return where(u <= v, (w - v) - u, (w - u) - v)


def betaln(a, b):
    """log|B(a, b)|, as jax's: gammaln(a) + gammaln(b) - gammaln(a + b) while the larger
    argument is below 8, cdflib's ``algdiv`` series above (accurate for large arguments)."""
    a, b = _real("betaln", a, b)
    a, b = minimum(a, b), maximum(a, b)
    small_b = gammaln(a) + (gammaln(b) - gammaln(a + b))
    large_b = gammaln(a) + _algdiv(a, b)
    return where(b < 8, small_b, large_b)


# ---- x log y ----

def xlogy(x, y):
    """x * log(y), 0 where x == 0 (unless y is NaN)."""
    x, y = _real("xlogy", x, y)
    bad = (x == 0) & (y <= 0)
    return where(bad, 0.0, x * log(where(bad, 1.0, y)))


def xlog1py(x, y):
    """x * log1p(y), 0 where x == 0 (unless y is NaN)."""
    x, y = _real("xlog1py", x, y)
    bad = (x == 0) & (y <= -1)
    return where(bad, 0.0, x * log1p(where(bad, 0.0, y)))


def entr(x):
    """-x log x for x > 0, 0 at 0, -inf for x < 0."""
    (x,) = _real("entr", x)
    pos = x > 0
    safe = where(pos, x, 1.0)
    return where(x < 0, -np.inf, where(pos, -(safe * log(safe)), -(x * 0)))


# ---- the normal distribution function ----

def ndtr(x):
    """The standard normal CDF, 0.5 * erfc(-x / sqrt 2) computed as jax's."""
    (x,) = _real("ndtr", x)
    half_sqrt_2 = 0.5 * math.sqrt(2.0)
    w = x * half_sqrt_2
    z = _abs(w)
    y = where(z < half_sqrt_2, 1 + erf(w), where(w > 0, 2 - erfc(z), erfc(z)))
    return 0.5 * y


_NDTRI_P0 = (-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
             1.39312609387279679503E1, -1.23916583867381258016E0)
_NDTRI_Q0 = (1.0, 1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
             -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
             1.59056225126211695515E1, -1.18331621121330003142E0)
_NDTRI_P1 = (4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
             4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
             -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4)
_NDTRI_Q1 = (1.0, 1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
             1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
             -3.80806407691578277194E-2, -9.33259480895457427372E-4)
_NDTRI_P2 = (3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
             1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
             3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9)
_NDTRI_Q2 = (1.0, 6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
             2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
             2.89247864745380683936E-6, 6.79019408009981274425E-9)


def _polyval(coeffs, x):
    acc = x * 0 + coeffs[0]
    for c in coeffs[1:]:
        acc = acc * x + c
    return acc


def ndtri(p):
    """The inverse of ndtr (Cephes' piecewise rational approximation, as jax's); -inf at 0,
    +inf at 1, NaN outside [0, 1]."""
    (p,) = _real("ndtri", p)
    mcp = where(p > -math.expm1(-2.0), 1 - p, p)
    mcp = where(mcp == 0, 0.5, mcp)
    w = mcp - 0.5
    ww = w * w
    x_big = w + w * ww * (_polyval(_NDTRI_P0, ww) / _polyval(_NDTRI_Q0, ww))
    x_big = x_big * -math.sqrt(2 * math.pi)
    z = sqrt(-2.0 * log(mcp))
    first = z - log(z) / z
    rz = 1 / z
    x_small = first - _polyval(_NDTRI_P2, rz) / _polyval(_NDTRI_Q2, rz) / z
    x_other = first - _polyval(_NDTRI_P1, rz) / _polyval(_NDTRI_Q1, rz) / z
    x = where(mcp > math.exp(-2.0), x_big, where(z >= 8.0, x_small, x_other))
    x = where(p > 1 - math.exp(-2.0), x, -x)
    return where(p == 0, -np.inf, where(p == 1, np.inf, x))


def _double_factorial(n: int) -> int:
    return int(np.prod(np.arange(n, 1, -2))) if n > 1 else 1


def log_ndtr(x, series_order: int = 3):
    """log(ndtr(x)), accurate in both tails (jax's segments and asymptotic series)."""
    (x,) = _real("log_ndtr", x)
    series_order = int(series_order)
    if series_order < 0 or series_order > 30:
        raise ValueError(f"log_ndtr: series_order must be in [0, 30], got {series_order}")
    if x.dtype == np.float64:
        lower, upper = -20.0, 8.0
    else:
        lower, upper = -10.0, 5.0
    above = x > upper
    mid = (x > lower) & ~above
    # each branch on an input kept inside its own segment, so that the others' infinities do
    # not reach the derivative through `where`
    nd_above = ndtr(-where(above, x, upper))
    nd_mid = ndtr(where(mid, x, 0.0))
    xl = where(x <= lower, x, lower)
    x2 = xl * xl
    log_scale = -0.5 * x2 - log(-xl) - _LOG_SQRT_2PI
    series = 1.0 + xl * 0
    x2n = x2
    for n in range(1, series_order + 1):
        y = _double_factorial(2 * n - 1) / x2n
        series = series - y if n % 2 else series + y
        x2n = x2n * x2
    low = log_scale + log(series)
    return where(above, -nd_above, where(mid, log(nd_mid), low))

