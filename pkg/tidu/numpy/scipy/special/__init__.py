"""``tidu.scipy.special``: jax.scipy.special's functions on traced values: ``core`` (the gamma
and error function families, the normal distribution function, the functions that iterate,
registered by tidu.api.special) and ``more`` (the rest of jax's names built on them)."""

from __future__ import annotations

from tidu.numpy.scipy.special.core import (
    _inexact as _inexact,
)
from tidu.numpy.scipy.special.core import (
    _real as _real,
)
from tidu.numpy.scipy.special.core import (
    _register_loops as _register_loops,
)
from tidu.numpy.scipy.special.core import (
    betainc,
    betaln,
    digamma,
    entr,
    erf,
    erfc,
    erfinv,
    expit,
    gammainc,
    gammaincc,
    gammaln,
    i0,
    i0e,
    i1,
    i1e,
    log_ndtr,
    log_softmax,
    logit,
    logsumexp,
    ndtr,
    ndtri,
    polygamma,
    softmax,
    xlog1py,
    xlogy,
    zeta,
)
from tidu.numpy.scipy.special.fresnel import fresnel
from tidu.numpy.scipy.special.more import (
    bernoulli,
    bessel_jn,
    beta,
    boxcox,
    boxcox1p,
    comb,
    dawsn,
    erfcx,
    exp1,
    expi,
    expn,
    factorial,
    gamma,
    gammasgn,
    hyp1f1,
    hyp2f1,
    kl_div,
    loggamma,
    multigammaln,
    owens_t,
    poch,
    rel_entr,
    spence,
    sph_harm_y,
    wofz,
)
from tidu.numpy.scipy.special.sici import sici

__all__ = ["bernoulli", "bessel_jn", "beta", "betainc", "betaln", "boxcox", "boxcox1p", "comb",
           "dawsn", "digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp1", "expi", "expit",
           "expn", "factorial", "fresnel", "gamma", "gammainc", "gammaincc", "gammaln",
           "gammasgn", "hyp1f1", "hyp2f1", "i0",
           "i0e", "i1", "i1e", "kl_div", "log_ndtr", "log_softmax", "loggamma", "logit",
           "logsumexp", "multigammaln", "ndtr", "ndtri", "owens_t", "poch", "polygamma",
           "rel_entr", "sici", "softmax", "spence", "sph_harm_y", "wofz", "xlog1py", "xlogy",
           "zeta"]
