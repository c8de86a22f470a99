"""``sici``: the sine and cosine integrals Si(x), Ci(x) as jax ports Cephes' sici.c: the rational
series for |x| <= 4, the two asymptotic rationals (f, g) for 4 < |x| <= 1e9 and the leading terms
above; Si odd, Ci NaN at -inf (jax's pieces and special cases; every piece is computed and the
one that applies chosen).  The derivative is jax's rule, as one op: Si' = sinc(x / pi),
Ci' = cos(x) / x."""

from __future__ import annotations

import numpy as np

from tidu.numpy.core import abs as _abs
from tidu.numpy.core import cos, log, sign, sin, where
from tidu.numpy.custom_op import call_with_jvp
from tidu.numpy.scipy.special.core import _real

__all__ = ["sici"]

_SN = (-8.39167827910303881427E-11, 4.62591714427012837309E-8, -9.75759303843632795789E-6,
    9.76945438170435310816E-4, -4.13470316229406538752E-2, 1.00000000000000000302E0)
_SD = (2.03269266195951942049E-12, 1.27997891179943299903E-9, 4.41827842801218905784E-7,
    9.96412122043875552487E-5, 1.42085239326149893930E-2, 9.99999999999999996984E-1)
_CN = (2.02524002389102268789E-11, -1.35249504915790756375E-8, 3.59325051419993077021E-6,
    -4.74007206873407909465E-4, 2.89159652607555242092E-2, -1.00000000000000000080E0)
_CD = (4.07746040061880559506E-12, 3.06780997581887812692E-9, 1.23210355685883423679E-6,
    3.17442024775032769882E-4, 5.10028056236446052392E-2, 4.00000000000000000080E0)
_FN4 = (4.23612862892216586994E0, 5.45937717161812843388E0, 1.62083287701538329132E0,
    1.67006611831323023771E-1, 6.81020132472518137426E-3, 1.08936580650328664411E-4,
    5.48900223421373614008E-7)
_FD4 = (1, 8.16496634205391016773E0, 7.30828822505564552187E0, 1.86792257950184183883E0,
    1.78792052963149907262E-1, 7.01710668322789753610E-3, 1.10034357153915731354E-4,
    5.48900252756255700982E-7)
_GN4 = (8.71001698973114191777E-2, 6.11379109952219284151E-1, 3.97180296392337498885E-1,
    7.48527737628469092119E-2, 5.38868681462177273157E-3, 1.61999794598934024525E-4,
    1.97963874140963632189E-6, 7.82579040744090311069E-9)
_GD4 = (1, 1.64402202413355338886E0, 6.66296701268987968381E-1, 9.88771761277688796203E-2,
    6.22396345441768420760E-3, 1.73221081474177119497E-4, 2.02659182086343991969E-6,
    7.82579218933534490868E-9)
_FN8 = (4.55880873470465315206E-1, 7.13715274100146711374E-1, 1.60300158222319456320E-1,
    1.16064229408124407915E-2, 3.49556442447859055605E-4, 4.86215430826454749482E-6,
    3.20092790091004902806E-8, 9.41779576128512936592E-11, 9.70507110881952024631E-14)
_FD8 = (1.0, 9.17463611873684053703E-1, 1.78685545332074536321E-1, 1.22253594771971293032E-2,
    3.58696481881851580297E-4, 4.92435064317881464393E-6, 3.21956939101046018377E-8,
    9.43720590350276732376E-11, 9.70507110881952025725E-14)
_GN8 = (6.97359953443276214934E-1, 3.30410979305632063225E-1, 3.84878767649974295920E-2,
    1.71718239052347903558E-3, 3.48941165502279436777E-5, 3.47131167084116673800E-7,
    1.70404452782044526189E-9, 3.85945925430276600453E-12, 3.14040098946363334640E-15)
_GD8 = (1.0, 1.68548898811011640017E0, 4.87852258695304967486E-1, 4.67913194259625806320E-2,
    1.90284426674399523638E-3, 3.68475504442561108162E-5, 3.57043223443740838771E-7,
    1.72693748966316146736E-9, 3.87830166023954706752E-12, 3.14040098946363335242E-15)


def _polyval(coeffs, x):
    acc = x * 0 + coeffs[0]
    for c in coeffs[1:]:
        acc = acc * x + c
    return acc


def _series(x):  # 0 <= x <= 4
    t = x * x
    si = where(x == 0, 0.0, x * _polyval(_SN, t) / _polyval(_SD, t))
    ci = where(x == 0, -np.inf,
               np.euler_gamma + log(x) + t * _polyval(_CN, t) / _polyval(_CD, t))
    return si, ci


def _asympt(x):  # 4 < x <= 1e9
    s, c, z = sin(x), cos(x), 1.0 / (x * x)
    small = x < 8.0
    f = where(small, _polyval(_FN4, z) / (x * _polyval(_FD4, z)),
              _polyval(_FN8, z) / (x * _polyval(_FD8, z)))
    g = where(small, z * _polyval(_GN4, z) / _polyval(_GD4, z),
              z * _polyval(_GN8, z) / _polyval(_GD8, z))
    return np.pi / 2 - f * c - g * s, f * s - g * c


def _approx(x):  # x > 1e9
    si = where(x == np.inf, np.pi / 2, np.pi / 2 - cos(x) / x)
    ci = where(x == np.inf, 0.0, sin(x) / x)
    return si, ci


def _sici(x):
    ax = _abs(x)
    s1, c1 = _series(ax)
    s2, c2 = _asympt(ax)
    s3, c3 = _approx(ax)
    first, second = ax <= 4, (ax > 4) & (ax <= 1e9)
    si = where(first, s1, where(second, s2, s3))
    ci = where(first, c1, where(second, c2, c3))
    return [sign(x) * si, where(x == -np.inf, np.nan, ci)]


def _sici_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    sinc = where(x == 0, 1.0, sin(x) / where(x == 0, 1.0, x))
    return _sici_op(x), [sinc * dx, cos(x) / x * dx]


def _sici_op(x):
    return call_with_jvp("sici", _sici, _sici_jvp, (), x)


def sici(x):
    """``(Si(x), Ci(x))``, as ``jax.scipy.special.sici`` (real input)."""
    (x,) = _real("sici", x)
    si, ci = _sici_op(x)
    return si, ci
