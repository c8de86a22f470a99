"""A StableHLO text as a ``jax.export.Exported`` (serialised as a portable artifact), which
``XlaRunner`` calls under ``jax.jit``; the Exported's fields as the installed jax declares them."""

from __future__ import annotations

import dataclasses

__all__ = ["_exported", "_exported_fields", "_version"]


def _version() -> str:
    import jaxlib.mlir.dialects.stablehlo as sh  # noqa: PLC0415 - optional dependency, imported on first use

    return sh.get_version_from_compatibility_requirement(
        sh.StablehloCompatibilityRequirement.WEEK_4
    )


def _exported(text: str, in_avals, out_avals, platform: str):
    """A jax.export.Exported over our StableHLO text (serialised as a portable artifact)."""
    import jax  # noqa: PLC0415 - optional dependency, imported on first use
    from jax import export, tree_util  # noqa: PLC0415 - optional dependency, imported on first use
    from jax.extend import mlir  # noqa: PLC0415 - optional dependency, imported on first use

    try:
        blob = mlir.serialize_portable_artifact(text, _version())
    except Exception as e:  # a lowering bug: show the text that failed to parse
        raise RuntimeError(f"tidu produced StableHLO that jaxlib rejects: {e}") from e
    sa = [jax.core.ShapedArray(tuple(a.shape), a.dtype) for a in in_avals]
    so = [jax.core.ShapedArray(tuple(a.shape), a.dtype) for a in out_avals]
    n_in, n_out = len(sa), len(so)
    fields = dict(
        fun_name="tidu",
        in_tree=tree_util.tree_structure((tuple(range(n_in)), {})),
        in_avals=tuple(sa),
        out_tree=tree_util.tree_structure(tuple(range(n_out))),
        out_avals=tuple(so),
        _has_named_shardings=False,
        _in_named_shardings=(None,) * n_in,
        _out_named_shardings=(None,) * n_out,
        in_shardings_hlo=(None,) * n_in,
        out_shardings_hlo=(None,) * n_out,
        nr_devices=1,
        platforms=(platform,),
        ordered_effects=(),
        unordered_effects=(),
        disabled_safety_checks=(),
        mlir_module_serialized=blob,
        calling_convention_version=10,
        module_kept_var_idx=tuple(range(n_in)),
        uses_global_constants=False,
        _get_vjp=None,
    )
    return export.Exported(**_exported_fields(export.Exported, fields))


def _exported_fields(cls, fields: dict) -> dict:
    """The subset of `fields` that this jax's Exported dataclass declares: private fields come
    and go between jax releases (0.11 dropped `_has_named_shardings`). A field it requires that
    tidu does not know raises, naming it and the jax version."""
    import jax  # noqa: PLC0415 - optional dependency, imported on first use

    declared = {f.name: f for f in dataclasses.fields(cls)}
    missing = [
        n
        for n, f in declared.items()
        if n not in fields
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise RuntimeError(
            f"tidu's XLA backend does not support jax {jax.__version__}: "
            f"jax.export.Exported needs fields {missing} that tidu does not set"
        )
    return {n: v for n, v in fields.items() if n in declared}
