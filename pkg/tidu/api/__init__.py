"""The transforms (jax's api.py): jit, grad, vmap, the control-flow constructs and
linear_transpose, each built on the seven-step pipeline. The face (``tidu``) re-exports them."""

from __future__ import annotations
