"""Errors of the front end blame the argument or structure that is wrong, not the output."""

from __future__ import annotations

import numpy as np
import pytest

import tidu as td


def f(x):
    return x * x


def test_grad_of_an_int_argument_names_the_argument():
    with pytest.raises(TypeError, match="argument 0: dtype int64 is not differentiable"):
        td.grad(f)(3)
    with pytest.raises(TypeError, match="argument 1: dtype int64 is not differentiable"):
        td.grad(lambda x, n: x * n, argnums=1)(2.0, 3)


def test_grad_of_int_argument_left_out_of_argnums_works():
    assert td.grad(lambda x, n: x * n)(2.0, 3) == 3.0


@pytest.mark.parametrize("out,what", [
    (lambda x: x * x, "got a single value, not a pair"),
    (lambda x: (x, x, x), "got a tuple of length 3"),
])
def test_wrong_has_aux_structure_says_so(out, what):
    with pytest.raises(TypeError, match=r"has_aux=True requires fn to return a pair \(output, "
                                        r"aux\), " + what):
        td.grad(out, has_aux=True)(3.0)


def test_grad_of_a_non_scalar_output_names_the_output():
    with pytest.raises(TypeError, match=r"grad requires a real scalar output, got \['float64\[3\]'\]"):
        td.grad(lambda x: x * 2)(np.ones(3))
