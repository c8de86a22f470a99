"""Where a program runs: CompiledProgram (eval, eval_batch, save, as_stablehlo), compile with its
backend choice, and the Executable that knows the ways to run one instruction stream (the C++
interpreter, XLA, or each op's Python ``impl``). Names no primitive."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from tidu.backends import interpreter, pictures, xla
from tidu.backends.inputs import check_input, check_inputs, shared_inputs
from tidu.graph import compile as graph_compile
from tidu.graph.compile import compile_arrays, program_cache
from tidu.graph.keys import is_input_key, mode_of, prim_of
from tidu.graph.view import MaterializedGraph

__all__ = ["BACKENDS", "CompiledProgram", "Executable", "compile"]


class Executable(graph_compile.Executable):
    """An instruction stream and the ways to run it, each made on first use and kept: the C++
    program, XLA runners by batch and placement, and the auto backend's choice."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        super().__init__(arrays)
        self._native = None
        self._xla: dict = {}  # XlaRunners by (batch, device or mesh)
        self._auto = None

    @property
    def native(self):
        """The C++ program (tidu._eval.Program), or None when some op has no C++ kernel
        (a user primitive evaluated by its Python ``impl``)."""
        if self._native is None:
            self.check_live()
            try:  # encode raises NotImplementedError at the first op with no C++ kernel
                self._native = interpreter.encode(self.arrays)
            except NotImplementedError:
                self._native = False
        return self._native or None

    def run(self, inputs: Sequence[np.ndarray], out=None) -> list[np.ndarray]:
        """Evaluate: the C++ interpreter, or each op's Python ``impl`` for programs holding a
        primitive with no C++ kernel."""
        native = self.native
        if native is not None:
            return native.run(list(inputs), out)
        return self.run_python(inputs)

    def xla(self, batch: int | None = None, device=None, mesh=None, shared=None,
            shardings=None):
        """The program compiled through XLA (``tidu.xla``), once per batch size, placement
        (a device, a Mesh, or per-input and per-output shardings) and set of shared (unbatched)
        inputs."""
        shared = tuple(shared) if shared and any(shared) else None
        where = ("shardings", shardings) if shardings is not None else (
            device if mesh is None else ("mesh", mesh))  # equal meshes: one runner
        key = (batch, where, shared)
        runner = self._xla.get(key)
        if runner is None:
            self.check_live()
            runner = self._xla.setdefault(
                key, xla.XlaRunner(self, batch, device, mesh, shared=shared, shardings=shardings))
        return runner

    def auto_backend(self) -> str:
        """The backend ``"auto"`` picks for this program (``tidu.xla.choose_backend``)."""
        if self._auto is None:
            self._auto = xla.choose_backend(self)
        return self._auto


BACKENDS = ("cpu", "xla", "auto")


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(
            f"unknown backend {backend!r}; available: {', '.join(map(repr, BACKENDS))}"
        )


def _input_name(key) -> str:
    """An input's name in a saved file (CompiledProgram.input_names): a str as it is, a key's
    own ``input_name(name_of)`` where it has one (tidu.ad.rules. tangent and cotangent keys), else
    its repr."""
    if isinstance(key, str):
        return key
    hook = getattr(key, "input_name", None)
    return hook(_input_name) if callable(hook) else repr(key)


class CompiledProgram:
    """An SSA program: ``prog(mapping)`` or ``prog.eval(list_in_input_order)``.

    ``backend`` is where ``eval`` runs it: ``"cpu"`` (the C++ interpreter) or ``"xla"``
    (StableHLO through XLA on ``device``)."""

    def __init__(
        self, executable: Executable, graph: MaterializedGraph, backend: str = "cpu", device=None
    ):
        self.executable = executable
        self.graph = graph
        self.backend = backend
        self.device = device
        self.input_vals = graph.inputs
        self.inputs = [k.input_key for k in self.input_vals]
        self.outputs = graph.outputs
        self._input_avals = [k.aval for k in self.input_vals]
        self._run = None  # the C++ entry point, bound on first use

    @property
    def n_instructions(self) -> int:
        return len(self.executable.arrays["instr_prim"])

    def _check_all(self, inputs, batched: bool = False, shared=None
                   ) -> tuple[list[np.ndarray], int]:
        """Inputs as C-contiguous arrays of the program's dtypes (tidu.backends.inputs, the
        checks LoadedProgram shares), and the batch length when ``batched``."""
        return check_inputs(self.inputs, [av.shape for av in self._input_avals],
                            [av.dtype for av in self._input_avals], inputs, batched, shared)

    def eval(self, inputs: Sequence[Any], out=None) -> list[np.ndarray]:
        """Evaluate with inputs in ``self.inputs`` order; returns a list of numpy arrays."""
        run = self._run
        if run is None:
            run = self._bind()
        if run and out is None:
            try:  # fast path: C++ checks count, dtype, shape and contiguity itself
                return run(inputs)
            except (TypeError, ValueError):
                pass  # convert below, or raise an error naming the input
        if self.backend == "xla":
            return self._eval_xla(inputs, out)
        arrs, _ = self._check_all(inputs)
        return self.executable.run(arrs, out)

    def _eval_xla(self, inputs: Sequence[Any], out=None) -> list:
        """XLA: jax Arrays among the inputs stay where they are (checked, not converted) and
        the outputs come back as jax Arrays on their devices; numpy in, numpy out."""
        on_device = _jax_arrays(inputs)
        arrs = self._check_device(inputs) if on_device else self._check_all(inputs)[0]
        if isinstance(self.device, xla.Shardings):
            runner = self.executable.xla(
                shardings=self.device.for_program(self.inputs, len(self.outputs)))
        else:
            runner = self.executable.xla(device=self.device)
        res = runner.run(arrs, as_jax=on_device and out is None)
        return res if out is None else _copy_out(res, out)

    def _check_device(self, inputs: Sequence[Any]) -> list:
        """The inputs, jax Arrays checked for shape and dtype as they are, others as eval
        checks them."""
        if len(inputs) != len(self.inputs):
            raise ValueError(f"program takes {len(self.inputs)} inputs {self.inputs}, "
                             f"got {len(inputs)}")
        res = []
        for i, (key, av, x) in enumerate(zip(self.inputs, self._input_avals, inputs)):
            if _jax_arrays([x]):
                if tuple(x.shape) != tuple(av.shape) or np.dtype(x.dtype) != np.dtype(av.dtype):
                    raise ValueError(f"input {i} ({key!r}): expected {np.dtype(av.dtype)}"
                                     f"{list(av.shape)}, got the jax Array {x.dtype}"
                                     f"{list(x.shape)}")
                res.append(x)
            else:
                res.append(check_input(i, key, x, av.shape, av.dtype))
        return res

    def runner(self):
        """The C++ interpreter's entry point for this program (a callable taking a list of
        inputs, which checks them itself), or None where ``eval`` must go through Python."""
        run = self._run
        if run is None:
            run = self._bind()
        return run or None

    def _bind(self):
        """The entry point ``eval`` calls first: the C++ interpreter's (which checks its inputs
        itself), XLA's for exact numpy inputs (``_XlaEntry``), or False to go through the checks
        in Python (Python kernels, XLA with shardings)."""
        # A program calling back into Python runs once per call: no fast path that retries a
        # call whose error (the callback's own) looks like a bad input.
        calls_back = next(_host_callbacks(self.executable), None) is not None
        if self.backend == "xla":
            fast = not calls_back and not isinstance(self.device, xla.Shardings)
            self._run = _XlaEntry(self) if fast else False
            return self._run
        native = self.executable.native if self.backend == "cpu" else None
        if native is not None and calls_back:
            native = None
        self._run = native.run if native is not None else False
        return self._run

    def as_stablehlo(self, batch: int | None = None) -> str:
        """The program as StableHLO MLIR text: ``@main(inputs in self.inputs order) -> outputs``;
        with ``batch=B`` every value has a leading axis of size B (as ``eval_batch`` runs it)."""
        return xla.lower(self.executable, batch)

    def eval_batch(
        self,
        inputs: Sequence[Any],
        threads: int | None = None,
        backend: str | None = None,
        devices=None,
        exact: bool = True,
        in_axes=0,
    ) -> list[np.ndarray]:
        """Evaluate at many points at once: every batched input has a leading batch axis of one
        length; the points are independent.

        Args:
            inputs: arrays in ``self.inputs`` order, each with a leading batch axis, except
                those ``in_axes`` declares shared.
            threads: interpreter threads (default: ``tidu.get_num_threads()``); chunks of points
                are taken by them one at a time, with the GIL released.
            backend: ``"cpu"``, ``"xla"`` or None (this program's backend).
            devices: XLA only: split the batch over devices — an int (jax's first n devices), a
                sequence of jax devices, or a ``jax.sharding.Mesh`` (the batch axis is sharded
                over all its axes).  A batch that does not divide evenly is padded.
            exact: interpreter, all-scalar float64 programs: True (default) keeps every point
                bit-identical to ``eval``; False runs exp/log/sin/cos/tanh/expm1/log1p across
                blocks of points through the SIMD array kernels (within 3 ulp of the C library
                per op, as array programs are), several times faster.  Other programs are
                evaluated point by point with the array kernels either way.
            in_axes: which inputs carry the batch axis, as ``jax.vmap``'s: 0 (all, the default),
                or one entry per input, 0 (batched on its leading axis) or None (one value
                shared by every point: not copied per point; replicated on each device).

        Returns:
            One numpy array per output, with the leading batch axis.

        Raises:
            ValueError: an input's shape (naming it), ``in_axes`` other than 0/None per input
                or with every input None, ``devices=`` without backend "xla".
        """
        backend = backend or self.backend
        _check_backend(backend)
        if backend == "auto":
            backend = self.executable.auto_backend()
        if devices is not None and backend != "xla":
            raise ValueError("devices= needs backend='xla'")
        shared = shared_inputs(in_axes, len(self.inputs))
        if backend == "xla" and _jax_arrays(inputs):  # on their devices: no host round trip
            arrs, batch = self._check_device_batch(inputs, shared)
            return self._eval_batch_xla(arrs, batch, devices, shared, as_jax=True)
        arrs, batch = self._check_all(inputs, batched=True, shared=shared)
        if backend == "xla":
            return self._eval_batch_xla(arrs, batch, devices, shared)
        native = self.executable.native
        if native is None:
            raise NotImplementedError("eval_batch needs C++ kernels for every op")
        if next(_host_callbacks(self.executable), None) is not None:
            threads = 1  # host callbacks run in the order of the points
        return native.run_batch(arrs, batch, threads or interpreter.get_num_threads(), exact,
                                shared)

    def _check_device_batch(self, inputs: Sequence[Any], shared) -> tuple[list, int]:
        """eval_batch's inputs where some are jax Arrays: those checked for shape and dtype as
        they are (the batch axis leading, one length for all), the others as eval_batch checks
        them; and the batch length."""
        if len(inputs) != len(self.inputs):
            raise ValueError(f"program takes {len(self.inputs)} inputs {self.inputs}, "
                             f"got {len(inputs)}")
        one = [bool(shared and shared[i]) for i in range(len(inputs))]
        lead = [np.shape(x)[0] for x, sh in zip(inputs, one) if not sh and np.ndim(x)]
        batch = lead[0] if lead else 0
        res = []
        for i, (key, av, x, sh) in enumerate(zip(self.inputs, self._input_avals, inputs, one)):
            want = tuple(av.shape) if sh else (batch,) + tuple(av.shape)
            if _jax_arrays([x]):
                if tuple(x.shape) != want or np.dtype(x.dtype) != np.dtype(av.dtype):
                    raise ValueError(f"input {i} ({key!r}): expected {np.dtype(av.dtype)}"
                                     f"{list(want)}{'' if sh else ' (the batch axis leading)'}"
                                     f", got the jax Array {x.dtype}{list(x.shape)}")
                res.append(x)
            else:
                res.append(check_input(i, key, x, av.shape, av.dtype, -1 if sh else batch))
        return res, batch

    def _eval_batch_xla(self, arrs: list, batch: int, devices, shared=None,
                        as_jax: bool = False) -> list:
        shared = tuple(shared) if shared else None
        if devices is None:
            return self.executable.xla(batch=batch, device=self.device, shared=shared).run(
                arrs, as_jax=as_jax)
        mesh = xla.resolve_devices(devices)
        n = mesh.devices.size
        padded = -(-batch // n) * n if batch else n
        if as_jax:  # jax Arrays are not padded (that would copy them): the batch must divide
            if padded != batch:
                raise ValueError(f"eval_batch: a batch of {batch} points in jax Arrays over "
                                 f"{n} devices: pass a multiple of {n} points (numpy inputs "
                                 f"are padded)")
            return self.executable.xla(batch=batch, mesh=mesh, shared=shared).run(
                arrs, as_jax=True)
        if padded != batch:  # repeat the last point (or zeros for an empty batch), then drop
            arrs = [
                a if shared and shared[i] else np.concatenate(
                    [
                        a,
                        np.repeat(
                            a[-1:] if batch else np.zeros((1,) + a.shape[1:], a.dtype),
                            padded - batch,
                            axis=0,
                        ),
                    ]
                )
                for i, a in enumerate(arrs)
            ]
        res = self.executable.xla(batch=padded, mesh=mesh, shared=shared).run(arrs)
        return [r[:batch] for r in res]

    def to_dot(self) -> str:
        """Graphviz DOT text: one node per instruction, edges along slots (tidu.pictures)."""
        return pictures.program_to_dot(self)

    def input_names(self) -> list[str]:
        """A name per input, in ``self.inputs`` order, as ``save`` writes them: a str key as it
        is (``x``), a cotangent seed ``ct[i]`` (i: the linear output it seeds), a tangent
        ``d<name>``, any other key its repr (a name that would repeat is the key's repr)."""
        names = [_input_name(k) for k in self.inputs]
        seen: dict[str, int] = {}
        for n in names:
            seen[n] = seen.get(n, 0) + 1
        return [n if seen[n] == 1 else repr(k) for n, k in zip(names, self.inputs)]

    def save(self, path, input_names: Sequence[str] | None = None) -> None:
        """Write the program as a versioned .tidu file for ``tidu.load`` or C++
        (``tidu::Program::load``); inputs are named by ``input_names`` (default:
        ``self.input_names()``)."""
        ex = self.executable
        names = sorted(set(_host_callbacks(ex)))
        if names:
            raise ValueError(
                f"save: the program calls back into Python ({', '.join(names)}): a .tidu file "
                f"runs without Python, so a program holding td.debug.print, td.debug.callback or "
                f"td.pure_callback cannot be saved; save one traced without them")
        if not interpreter.has_kernels(ex.arrays["instr_prim"]):
            raise NotImplementedError(
                "a program holding a primitive with no C++ kernel cannot be saved"
            )
        names = self.input_names() if input_names is None else [str(n) for n in input_names]
        if len(names) != len(self.inputs):
            raise ValueError(f"save: {len(names)} input names for {len(self.inputs)} inputs")
        native = interpreter.encode(ex.arrays, names, [repr(k) for k in self.outputs])
        with open(path, "wb") as f:
            f.write(native.to_bytes())

    def memory_report(self) -> dict:
        """``arena_bytes``: the memory plan of this program's own slots, vs ``naive_bytes``, one
        buffer per slot; ``workspace_bytes``: what an evaluation allocates in all, the nested
        programs of loops and branches (recursively) and loop carry buffers included;
        ``instructions``: nested programs' included; ``saved_bytes``: the values computed in
        Primal mode that Linear-mode instructions read (what a VJP keeps from its forward part
        for its backward part; the plan holds them exactly that long)."""
        native = self.executable.native
        a = self.executable.arrays
        linear = np.array([mode_of(int(m)).is_linear for m in a["instr_mode"]], dtype=bool)
        primal_out = set(a["out_slots"][np.repeat(~linear, np.diff(a["out_off"]))].tolist())
        read_linear = set(a["in_slots"][np.repeat(linear, np.diff(a["in_off"]))].tolist())
        avals = self.executable.slot_avals
        saved = sum(avals[s].size * avals[s].dtype.itemsize for s in primal_out & read_linear)
        if native is None:  # evaluated op by op (a user primitive with no C++ kernel): no arena
            return {"saved_bytes": saved}
        return {**interpreter.memory_report(native), "saved_bytes": saved}

    def __call__(self, mapping: dict) -> list[np.ndarray]:
        if not isinstance(mapping, dict):
            raise TypeError(
                "a program is called with a dict {input_key: value}; "
                "use prog.eval(list) for positional inputs"
            )
        missing = [k for k in self.inputs if k not in mapping]
        if missing:
            raise KeyError(f"missing input(s) {missing}; the program takes {self.inputs}")
        # Keys of inputs this program does not read (e.g. a primal input of a linear derivative)
        # are ignored; a key no fragment ever declared is an error (most likely a typo).
        unknown = [k for k in mapping if not is_input_key(k)]
        if unknown:
            raise KeyError(f"unknown input(s) {unknown}; the program takes {self.inputs}")
        return self.eval([mapping[k] for k in self.inputs])

    def __repr__(self) -> str:
        return (
            f"<CompiledProgram: {len(self.inputs)} inputs, {len(self.outputs)} outputs, "
            f"{self.n_instructions} instructions>"
        )


def _host_callbacks(exe):
    """Names of the host callbacks (ops with a ``callback_name``) of an Executable and of the
    nested programs of its ops (the fragments of loop bodies and branches), recursively."""
    # each distinct op once (a program repeats its ops: 206 instructions, 60 ops in a
    # transformer step; this runs in every first call)
    return _callbacks_in(prim_of(p) for p in np.unique(exe.arrays["instr_prim"]).tolist())


def _callbacks_in(ops):
    for op in ops:
        name = getattr(op, "callback_name", None)
        if name is not None:
            yield name
        if not dataclasses.is_dataclass(op):
            continue
        for f in dataclasses.fields(op):
            v = getattr(op, f.name)
            for body in v if isinstance(v, tuple) else (v,):
                frag = getattr(body, "fragment", None)
                if frag is not None and callable(getattr(frag, "ops", None)):
                    yield from _callbacks_in(o for o, *_ in frag.ops())


class _XlaEntry:
    """An XLA program's per-call entry for inputs of exactly its dtypes and shapes, numpy
    arrays or jax Arrays (what a jitted function passes on every call after its first): no
    conversion, the runner looked up once; the outputs are numpy arrays, or jax Arrays on their
    devices where an input is a jax Array (as ``eval`` gives them).  Any other input raises
    TypeError, so that ``eval`` converts it or names the problem."""

    __slots__ = ("prog", "runner", "kinds")

    def __init__(self, prog):
        self.prog = prog
        self.runner = None  # made on the first call (lowering a program does not compile it)
        self.kinds = [(np.dtype(av.dtype), tuple(av.shape)) for av in prog._input_avals]

    def __call__(self, inputs):
        if len(inputs) != len(self.kinds):
            raise TypeError("input count: the checked path names the problem")
        on_device = False
        for x, (dt, shape) in zip(inputs, self.kinds):
            if type(x) is np.ndarray:
                if x.dtype != dt or x.shape != shape or not x.flags.c_contiguous:
                    raise TypeError("not an exact numpy input: the checked path converts it")
            elif _jax_arrays((x,)) and x.dtype == dt and tuple(x.shape) == shape:
                on_device = True
            else:
                raise TypeError("not an exact input: the checked path converts it")
        runner = self.runner
        if runner is None:
            runner = self.runner = self.prog.executable.xla(device=self.prog.device)
        return runner.run(inputs, as_jax=on_device)


def _jax_arrays(inputs) -> bool:
    """Whether any input is a jax Array (never imports jax)."""
    jax = sys.modules.get("jax")
    return jax is not None and any(isinstance(x, jax.Array) for x in inputs)


def _copy_out(res: list[np.ndarray], out) -> list[np.ndarray]:
    if len(out) != len(res):
        raise ValueError(f"out: expected {len(res)} arrays, got {len(out)}")
    for i, (r, o) in enumerate(zip(res, out)):
        if not isinstance(o, np.ndarray) or o.shape != r.shape or o.dtype != r.dtype:
            raise ValueError(f"out[{i}]: expected an array of shape {r.shape} and dtype {r.dtype}")
        o[...] = r
    return list(out)


def compile(
    graph: MaterializedGraph,
    backend: str = "auto",  # noqa: A001 - the seeds' name
    device=None,
) -> CompiledProgram:
    """SSA slot assignment and dense instruction arrays (C++), through the program cache.

    Args:
        graph: from ``materialize_merge``.
        backend: ``"cpu"`` (the C++ interpreter), ``"xla"`` (StableHLO through XLA, needs the
            ``xla`` extra), or ``"auto"``: XLA for programs with much tensor work, the
            interpreter otherwise (``tidu.xla.choose_backend``).
        device: for XLA: None (jax's default device), a platform name ("cpu", "gpu") or a
            jax Device.

    Returns:
        A CompiledProgram; with backend "xla" it is compiled by XLA on first evaluation.

    Raises:
        ValueError: unknown backend.
        ImportError: backend "xla" without jax installed.
    """
    _check_backend(backend)  # before the SSA pass, not after it
    arrays, canon = compile_arrays(graph)
    exe = program_cache.get_or_build(canon, arrays, Executable)
    if backend == "auto":
        backend = exe.auto_backend() if device is None else "xla"
    if backend == "xla":
        xla.require_jax()
        xla.check_lowerable(exe)
    return CompiledProgram(exe, graph, backend, device)
