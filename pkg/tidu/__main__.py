"""python -m tidu: the seeds' worked example, f(x) = exp(a * x), through all seven steps."""

from __future__ import annotations

import numpy as np

import tidu as td


def banner(step: str) -> None:
    print(f"\n---- {step} " + "-" * max(0, 70 - len(step)))


def main() -> None:
    banner("1. build: the primal fragment F0")
    F0 = td.build(lambda x, a: td.exp(a * x), x=td.spec((), "float64"), a=td.spec((), "float64"))
    (y,) = F0.outputs
    print(F0)

    banner("2. resolve: a logical view (no copying)")
    view = td.resolve([F0])
    print(f"{len(view.fragments)} fragment(s); y = {y!r} resolves to {view.resolve_val(y).op.name}")

    banner("3. differentiate: the linear fragment L1 (JVP wrt x)")
    L1 = td.differentiate(view, outputs=[y], wrt=["x"])
    print(L1.fragment)

    banner("4. transpose: the reversed linear fragment T1 (VJP)")
    T1 = td.transpose(L1)
    (ct_key,) = [key for _, key in T1.tangent_inputs]
    (ct_x,) = T1.tangent_outputs
    print(T1.fragment)

    banner("5. materialize_merge: F0 and T1 flattened once, de-duplicated")
    graph = td.materialize_merge(td.resolve([F0, T1]), outputs=[y, ct_x])
    print(graph)

    banner("6. compile: SSA instruction stream")
    prog = td.compile(graph)
    print(prog, "inputs:", prog.inputs)

    banner("7. eval")
    x, a = 0.5, 2.0
    y_val, ct_x_val = prog({"x": x, "a": a, ct_key: 1.0})
    print(f"y    = {float(y_val):.12f}   (exp(a*x)   = {np.exp(a * x):.12f})")
    print(f"ct_x = {float(ct_x_val):.12f}   (a*exp(a*x) = {a * np.exp(a * x):.12f})")

    banner("higher order: resolve -> differentiate again, no merge in between")
    L2 = td.differentiate(td.resolve([F0, T1]), outputs=[ct_x], wrt=["x"])
    (t2_key,) = [key for _, key in L2.tangent_inputs]
    (d2,) = L2.tangent_outputs
    prog2 = td.compile(td.materialize_merge(td.resolve([F0, T1, L2]), outputs=[d2]))
    (d2_val,) = prog2({"x": x, "a": a, ct_key: 1.0, t2_key: 1.0})
    print(L2.fragment)
    print(f"d2y/dx2 = {float(d2_val):.12f}   (a^2*exp(a*x) = {a * a * np.exp(a * x):.12f})")


if __name__ == "__main__":
    main()
