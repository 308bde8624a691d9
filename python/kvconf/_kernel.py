"""Kernels under test from Python callables: how kvconf calls them (dtype, device, shapes) and what it checks of
what they return before a rule sees it (shape, dtype, device, aliasing, NaN/inf from finite inputs, exceptions,
time limit, a broken CUDA context). The rules themselves run in C++ (kvconf._core): docs/PYTHON.md."""

from __future__ import annotations

import contextlib
import faulthandler
import math
import os
import signal
import threading
import time
import weakref
from types import FrameType, MethodType
from typing import TYPE_CHECKING, Any, Callable, Iterator, NoReturn, Sequence, TypedDict, Union, cast

from . import _core

if TYPE_CHECKING:
    import torch
    from torch import Tensor

# What a kernel's dtype, accumulate and pv_accumulate take: a torch dtype or one of the names of _FORMATS.
DType = Union[str, "torch.dtype"]
# The callables: fn(q, k_cache, v_cache, call) -> out (AttentionKernel), fn(x, w) -> y (GemmKernel),
# fn(x, w, params) -> y (NormKernel).
AttentionFn = Callable[["Tensor", "Tensor", "Tensor", _core.AttentionCall], "Tensor"]
GemmFn = Callable[["Tensor", "Tensor"], "Tensor"]
NormFn = Callable[["Tensor", "Tensor", _core.NormParams], "Tensor"]
# batch_fn([(q, k_cache, v_cache, call), ...]) -> [out, ...], one per sequence of a batched decode launch.
BatchItem = tuple["Tensor", "Tensor", "Tensor", _core.AttentionCall]
BatchFn = Callable[[list[BatchItem]], Sequence["Tensor"]]
# The kernel object C++ holds, by kind.
_CoreKernel = Union[_core.AttentionKernel, _core.GemmKernel, _core.NormKernel]

_FORMATS: dict[str, str] = {"f32": "f32", "fp32": "f32", "float32": "f32", "f16": "f16", "fp16": "f16",
                             "float16": "f16", "bf16": "bf16", "bfloat16": "bf16"}


class KernelError(Exception):
    """The kernel under test failed: it raised, returned something unusable, ran past its time limit, or ran on a
    CUDA context an earlier case left broken. The message names the kernel, the case and what happened."""


class KernelTimeout(KernelError):
    """The callable did not return within the kernel's timeout_s."""


def _torch() -> None:
    """Imports torch, or raises an ImportError saying why kvconf needs it (callers then `import torch` themselves, so
    that the type checker sees the module)."""
    try:
        import torch  # noqa: F401  (importing it is the check)
    except ImportError as e:  # kvconf itself does not need torch; kernels take torch tensors
        raise ImportError("kvconf kernels take torch tensors: install torch (pip install torch)") from e


# How the bounds' descriptions name an accumulator.
_ACC: dict[str, str] = {"f32": "fp32", "f16": "fp16", "bf16": "bf16"}


def format_of(dtype: DType, argument: str = "dtype") -> str:
    """'f32' | 'f16' | 'bf16' for a torch dtype or one of those names; ValueError naming `argument` otherwise."""
    _torch()
    import torch
    if isinstance(dtype, str):
        if dtype in _FORMATS:
            return _FORMATS[dtype]
    else:
        for name, t in (("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)):
            if dtype == t:
                return name
    raise ValueError(f"{argument}={dtype!r}: expected torch.float32, torch.float16 or torch.bfloat16")


def dtype_of(fmt: str) -> torch.dtype:
    _torch()
    import torch
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[fmt]


# CUDA contexts that a kernel's CUDA error left unusable: device -> (case id, message). Every later case on that
# device fails with this message instead of a confusing error of its own.
_broken_cuda: dict[str, tuple[str, str]] = {}


# What kvconf states for PyTorch's CUDA attention kernels (the TorchCuda/ suites, kernels/black_box.hpp): fast-math
# exp2f of a rescaled argument (64 fp32 ulps), results below 2^-125 flushed, the scale folded with log2 e.
# AttentionKernel(fn, dtype=..., device="cuda", **kvconf.CUDA_FAST_MATH). Their RMSNorm: NormKernel(rsqrt_error_ulps=3).
class FastMath(TypedDict):
    """AttentionKernel's keyword arguments that state a kernel's exp (CUDA_FAST_MATH's type)."""
    exp_error_ulps: int
    flush_exp: bool
    exp2_scale: bool


CUDA_FAST_MATH: FastMath = {"exp_error_ulps": 64, "flush_exp": True, "exp2_scale": True}


def _is_cuda_error(e: BaseException) -> bool:
    text = f"{type(e).__name__}: {e}"
    return "CUDA error" in text or "AcceleratorError" in text or "cudaError" in text


@contextlib.contextmanager
def _time_limit(seconds: float | None, what: str) -> Iterator[None]:
    """Raises KernelTimeout in the main thread after `seconds` (SIGALRM); elsewhere, or without a limit, no limit.
    SIGALRM's handler runs only when the interpreter regains control, so a call stuck inside C (a CUDA kernel that
    never finishes, waited for in torch.cuda.synchronize) is not interrupted by it. Such a call still running at twice
    the limit ends the process with exit status 1: a line naming the kernel and case (from a thread, when the stuck
    call has released the GIL, as torch's do) and faulthandler's traceback of every thread (from C, always)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum: int, frame: FrameType | None) -> NoReturn:
        raise KernelTimeout(f"{what}: no result after {seconds:g} s (timeout_s={seconds:g})")

    def last_word() -> None:
        os.write(2, f"\nkvconf: {what}: still inside one call after {2 * seconds:g} s (timeout_s={seconds:g}), "
                    f"where the timeout cannot interrupt it; ending the process\n".encode())

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    # The last resort: faulthandler's watchdog is a C thread, which runs even when this one holds the GIL. It replaces
    # a faulthandler timeout armed by someone else (pytest's faulthandler_timeout) for the length of the call.
    faulthandler.dump_traceback_later(2 * seconds + 0.05, exit=True)
    word = threading.Timer(2 * seconds, last_word)
    word.daemon = True
    word.start()
    try:
        yield
    finally:
        word.cancel()
        faulthandler.cancel_dump_traceback_later()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _weak(method: Callable[..., Any]) -> Callable[..., Any]:
    """A callable for C++ to hold that does not keep the kernel alive (C++ holds its runner strongly and Python's
    collector cannot see through it: a bound method there would be a cycle never freed). method: a bound method."""
    bound = cast(MethodType, method)
    ref, name = weakref.ref(bound.__self__), bound.__func__.__name__

    def call(*args: Any) -> Any:
        return getattr(ref(), name)(*args)
    return call


class _Kernel:
    """What every kind shares: the callable, its dtype and device, the time limit, the case being checked."""

    kind = ""
    _core: _CoreKernel  # set by each kind's __init__

    def __init__(self, fn: Callable[..., Any], *, dtype: DType, device: str | torch.device = "cpu",
                 name: str | None = None, supports: Callable[[Any], str | None] | None = None,
                 timeout_s: float | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"fn={fn!r}: expected a callable")
        if supports is not None and not callable(supports):
            raise TypeError(f"supports={supports!r}: expected None or a callable(call) -> None | str")
        if timeout_s is not None and not (isinstance(timeout_s, (int, float)) and timeout_s > 0
                                          and math.isfinite(timeout_s)):
            raise ValueError(f"timeout_s={timeout_s!r}: expected None or a positive number of seconds")
        _torch()
        import torch
        self.fn = fn
        self.format = format_of(dtype)
        self.dtype = dtype_of(self.format)
        try:
            self.device = torch.device(device)
        except (RuntimeError, TypeError) as e:
            raise ValueError(f"device={device!r}: expected 'cpu' or 'cuda[:N]' ({e})") from None
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"device={device!r}: expected 'cpu' or 'cuda[:N]'")
        self.user_name: str = name or str(getattr(fn, "__name__", "kernel"))
        self.user_supports = supports
        self.timeout_s = timeout_s
        self.case_id = ""  # the case being checked (set by the check functions), for messages
        # Per-call costs on CUDA: host->device copies, the call (synchronised), device->host copy (seconds, summed).
        self.stats: dict[str, float] = {"calls": 0, "to_device_s": 0.0, "call_s": 0.0, "to_host_s": 0.0}

    @property
    def name(self) -> str:
        return self._core.name

    def describe_bound(self) -> str:
        """The bound the kernel's bounded rules charge, in words (each kind states its own)."""
        raise NotImplementedError

    def _where(self) -> str:
        return f"kernel {self.name}" + (f" on case {self.case_id}" if self.case_id else "")

    def _device_reason(self) -> str | None:
        if self.device.type != "cuda":
            return None
        import torch
        if not torch.cuda.is_available():
            return (f"device {self.device}: torch.cuda.is_available() is False (no CUDA device or a CPU-only torch "
                    f"{torch.__version__})")
        index = self.device.index or 0
        if index >= torch.cuda.device_count():
            return f"device {self.device}: only {torch.cuda.device_count()} CUDA device(s)"
        return None

    def _supports(self, call: Any) -> str | None:
        why = self._device_reason()
        if why is None and self.device.type == "cuda":
            self._check_context()  # a user's supports may itself touch the device
        if why is None and self.user_supports is not None:
            why = self.user_supports(call)
            if why is not None and not isinstance(why, str):
                raise TypeError(f"supports of {self.name} returned {why!r}: expected None or a reason (str)")
        return why

    def _check_context(self) -> None:
        """After a CUDA error left this device's context unusable, every later case on it fails saying so (its own
        copies would otherwise raise the same sticky error, naming no case)."""
        key = str(self.device)
        if key in _broken_cuda:
            case, msg = _broken_cuda[key]
            raise KernelError(f"{self._where()}: not run: the CUDA context on {key} is unusable since case {case} "
                              f"failed with: {msg}")

    def _broke_context(self, e: BaseException) -> bool:
        """Whether `e` is a CUDA error on this kernel's device; if so the context is marked unusable from this case."""
        if self.device.type != "cuda" or not _is_cuda_error(e):
            return False
        _broken_cuda[str(self.device)] = (self.case_id or "?", f"{type(e).__name__}: {e}")
        return True

    @contextlib.contextmanager
    def _cuda_errors(self, doing: str) -> Iterator[None]:
        """A CUDA error while `doing` (kvconf's copies) marks the context unusable and fails this case with it."""
        try:
            yield
        except KernelError:
            raise
        except Exception as e:
            if not self._broke_context(e):
                raise
            raise KernelError(f"{self._where()}: CUDA error while {doing}: {type(e).__name__}: {e}") from e

    def _to_device(self, flat: Tensor, shape: Sequence[int]) -> Tensor:
        """kvconf's float32 values (a view of its buffer) as a fresh tensor of the kernel's dtype on its device."""
        t = flat.view(*shape).to(device=self.device, dtype=self.dtype, copy=True)
        return t

    def _invoke(self, args: Sequence[Any], kwargs: dict[str, Any], fn: Callable[..., Any] | None = None) -> Any:
        import torch
        self._check_context()
        what = self._where()
        cuda = self.device.type == "cuda"
        try:
            with _time_limit(self.timeout_s, what):
                t0 = time.perf_counter()
                out = (fn or self.fn)(*args, **kwargs)
                if cuda:
                    torch.cuda.synchronize(self.device)  # asynchronous CUDA errors surface here, in this case
                self.stats["call_s"] += time.perf_counter() - t0
        except KernelError:
            raise
        except Exception as e:
            self._broke_context(e)
            raise KernelError(f"{what}: the callable raised {type(e).__name__}: {e}") from e
        self.stats["calls"] += 1
        return out

    def _result(self, out: Any, shape: Sequence[int], inputs: Sequence[tuple[str, Tensor]],
                finite_inputs: bool) -> Tensor:
        """The callable's output checked and returned as float32 CPU contiguous (read in place by C++)."""
        import torch
        what = self._where()
        if not isinstance(out, torch.Tensor):
            raise KernelError(f"{what}: the callable returned {type(out).__name__}, expected a torch.Tensor of shape "
                              f"{tuple(shape)}")
        if tuple(out.shape) != tuple(shape):
            raise KernelError(f"{what}: the callable returned shape {tuple(out.shape)}, expected {tuple(shape)}")
        if out.dtype != self.dtype:
            raise KernelError(f"{what}: the callable returned dtype {out.dtype}, expected {self.dtype}")
        if out.device != self.device and not (out.device.type == self.device.type == "cuda"
                                              and self.device.index is None):
            raise KernelError(f"{what}: the callable returned a tensor on {out.device}, expected {self.device}")
        if not out.is_contiguous():
            raise KernelError(f"{what}: the callable returned a non-contiguous tensor (strides {tuple(out.stride())}); "
                              f"expected a contiguous one, as an engine's next op reads it (call .contiguous())")
        for name, t in inputs:
            if out.untyped_storage().data_ptr() == t.untyped_storage().data_ptr():
                raise KernelError(f"{what}: the output aliases the input {name} (same storage); expected a new tensor")
        t0 = time.perf_counter()
        with self._cuda_errors("copying the output to the host"):
            host = out.detach().to(device="cpu", dtype=torch.float32).contiguous()
        self.stats["to_host_s"] += time.perf_counter() - t0
        if finite_inputs and not bool(torch.isfinite(host).all()):
            bad = int((~torch.isfinite(host)).flatten().nonzero()[0])
            raise KernelError(f"{what}: the callable returned {float(host.flatten()[bad])} at flat index {bad} "
                              f"(shape {tuple(shape)}) from finite inputs")
        return host.flatten()

    def _inputs(self, pairs: Sequence[tuple[str, Tensor, Sequence[int]]]) -> list[tuple[str, Tensor]]:
        """[(name, flat, shape)] -> [(name, device tensor)], timing the copies."""
        import torch
        self._check_context()
        t0 = time.perf_counter()
        with self._cuda_errors("copying the inputs to the device"):
            ts = [(name, self._to_device(flat, shape)) for name, flat, shape in pairs]
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        self.stats["to_device_s"] += time.perf_counter() - t0
        return ts


class AttentionKernel(_Kernel):
    """An attention kernel: fn(q, k_cache, v_cache, call) -> out, called as an engine calls its kernel.

    q: (n_q, n_heads, d) at positions call.q_offset ..; k_cache: (capacity, n_kv_heads, d), v_cache: (capacity,
    n_kv_heads, d_v), rows [call.n_kv, capacity) allocated but never to be read (kvconf fills them with NaN in the
    unused-slot rule); out: (n_q, n_heads, d_v), a new tensor of the kernel's dtype on its device. call carries
    n_kv, causal, window, scale (the float to multiply scores by) and softcap. Decode is n_q = 1.

    What the kernel's arithmetic may do, as a plugin's kernel table states it (docs/TOLERANCES.md §10, docs/PLUGIN.md):
    products and sums in any order in `accumulate` (default torch.float32; q·k, and P·V unless `pv_accumulate` names
    another dtype, as a kernel that accumulates P·V in fp16 must); exp_error_ulps: its exp's error in fp32 ulps (0 =
    correctly rounded, charged 1; PyTorch's CPU flash kernel: 20; CUDA fast-math exp2f: 64); flush_exp: e^x below
    2^-125 may be flushed to 0; exp2_scale: the kernel folds the scale with log2 e and calls exp2 (FlashAttention,
    PyTorch's CUDA SDPA backends), three more roundings of the scores, charged as a scale error of 4u + 4u² instead of
    2u + 2u². kvconf.CUDA_FAST_MATH holds the three as kvconf states them for PyTorch's CUDA attention kernels.
    cache_invariant: claims decode equals prefill bitwise (then the on/off, chunked, capacity and batch rules are
    bitwise).

    batch_fn (optional): batch_fn(batch) -> [out, ...], one batched decode launch, as a serving engine launches a
    decode step: batch is a list of (q, k_cache, v_cache, call) as fn takes them, one per sequence (n_q = 1, sequences
    of different n_kv, call.batch = len(batch)); it returns their outputs in order. The "batch" rule compares a row
    decoded alone (fn) with the same row inside launches of 4 and 64 sequences. batch_supports (optional):
    batch_supports([call, ...]) -> None | reason declines a launch (SDPA's CUDA flash backend takes no padded batch's
    mask); the rule is then not run, and asked for alone it reports the case skipped with the reason.
    """

    kind = "attention"

    def __init__(self, fn: AttentionFn, *, dtype: DType, device: str | torch.device = "cpu", name: str | None = None,
                 exp_error_ulps: int = 1, flush_exp: bool = True, exp2_scale: bool = False,
                 cache_invariant: bool = False, deterministic: bool = True,
                 supports: Callable[[_core.AttentionCall], str | None] | None = None, timeout_s: float | None = None,
                 mirrors: str = "", accumulate: DType = "f32", pv_accumulate: DType | None = None,
                 batch_fn: BatchFn | None = None,
                 batch_supports: Callable[[list[_core.AttentionCall]], str | None] | None = None) -> None:
        super().__init__(fn, dtype=dtype, device=device, name=name, supports=supports, timeout_s=timeout_s)
        if batch_fn is not None and not callable(batch_fn):
            raise TypeError(f"batch_fn={batch_fn!r}: expected None or a callable taking a list of (q, k_cache, "
                            f"v_cache, call)")
        self.batch_fn = batch_fn
        if batch_supports is not None and (batch_fn is None or not callable(batch_supports)):
            raise TypeError(f"batch_supports={batch_supports!r}: expected None, or a callable taking the list of "
                            f"calls of a batched launch (and a batch_fn to launch it)")
        self.batch_supports = batch_supports
        if (not isinstance(exp_error_ulps, int) or isinstance(exp_error_ulps, bool)
                or not 0 <= exp_error_ulps <= 1 << 20):
            raise ValueError(f"exp_error_ulps={exp_error_ulps!r}: expected an int from 0 to 1048576")
        self.exp_error_ulps = exp_error_ulps
        self.flush_exp = bool(flush_exp)
        if not isinstance(exp2_scale, bool):
            raise ValueError(f"exp2_scale={exp2_scale!r}: expected True or False")
        self.exp2_scale = exp2_scale
        self.cache_invariant = bool(cache_invariant)
        self.accumulate = format_of(accumulate, "accumulate")
        self.pv_accumulate = self.accumulate if pv_accumulate is None else format_of(pv_accumulate, "pv_accumulate")
        self._core: _core.AttentionKernel = _core.AttentionKernel(
            self.user_name, self.format, _weak(self._run), _weak(self._supports), self.cache_invariant,
            bool(deterministic), max(exp_error_ulps, 1) * 2.0**-23, _core.EXP_FLUSH_ABS_ERROR if flush_exp else 0.0,
            mirrors, self.accumulate, self.pv_accumulate, exp2_scale,
            _weak(self._run_batch) if batch_fn is not None else None,
            _weak(self._batch_supports) if batch_supports is not None else None)

    def describe_bound(self) -> str:
        return (f"black-box attention bound (docs/TOLERANCES.md §10): q·k in {_ACC[self.accumulate]} and PV in "
                f"{_ACC[self.pv_accumulate]} in any order, scale error "
                + ("4u (scale folded with log2 e, exp2)" if self.exp2_scale else "2u")
                + f", exp error {max(self.exp_error_ulps, 1)} fp32 ulp"
                + (", e^x < 2^-125 may flush to 0" if self.flush_exp else "")
                + (", P rounded to the input format before PV" if self.format != "f32" else "")
                + f", one rounding to {self.format}")

    def _call_inputs(self, call: _core.AttentionCall, q: Tensor, k_cache: Tensor,
                     v_cache: Tensor) -> tuple[list[tuple[str, Tensor]], bool]:
        """One call's inputs on the kernel's device, and whether its caches were finite (NaN poison excepted)."""
        import torch
        cap = call.capacity
        finite = bool(torch.isfinite(k_cache).all()) and bool(torch.isfinite(v_cache).all())
        ins = self._inputs([("q", q, (call.n_q, call.n_heads, call.d)),
                            ("k_cache", k_cache, (cap, call.n_kv_heads, call.d)),
                            ("v_cache", v_cache, (cap, call.n_kv_heads, call.d_v))])
        return ins, finite

    def _run(self, call: _core.AttentionCall, q: Tensor, k_cache: Tensor, v_cache: Tensor) -> Tensor:
        ins, finite = self._call_inputs(call, q, k_cache, v_cache)
        out = self._invoke([t for _, t in ins] + [call], {})
        return self._result(out, (call.n_q, call.n_heads, call.d_v), ins, finite)

    def _batch_supports(self, calls: Sequence[_core.AttentionCall]) -> str | None:
        assert self.batch_supports is not None  # C++ is handed this method only with a batch_supports
        why = self.batch_supports(list(calls))
        if why is not None and not isinstance(why, str):
            raise TypeError(f"batch_supports of {self.name} returned {why!r}: expected None or a reason (str)")
        return why

    def _run_batch(self, items: Sequence[tuple[_core.AttentionCall, Tensor, Tensor, Tensor]]) -> list[Tensor]:
        """[(call, q, k_cache, v_cache)] as kvconf's float32 views -> [float32 CPU output], through batch_fn."""
        batch: list[BatchItem] = []
        inputs: list[list[tuple[str, Tensor]]] = []
        finite: list[bool] = []
        for call, q, k_cache, v_cache in items:
            ins, fin = self._call_inputs(call, q, k_cache, v_cache)
            inputs.append(ins)
            finite.append(fin)
            (_, q_d), (_, k_d), (_, v_d) = ins
            batch.append((q_d, k_d, v_d, call))
        outs = self._invoke([batch], {}, fn=self.batch_fn)
        if not isinstance(outs, (list, tuple)) or len(outs) != len(items):
            got = f"{type(outs).__name__} of {len(outs)}" if isinstance(outs, (list, tuple)) else type(outs).__name__
            raise KernelError(f"{self._where()}: batch_fn returned {got}, expected a list of {len(items)} tensors, "
                              f"one per sequence of the batch")
        return [self._result(o, (call.n_q, call.n_heads, call.d_v), ins, fin)
                for o, (call, *_), ins, fin in zip(outs, items, inputs, finite)]


class GemmKernel(_Kernel):
    """A linear layer's projection: fn(x, w) -> y = x @ w.T, x: (m, k), w: (n, k) as nn.Linear holds its weight,
    y: (m, n). Products and sums in `accumulate` (default torch.float32) in any order, one rounding to the dtype (the
    black-box GEMM bound).
    cache_invariant: claims a row's result does not depend on m (then the on/off projection rule is bitwise)."""

    kind = "gemm"

    def __init__(self, fn: GemmFn, *, dtype: DType, device: str | torch.device = "cpu", name: str | None = None,
                 cache_invariant: bool = False, deterministic: bool = True,
                 supports: Callable[[_core.GemmShape], str | None] | None = None, timeout_s: float | None = None,
                 mirrors: str = "", accumulate: DType = "f32") -> None:
        super().__init__(fn, dtype=dtype, device=device, name=name, supports=supports, timeout_s=timeout_s)
        self.cache_invariant = bool(cache_invariant)
        self.accumulate = format_of(accumulate, "accumulate")
        self._core: _core.GemmKernel = _core.GemmKernel(
            self.user_name, self.format, _weak(self._run), _weak(self._supports), self.cache_invariant,
            bool(deterministic), mirrors, self.accumulate)

    def describe_bound(self) -> str:
        return (f"black-box GEMM bound: products and sums in {_ACC[self.accumulate]} in any order, one rounding to "
                f"{self.format}")

    def _run(self, shape: _core.GemmShape, x: Tensor, w: Tensor) -> Tensor:
        ins = self._inputs([("x", x, (shape.m, shape.k)), ("w", w, (shape.n, shape.k))])
        out = self._invoke([t for _, t in ins], {})
        return self._result(out, (shape.m, shape.n), ins, True)


class NormKernel(_Kernel):
    """RMSNorm as HF computes it: fn(x, w, params) -> y, x: (rows, d), w: (d), y: (rows, d); params.eps, and
    params.one_plus_weight (Gemma: y = (x·r)·(1 + w) in fp32; Llama: y = w · (x·r) rounded to the dtype first).
    A kernel that has one of the two decline the other through supports (or lets kvconf show it). Σx² in fp32 in any
    order; rsqrt_error_ulps: the error of its 1/sqrt in fp32 ulps (default 2: fl(1/fl(sqrt)), PyTorch's rsqrt)."""

    kind = "norm"

    def __init__(self, fn: NormFn, *, dtype: DType, device: str | torch.device = "cpu", name: str | None = None,
                 rsqrt_error_ulps: float = 2, deterministic: bool = True,
                 supports: Callable[[_core.NormShape], str | None] | None = None, timeout_s: float | None = None,
                 mirrors: str = "") -> None:
        super().__init__(fn, dtype=dtype, device=device, name=name, supports=supports, timeout_s=timeout_s)
        if not isinstance(rsqrt_error_ulps, (int, float)) or not 0 < rsqrt_error_ulps < 1 << 20:
            raise ValueError(f"rsqrt_error_ulps={rsqrt_error_ulps!r}: expected a number > 0")
        self.rsqrt_error_ulps = rsqrt_error_ulps
        rel = _core.RSQRT_TWO_ROUNDINGS_REL_ERROR if rsqrt_error_ulps == 2 else rsqrt_error_ulps * 2.0**-23
        self._core: _core.NormKernel = _core.NormKernel(
            self.user_name, self.format, _weak(self._run), _weak(self._supports), bool(deterministic), rel, mirrors)

    def describe_bound(self) -> str:
        return (f"black-box RMSNorm bound: Σx² in fp32 in any order, rsqrt within {self.rsqrt_error_ulps} fp32 ulp, "
                f"the rest of HF's RMSNorm in fp32, rounding to {self.format}")

    def _run(self, shape: _core.NormShape, params: _core.NormParams, x: Tensor, w: Tensor) -> Tensor:
        ins = self._inputs([("x", x, (shape.rows, shape.d)), ("w", w, (shape.d,))])
        out = self._invoke([t for _, t in ins] + [params], {})
        return self._result(out, (shape.rows, shape.d), ins, True)
