"""jax.scipy.special's exponential integrals ``expi``, ``exp1`` and ``expn``: Cephes' ei.c and
expn.c as jax ports them (its constants, pieces and stopping rules), so values agree with jax's
to rounding.  jax's ``jnp.piecewise`` runs one branch per element; here every branch runs on
inputs moved into its own range where it is not chosen, and the last matching condition wins
(as jnp.piecewise).  jax's per-element ``while_loop`` (expn's series and continued fraction) is
one ``td.while_loop`` over the array that updates an element only while its own test holds, so
each element stops where jax's does.  Derivatives are jax's rules (one op each):
``expi' = exp(x) / x``, ``d expn(n, x) / dx = -expn(n - 1, x)`` (none in n, as jax's)."""

from __future__ import annotations

import numpy as np

from tidu.api.control_flow import while_loop
from tidu.graph.dtypes import kind_of
from tidu.numpy import core as _core
from tidu.numpy import sorting as _sorting
from tidu.numpy import ufuncs as _ufuncs
from tidu.numpy.custom_op import call_with_jvp
from tidu.numpy.scipy import special as _special
from tidu.numpy.scipy.special import _real, gammaln

__all__ = ["exp1", "expi", "expn"]

exp, log, where, abs_ = _core.exp, _core.log, _core.where, _core.abs
_MAX_ITER = 100_000  # a bound jax has not; its loops end long before it for finite input

_E1_A = (-5.350447357812542947283e0, 2.185049168816613393830e2, -4.176572384826693777058e3,
           5.541176756393557601232e4, -3.313381331178144034309e5, 1.592627163384945414220e6)
_E1_B = (1.0, -5.250547959112862969197e1, 1.259616186786790571525e3, -1.756549581973534652631e4,
           1.493062117002725991967e5, -7.294949239640527645655e5, 1.592627163384945429726e6)
_E2_A = (1.981808503259689673238e-2, -1.271645625984917501326e0, -2.088160335681228318920e0,
           2.755544509187936721172e0, -4.409507048701600257171e-1, 4.665623805935891391017e-2,
           -1.545042679673485262580e-3, 7.059980605299617478514e-5)
_E2_B = (1.0, 1.476498670914921440652e0, 5.629177174822436244827e-1, 1.699017897879307263248e-1,
           2.291647179034212017463e-2, 4.450150439728752875043e-3, 1.727439612206521482874e-4,
           3.953167195549672482304e-5)
_E3_A = (-1.373215375871208729803e0, -7.084559133740838761406e-1, 1.580806855547941010501e0,
           -2.601500427425622944234e-1, 2.994674694113713763365e-2, -1.038086040188744005513e-3,
           4.371064420753005429514e-5, 2.141783679522602903795e-6)
_E3_B = (1.0, 8.585231423622028380768e-1, 4.483285822873995129957e-1, 7.687932158124475434091e-2,
           2.449868241021887685904e-2, 8.832165941927796567926e-4, 4.590952299511353531215e-4,
           -4.729848351866523044863e-6, 2.665195537390710170105e-6)
_E4_A = (-2.106934601691916512584e0, 1.732733869664688041885e0, -2.423619178935841904839e-1,
           2.322724180937565842585e-2, 2.372880440493179832059e-4, -8.343219561192552752335e-5,
           1.363408795605250394881e-5, -3.655412321999253963714e-7, 1.464941733975961318456e-8,
           6.176407863710360207074e-10)
_E4_B = (1.0, -2.298062239901678075778e-1, 1.105077041474037862347e-1,
           -1.566542966630792353556e-2, 2.761106850817352773874e-3, -2.089148012284048449115e-4,
           1.708528938807675304186e-5, -4.459311796356686423199e-7, 1.394634930353847498145e-8,
           6.150865933977338354138e-10)
_E5_A = (-2.458119367674020323359e-1, -1.483382253322077687183e-1, 7.248291795735551591813e-2,
           -1.348315687380940523823e-2, 1.342775069788636972294e-3, -7.942465637159712264564e-5,
           2.644179518984235952241e-6, -4.239473659313765177195e-8)
_E5_B = (1.0, -1.044225908443871106315e-1, -2.676453128101402655055e-1,
           9.695000254621984627876e-2, -1.601745692712991078208e-2, 1.496414899205908021882e-3,
           -8.462452563778485013756e-5, 2.728938403476726394024e-6, -4.239462431819542051337e-8)
_E6_A = (1.212561118105456670844e-1, -5.823133179043894485122e-1, 2.348887314557016779211e-1,
           -3.040034318113248237280e-2, 1.510082146865190661777e-3, -2.523137095499571377122e-5)
_E6_B = (1.0, -1.002252150365854016662e0, 2.928709694872224144953e-1, -3.337004338674007801307e-2,
           1.560544881127388842819e-3, -2.523137093603234562648e-5)
_E7_A = (-7.657847078286127362028e-1, 6.886192415566705051750e-1, -2.132598113545206124553e-1,
           3.346107552384193813594e-2, -3.076541477344756050249e-3, 1.747119316454907477380e-4,
           -6.103711682274170530369e-6, 1.218032765428652199087e-7, -1.086076102793290233007e-9)
_E7_B = (1.0, -1.888802868662308731041e0, 1.066691687211408896850e0, -2.751915982306380647738e-1,
           3.930852688233823569726e-2, -3.414684558602365085394e-3, 1.866844370703555398195e-4,
           -6.345146083130515357861e-6, 1.239754287483206878024e-7, -1.086076102793126632978e-9)


def _ones(x):
    return _core.broadcast_to(_core.astype(1.0, x.dtype), x.shape)


def _polyval(coeffs, x):
    acc = x * 0 + coeffs[0]
    for c in coeffs[1:]:
        acc = acc * x + c
    return acc


def _expint1(x):  # 0 < x <= 2
    return x * (_polyval(_E1_A, x) / _polyval(_E1_B, x)) + np.euler_gamma + log(x)


def _eval_expint_k(a, b, x):
    w = 1.0 / x
    f = w * (_polyval(a, w) / _polyval(b, w)) + 1.0
    return exp(x) * w * f


_PIECES = [(_E2_A, _E2_B), (_E3_A, _E3_B), (_E4_A, _E4_B), (_E5_A, _E5_B), (_E6_A, _E6_B)]


def _expi_pos(x):
    out = _eval_expint_k(_E7_A, _E7_B, x)  # x > 64 (and jax's default)
    out = where((x > 0) & (x <= 2), _expint1(x), out)
    for i, (a, b) in enumerate(_PIECES, start=1):
        out = where((x > 2.0 ** i) & (x <= 2.0 ** (i + 1)), _eval_expint_k(a, b, x), out)
    return out


def _expi(x):
    neg = x < 0
    return [where(neg, -_expn_op(_ones(x), where(neg, -x, 1.0))[0], _expi_pos(x))]


def _expi_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return _expi_op(x), [exp(x) / x * dx]


def _expi_op(x):
    return call_with_jvp("expi", _expi, _expi_jvp, (), x)


def expi(x):
    """The exponential integral Ei(x) (real input), as ``jax.scipy.special.expi``."""
    (x,) = _real("expi", x)
    return _expi_op(x)[0]


# ---- expn ----

def _masked_loop(active_fn, body_fn, state):
    """jax's per-element while_loop: elements update while active_fn(state) holds for them."""
    def cond(s):
        return (s[0] < _MAX_ITER) & _sorting.any(active_fn(s[1:]))

    def body(s):
        on = active_fn(s[1:])
        new = body_fn(s[1:])
        return (s[0] + 1, *[where(on, a, b) for a, b in zip(new, s[1:])])

    return while_loop(cond, body, (0, *state))[1:]


def _expn1(x, n):  # the power series, 0 < x <= 1
    eps = float(np.finfo(x.dtype).eps)
    one = _ones(x)
    # psi = -euler_gamma - log(x) + sum_{i=1}^{n-1} 1/i
    i, psi = _masked_loop(lambda s: s[0] < n, lambda s: (s[0] + 1.0, s[1] + 1.0 / s[0]),
                          (one, -np.euler_gamma - log(x)))
    del i
    n1 = where(n == 1, 2.0, n)
    z = -x
    ans = where(n == 1, 0.0, 1.0 / (1.0 - n1))

    def body(s):
        xk, yk, pk, ans, _ = s
        xk = xk + 1.0
        yk = yk * z / xk
        pk = pk + 1.0
        ans = ans + where(pk != 0, yk / pk, 0.0)
        return xk, yk, pk, ans, where(ans != 0, abs_(yk / ans), 1.0)

    _, _, _, ans, _ = _masked_loop(lambda s: (x > 0) & (s[4] > eps), body,
                                   (one * 0.0, one, 1.0 - n, ans, one * np.inf))
    return z ** (n - 1.0) * psi / exp(gammaln(n)) - ans


def _expn2(x, n):  # the continued fraction, x > 1
    eps, big = float(np.finfo(x.dtype).eps), 1.44115188075855872e17
    one = _ones(x)

    def body(s):
        k, pkm2, qkm2, pkm1, qkm1, ans, t, r = s
        k = k + 1.0
        odd = k - 2.0 * _ufuncs.floor(k / 2.0) == 1.0
        yk = where(odd, 1.0, x)
        xk = where(odd, n + (k - 1.0) / 2.0, k / 2.0)
        pk = pkm1 * yk + pkm2 * xk
        qk = qkm1 * yk + qkm2 * xk
        nz = qk != 0
        r = where(nz, pk / qk, r)
        t = where(nz, abs_((ans - r) / r), 1.0)
        ans = where(nz, r, ans)
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        is_big = abs_(pk) > big
        pkm2, pkm1, qkm2, qkm1 = (where(is_big, v / big, v) for v in (pkm2, pkm1, qkm2, qkm1))
        return k, pkm2, qkm2, pkm1, qkm1, ans, t, r

    init = (one, one, x, one, x + n, 1.0 / (x + n), one * np.inf, one * 0.0)
    out = _masked_loop(lambda s: (x > 0) & (s[6] > eps), body, init)
    return out[5] * exp(-x)


def _expn3(x, n):  # n >= 5000
    xk = x + n
    yk = 1.0 / (xk * xk)
    ans = yk * n * (6.0 * x * x - 8.0 * n * x + n * n)
    ans = yk * (ans + n * (n - 2.0 * x))
    ans = yk * (ans + n)
    return (ans + 1.0) * exp(-x) / xk


def _expn(n, x):
    conds = [(n < 0) | (x < 0), (x == 0) & (n < 2), (x == 0) & (n >= 2),
             (n == 0) & (x >= 0), n >= 5000, x > 1]
    pick = _ones(x) * 6.0  # the default, the series
    for k, c in enumerate(conds):
        pick = where(c, float(k), pick)  # the last condition that holds wins, as jnp.piecewise
    n1 = where(n == 1, n + n, n)
    on2, on1 = pick == 5, pick == 6
    vals = [x * 0 + np.nan, x * 0 + np.inf, 1.0 / n1, exp(-x) / x, _expn3(x, n),
            _expn2(where(on2, x, 2.0), where(on2, n, 1.0)),
            _expn1(where(on1, x, 0.5), where(on1, n, 1.0))]
    out = vals[6]
    for k in range(6):
        out = where(pick == k, vals[k], out)
    return [out]


def _expn_jvp(primals, tangents):
    (n, x), (_, dx) = primals, tangents
    return _expn_op(n, x), [-_expn_op(n - 1.0, x)[0] * dx]


def _expn_op(n, x):
    return call_with_jvp("expn", _expn, _expn_jvp, (), n, x)


def expn(n, x):
    """The generalized exponential integral E_n(x), as ``jax.scipy.special.expn`` (n real,
    integer-valued; no derivative in n, as jax's)."""
    dt = np.dtype(getattr(x, "dtype", np.float64))
    if isinstance(n, (int, float)) and not isinstance(n, bool) and kind_of(dt) == "f":
        n = np.asarray(n, dt)  # a Python number is weak, as in jax: x's float dtype
    n, x = _real("expn", n, x)
    shape = np.broadcast_shapes(n.shape, x.shape)
    return _expn_op(_core.broadcast_to(n, shape), _core.broadcast_to(x, shape))[0]


def exp1(x):
    """E_1(x) = expn(1, x), as ``jax.scipy.special.exp1``."""
    (x,) = _real("exp1", x)
    return _expn_op(_ones(x), x)[0]


_special._register_loops(expi=expi, exp1=exp1, expn=expn)
