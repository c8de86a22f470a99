"""``fresnel``: the Fresnel integrals S(x), C(x) as jax writes them (SciPy's C++ port of Cephes'
fresnl.c in float64, Cephes' single-precision ``fresnlf`` tables in float32): the rational series
for x^2 < 2.5625, the auxiliary f/g rationals up to 36974, the leading terms above; odd in x.
sin/cos(pi x^2 / 2) by jax's exact reduction (``sincospisquaredhalf``).  The derivative is jax's
rule, as one op: S' = sin(pi x^2 / 2), C' = cos(pi x^2 / 2)."""

from __future__ import annotations

import numpy as np

from tidu.numpy.core import abs as _abs
from tidu.numpy.core import sin, where
from tidu.numpy.custom_op import call_with_jvp
from tidu.numpy.scipy.special.core import _real
from tidu.numpy.ufuncs import fmod, isinf

__all__ = ["fresnel"]

_SN32 = (+1.647629463788700e-9, -1.522754752581096e-7, +8.424748808502400e-6,
    -3.120693124703272e-4, +7.244727626597022e-3, -9.228055941124598e-2, +5.235987735681432e-1)
_CN32 = (+1.416802502367354e-8, -1.157231412229871e-6, +5.387223446683264e-5,
    -1.604381798862293e-3, +2.818489036795073e-2, -2.467398198317899e-1, +9.999999760004487e-1)
_FN32 = (-1.903009855649792e12, +1.355942388050252e11, -4.158143148511033e9, +7.343848463587323e7,
    -8.732356681548485e5, +8.560515466275470e3, -1.032877601091159e2, +2.999401847870011e0)
_GN32 = (-1.860843997624650e11, +1.278350673393208e10, -3.779387713202229e8, +6.492611570598858e6,
    -7.787789623358162e4, +8.602931494734327e2, -1.493439396592284e1, +9.999841934744914e-1)
_SN64 = (-2.99181919401019853726e3, +7.08840045257738576863e5, -6.29741486205862506537e7,
    +2.54890880573376359104e9, -4.42979518059697779103e10, +3.18016297876567817986e11)
_SD64 = (+1.00000000000000000000e0, +2.81376268889994315696e2, +4.55847810806532581675e4,
    +5.17343888770096400730e6, +4.19320245898111231129e8, +2.24411795645340920940e10,
    +6.07366389490084639049e11)
_CN64 = (-4.98843114573573548651e-8, +9.50428062829859605134e-6, -6.45191435683965050962e-4,
    +1.88843319396703850064e-2, -2.05525900955013891793e-1, +9.99999999999999998822e-1)
_CD64 = (+3.99982968972495980367e-12, +9.15439215774657478799e-10, +1.25001862479598821474e-7,
    +1.22262789024179030997e-5, +8.68029542941784300606e-4, +4.12142090722199792936e-2,
    +1.00000000000000000118e0)
_FN64 = (+4.21543555043677546506e-1, +1.43407919780758885261e-1, +1.15220955073585758835e-2,
    +3.45017939782574027900e-4, +4.63613749287867322088e-6, +3.05568983790257605827e-8,
    +1.02304514164907233465e-10, +1.72010743268161828879e-13, +1.34283276233062758925e-16,
    +3.76329711269987889006e-20)
_FD64 = (+1.00000000000000000000e0, +7.51586398353378947175e-1, +1.16888925859191382142e-1,
    +6.44051526508858611005e-3, +1.55934409164153020873e-4, +1.84627567348930545870e-6,
    +1.12699224763999035261e-8, +3.60140029589371370404e-11, +5.88754533621578410010e-14,
    +4.52001434074129701496e-17, +1.25443237090011264384e-20)
_GN64 = (+5.04442073643383265887e-1, +1.97102833525523411709e-1, +1.87648584092575249293e-2,
    +6.84079380915393090172e-4, +1.15138826111884280931e-5, +9.82852443688422223854e-8,
    +4.45344415861750144738e-10, +1.08268041139020870318e-12, +1.37555460633261799868e-15,
    +8.36354435630677421531e-19, +1.86958710162783235106e-22)
_GD64 = (+1.00000000000000000000e0, +1.47495759925128324529e0, +3.37748989120019970451e-1,
    +2.53603741420338795122e-2, +8.14679107184306179049e-4, +1.27545075667729118702e-5,
    +1.04314589657571990585e-7, +4.60680728146520428211e-10, +1.10273215066240270757e-12,
    +1.38796531259578871258e-15, +8.39158816283118707363e-19, +1.86958710162783236342e-22)


def _polyval(coeffs, x):
    acc = x * 0 + coeffs[0]
    for c in coeffs[1:]:
        acc = acc * x + c
    return acc


def _sincospisquaredhalf(x):
    """sin(pi x^2 / 2) and cos(pi x^2 / 2), reduced exactly (jax's, after SciPy's sinpi)."""
    x = _abs(x)
    s = fmod(x, 2.0)
    r = fmod(s * (x - s / 2), 2.0)
    sinpi = where(r < 0.5, sin(np.pi * r),
                  where(r > 1.5, sin(np.pi * (r - 2.0)), -sin(np.pi * (r - 1.0))))
    cospi = where(r == 0.5, 0.0,
                  where(r < 1.0, -sin(np.pi * (r - 0.5)), sin(np.pi * (r - 1.5))))
    return sinpi, cospi


def _fresnel(xxa):
    single = xxa.dtype == np.float32
    x = _abs(xxa)
    x2 = x * x
    t = x2 * x2
    if single:
        s_small = x * x2 * _polyval(_SN32, t)
        c_small = x * _polyval(_CN32, t)
    else:
        s_small = x * x2 * _polyval(_SN64[:6], t) / _polyval(_SD64[:7], t)
        c_small = x * _polyval(_CN64[:6], t) / _polyval(_CD64[:7], t)
    sinpi, cospi = _sincospisquaredhalf(x)
    if single:
        c_large = s_large = x * 0 + 0.5
    else:
        c_large = 0.5 + 1 / (np.pi * x) * sinpi
        s_large = 0.5 - 1 / (np.pi * x) * cospi
    t = np.pi * x2
    u = 1.0 / (t * t)
    t = 1.0 / t
    if single:
        f = 1.0 - u * _polyval(_FN32, u)
        g = t * _polyval(_GN32, u)
    else:
        f = 1.0 - u * _polyval(_FN64, u) / _polyval(_FD64, u)
        g = t * _polyval(_GN64, u) / _polyval(_GD64, u)
    t = np.pi * x
    c_other = 0.5 + (f * sinpi - g * cospi) / t
    s_other = 0.5 - (f * cospi + g * sinpi) / t
    inf, small, large = isinf(xxa), x2 < 2.5625, x > 36974.0
    s = where(inf, 0.5, where(small, s_small, where(large, s_large, s_other)))
    c = where(inf, 0.5, where(small, c_small, where(large, c_large, c_other)))
    neg = xxa < 0.0
    return [where(neg, -s, s), where(neg, -c, c)]


def _fresnel_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    sinpi, cospi = _sincospisquaredhalf(x)
    return _fresnel_op(x), [sinpi * dx, cospi * dx]


def _fresnel_op(x):
    return call_with_jvp("fresnel", _fresnel, _fresnel_jvp, (), x)


def fresnel(x):
    """``(S(x), C(x))``, as ``jax.scipy.special.fresnel`` (real float32/float64 input; jax's
    accuracy holds in [-10, 10], as its documentation says)."""
    (x,) = _real("fresnel", x)
    s, c = _fresnel_op(x)
    return s, c
