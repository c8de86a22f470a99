"""``td.scipy.stats.gaussian_kde``: jax's Gaussian kernel density estimator (its formulas: the
weighted covariance scaled by Scott's or Silverman's factor, the whitened kernel sums, Cholesky
convolutions for ``integrate_gaussian``/``integrate_kde``, ``ndtr`` for ``integrate_box_1d``, and
``resample`` by ``choice`` plus ``multivariate_normal`` on a td.random key).  It lives with the
random numbers because ``resample`` draws; importing it puts the class on ``td.scipy.stats``.

The object is a pytree (dataset, weights, neff, covariance, inv_cov), so it enters and leaves
``td.jit`` as jax's does.  Built from concrete data, its methods run through ``td.jit`` (as
jax's run eagerly); inside a trace they trace."""

from __future__ import annotations

import math

import numpy as np

import tidu as td
from tidu.graph.dtypes import kind_of
from tidu.numpy.scipy import stats as _stats
from tidu.random.distributions import choice, multivariate_normal
from tidu.random.keys import split

__all__ = ["gaussian_kde"]


def _traced(*xs) -> bool:
    return any(isinstance(x, td.Tracer) for x in xs)


def _run(fn, *args, static=()):
    """fn(*args) in a trace: directly inside one, through td.jit outside."""
    if _traced(*args):
        return fn(*args)
    return td.jit(fn, static_argnums=static)(*args)


def _stats_of(dataset, weights, factor):
    cov = td.atleast_2d(td.cov(dataset, rowvar=True, bias=False, aweights=weights))
    inv = td.linalg.inv(cov)
    return cov * factor ** 2, inv / factor ** 2


@td.tree_util.register_pytree_node_class
class gaussian_kde:  # noqa: N801  (jax's name)
    """Gaussian kernel density estimator, as ``jax.scipy.stats.gaussian_kde``: dataset (n,) or
    (d, n); bw_method None/'scott', 'silverman', a scalar or a callable of the estimator;
    optional weights (n,)."""

    __slots__ = ("neff", "dataset", "weights", "covariance", "inv_cov")

    def __init__(self, dataset, bw_method=None, weights=None):
        dataset = _run(lambda x: td.atleast_2d(td.asarray(x)), dataset)
        if dataset.dtype.kind == "c":
            raise NotImplementedError("gaussian_kde does not support complex data")
        if not dataset.size > 1:
            raise ValueError("`dataset` input should have multiple elements.")
        d, n = dataset.shape
        if kind_of(dataset.dtype) != "f":
            dataset = _run(lambda x: td.astype(x, np.float64), dataset)
        if weights is not None:
            if np.ndim(weights) > 1:
                raise ValueError("`weights` input should be one-dimensional.")
            if np.shape(weights) != (n,):
                raise ValueError("`weights` input should be of length n")
            dt = np.result_type(dataset.dtype, np.asarray(weights).dtype
                                if not _traced(weights) else weights.dtype)
            if kind_of(dt) != "f":
                dt = np.dtype(np.float64)
            dataset, weights = _run(lambda x, w: (td.astype(x, dt),
                                                  td.astype(w, dt) / td.sum(w)), dataset, weights)
        else:
            weights = _run(lambda x: td.full(n, 1.0 / n, dtype=x.dtype), dataset)
        neff = _run(lambda w: 1 / td.sum(w ** 2), weights)
        self._set(neff=neff, dataset=dataset, weights=weights, covariance=None, inv_cov=None)
        bw = "scott" if bw_method is None else bw_method
        if isinstance(bw, str) and bw == "scott":
            factor = _run(lambda e: e ** (-1.0 / (d + 4)), neff)
        elif isinstance(bw, str) and bw == "silverman":
            factor = _run(lambda e: (e * (d + 2) / 4.0) ** (-1.0 / (d + 4)), neff)
        elif np.isscalar(bw) and not isinstance(bw, str):
            factor = bw
        elif callable(bw):
            factor = bw(self)
        else:
            raise ValueError("`bw_method` should be 'scott', 'silverman', a scalar, or a "
                             "callable.")
        cov, inv = _run(_stats_of, dataset, weights, factor)
        self._set(covariance=cov, inv_cov=inv)

    def _set(self, **kw):
        for k, v in kw.items():
            object.__setattr__(self, k, v)

    def tree_flatten(self):
        return (self.neff, self.dataset, self.weights, self.covariance, self.inv_cov), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        del aux_data
        kde = cls.__new__(cls)
        kde._set(**dict(zip(cls.__slots__, children)))
        return kde

    @property
    def d(self):
        return self.dataset.shape[0]

    @property
    def n(self):
        return self.dataset.shape[1]

    def _reshape_points(self, points):
        arr = points if _traced(points) else np.asarray(points)
        if arr.dtype.kind == "c":
            raise NotImplementedError("gaussian_kde does not support complex coordinates")
        shape = (1,) * max(0, 2 - arr.ndim) + tuple(arr.shape)
        d, m = shape[0], shape[1]
        if d != self.d and not (d == 1 and m == self.d):
            raise ValueError(f"points have dimension {d}, dataset has dimension {self.d}")
        return (self.d, m if d == self.d else 1)

    def _kernel(self, points, in_log: bool):
        shape = self._reshape_points(points)

        def f(kde, x):
            x = td.reshape(td.atleast_2d(x), shape)
            return _kernel_eval(in_log, kde.dataset.T, kde.weights[:, None], x.T,
                                kde.inv_cov)[:, 0]

        return _run(f, self, points)

    def evaluate(self, points):
        """The density at points (d, m) (or (m,) when d == 1)."""
        return self._kernel(points, False)

    __call__ = evaluate

    def pdf(self, x):
        """The probability density function (``evaluate``)."""
        return self.evaluate(x)

    def logpdf(self, x):
        """The log density, by logsumexp over the kernels."""
        return self._kernel(x, True)

    def integrate_gaussian(self, mean, cov):
        """The integral of the density times a Gaussian of (mean, cov)."""
        d = self.d
        if np.size(mean) != d:
            raise ValueError(f"mean does not have dimension {d}")
        cshape = tuple(cov.shape if _traced(cov) else np.shape(cov))
        if (1,) * max(0, 2 - len(cshape)) + cshape != (d, d):
            raise ValueError(f"covariance does not have dimension {d}")

        def f(kde, mean, cov):
            mean = td.reshape(mean, (d,))
            cov = td.reshape(cov, (d, d))
            chol = td.scipy.linalg.cho_factor(kde.covariance + cov)
            norm = 1.0 / (math.sqrt(2 * np.pi) ** d * td.prod(td.diag(chol[0])))
            return _convolve(chol, norm, kde.dataset, kde.weights, mean)

        return _run(f, self, mean, cov)

    def integrate_box_1d(self, low, high):
        """The integral of a one-dimensional density over [low, high]."""
        if self.d != 1:
            raise ValueError("integrate_box_1d() only handles 1D pdfs")
        if np.ndim(low) != 0 or np.ndim(high) != 0:
            raise ValueError("the limits of integration in integrate_box_1d must be scalars")

        def f(kde, low, high):
            sigma = td.squeeze(td.sqrt(kde.covariance))
            lo = td.squeeze((low - kde.dataset) / sigma)
            hi = td.squeeze((high - kde.dataset) / sigma)
            nd = td.scipy.special.ndtr
            return td.sum(kde.weights * (nd(hi) - nd(lo)))

        return _run(f, self, low, high)

    def integrate_kde(self, other):
        """The integral of the product of two estimators' densities."""
        if other.d != self.d:
            raise ValueError("KDEs are not the same dimensionality")
        d = self.d

        def f(a, b):
            chol = td.scipy.linalg.cho_factor(a.covariance + b.covariance)
            norm = 1.0 / (math.sqrt(2 * np.pi) ** d * td.prod(td.diag(chol[0])))
            sm, lg = (a, b) if a.n < b.n else (b, a)
            res = td.vmap(lambda mean: _convolve(chol, norm, lg.dataset, lg.weights, mean),
                          in_axes=1)(sm.dataset)
            return td.sum(res * sm.weights)

        return _run(f, self, other)

    def resample(self, key, shape=()):
        """``(d,) + shape`` draws: data points chosen by weight plus Gaussian noise of the
        kernel's covariance (jax's: ``choice`` and ``multivariate_normal`` on split keys)."""
        shape = tuple(shape)

        def f(kde, key):
            ind_key, eps_key = split(key)
            ind = choice(ind_key, kde.n, shape=shape, p=kde.weights)
            eps = multivariate_normal(eps_key, td.zeros(kde.d, kde.covariance.dtype),
                                      kde.covariance, shape=shape, dtype=kde.dataset.dtype)
            eps = td.transpose(eps, tuple(range(eps.ndim - 1, -1, -1)))
            return kde.dataset[:, ind] + eps

        return _run(f, self, key)

    def integrate_box(self, low_bounds, high_bounds, maxpts=None):
        """Not in jax either."""
        raise NotImplementedError(
            "only 1D box integrations are supported; use `integrate_box_1d`")

    def set_bandwidth(self, bw_method=None):
        """Not in jax either."""
        raise NotImplementedError("dynamically changing the bandwidth method is not supported")


def _convolve(chol, norm, target, weights, mean):
    diff = target - mean[:, None]
    alpha = td.scipy.linalg.cho_solve(chol, diff)
    arg = 0.5 * td.sum(diff * alpha, axis=0)
    return norm * td.sum(td.exp(-arg) * weights)


def _kernel_eval(in_log, points, values, xi, precision):
    """jax's ``_gaussian_kernel_eval``: points (n, d), values (n, 1), xi (m, d) -> (m, 1)."""
    d = points.shape[1]
    whitening = td.linalg.cholesky(precision)
    points = points @ whitening
    xi = xi @ whitening
    log_norm = td.sum(td.log(td.diag(whitening))) - 0.5 * d * math.log(2 * np.pi)
    arg = log_norm - 0.5 * td.sum(td.square(points[None, :, :] - xi[:, None, :]), axis=-1)
    if in_log:
        return td.scipy.special.logsumexp(td.log(values[None, :, :]) + arg[:, :, None], axis=1)
    return td.sum(values[None, :, :] * td.exp(arg)[:, :, None], axis=1)


_stats.gaussian_kde = gaussian_kde
