"""Programs the tests share with bench/tensor.py, written once the jax way over a numpy namespace
``m`` (``tidu`` or ``jax.numpy``)."""

from __future__ import annotations


def dpsgd_step(m, vmap, grad):
    """DP-SGD (bench/tensor.py's dpsgd): ``vmap(grad)`` over the examples of an MLP's
    cross-entropy, each example's gradient clipped to norm 1, the clipped gradients' mean."""
    def loss(p, x, y):
        w1, b1, w2, b2 = p
        z = m.tanh(x @ w1 + b1) @ w2 + b2
        z = z - m.max(z)
        return -m.sum(y * (z - m.log(m.sum(m.exp(z)))))

    def step(p, x, y):
        g = vmap(grad(loss), in_axes=(None, 0, 0))(p, x, y)
        norm = m.sqrt(sum(m.sum(gi.reshape(gi.shape[0], -1) ** 2, axis=1) for gi in g))
        scale = m.minimum(1.0, 1.0 / (norm + 1e-6))
        return [m.mean(gi * scale.reshape((-1,) + (1,) * (gi.ndim - 1)), axis=0) for gi in g]
    return step
