"""The work of aten ops, counted, and the roofline that turns it into a predicted time on one H100
(``ASSUMPTIONS``): :class:`OpMeter` records every op a function runs (FLOPs, bytes moved, whether it is a
kernel) as :class:`Ops`, :func:`measure` runs a function under it and checks its FLOPs against
FlopCounterMode's, :func:`extrapolate` takes batched kinds measured at 2 and 3 chains to K chains. Used by
``paper_profile_work.py`` (see its docstring for the method)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry

# ----------------------------------------------------------------------------- the model's constants
#: One H100 SXM5 (80 GB HBM3), NVIDIA's data sheet figures, dense.
FP32_PEAK = 67e12  # FLOP/s, FP32 on the CUDA cores: matmuls (PyTorch's default keeps TF32 off for matmuls)
TF32_PEAK = 495e12  # FLOP/s, TF32 tensor cores: convolutions (cuDNN's default allows TF32)
HBM_BANDWIDTH = 3.35e12  # bytes/s
LAUNCH_S = 5e-6  # seconds per kernel: the floor of a tiny kernel (launch and the host's dispatch)
HOST_LAUNCH_S = 20e-6  # seconds per kernel, the sensitivity case: the host's eager dispatch under torch.func.vmap
CONV_OPS = {"convolution", "_convolution", "convolution_backward", "cudnn_convolution", "mkldnn_convolution"}
ASSUMPTIONS = [
    f"one H100 SXM5 (80 GB HBM3): FP32 {FP32_PEAK / 1e12:.0f} TFLOP/s on the CUDA cores for matmuls (PyTorch's "
    f"default leaves TF32 off for matmuls and the kit does not turn it on), TF32 {TF32_PEAK / 1e12:.0f} TFLOP/s "
    "(dense) for convolutions (cuDNN's default allows TF32), HBM3 "
    f"{HBM_BANDWIDTH / 1e12:.2f} TB/s;",
    "every aten op that is not a view is one kernel, run alone: its time is max(FLOPs / peak, bytes / bandwidth, "
    f"{LAUNCH_S * 1e6:.0f} us), and kernels do not overlap (eager PyTorch, one stream; the engine reads nothing "
    "back to the host between log points, so the host can queue ahead);",
    f"the {LAUNCH_S * 1e6:.0f} us floor assumes the host issues kernels at least that fast; eager PyTorch with "
    f"torch.func.vmap often needs 10-30 us of host time per op, so the column 'at {HOST_LAUNCH_S * 1e6:.0f} us/kernel' "
    "repeats the prediction with that floor (the small FCNN steps are bound by it, not by the GPU);",
    "bytes moved = every op reads all its tensor inputs from HBM and writes its outputs (no L2 reuse, no fusion); "
    "gathers and scatters move only the rows they touch; this overstates traffic for small tensors that stay in "
    "L2 (50 MB), so the memory term is an upper bound;",
    "counted work only: Python overhead outside the ops, checkpoint writes (20 per chain, a few MB to ~1 GB "
    "each), the store, data loading and CPU-side metrics (AUROC, nDCG, pandas) are not in the prediction;",
    "batched kinds are measured at 2 and 3 chains and extrapolated per op linearly to the batch's K; "
    "Experiment 3's fine-tuning is measured on the unpruned largest student (pruning only shrinks it);",
    "CIFAR-10 is absent here: its chains are measured on random tensors of its shapes (same FLOPs and bytes);",
    "FLOPs from FlopCounterMode's formulas, except a grouped convolution's backward (every convolution of a "
    "vmapped batch is grouped), which torch 2.14's formula counts K times too often for the weight gradient: "
    "counted here per group.",
]

GATHERS = {"index_select", "index", "gather", "embedding"}
PUTS = {"index_put_", "_index_put_impl_", "index_add_", "index_copy_", "scatter_", "scatter_add_", "index_put",
        "index_add", "scatter_reduce_", "index_reduce_"}
NO_KERNEL = {"empty", "empty_strided", "empty_like", "detach", "lift_fresh", "set_", "resize_", "_local_scalar_dense",
             "_to_copy_meta"}
EVAL_CHUNK = 500


def _tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _tensors(v)


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


@dataclass
class Ops:
    """Per-op FLOPs, bytes and kernel flags of one measured event."""

    flops: list[float] = field(default_factory=list)
    bytes: list[float] = field(default_factory=list)
    conv: list[bool] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def scaled(self, factor: float) -> Ops:
        return Ops([f * factor for f in self.flops], [b * factor for b in self.bytes], list(self.conv),
                   list(self.names))

    def repeated(self, times: float) -> Totals:
        """The totals of ``times`` occurrences (times may be fractional: chunks)."""
        bound = self.bound(LAUNCH_S)
        return Totals(times * sum(self.flops), times * sum(self.bytes), times * len(self.flops),
                      times * self.seconds(LAUNCH_S), times * self.seconds(HOST_LAUNCH_S),
                      *(times * b for b in bound))

    def bound(self, launch: float) -> tuple[float, float, float]:
        """Seconds of the kernels bound by compute, by memory traffic, and by the launch floor."""
        out = [0.0, 0.0, 0.0]
        for f, b, c in zip(self.flops, self.bytes, self.conv):
            times = (f / (TF32_PEAK if c else FP32_PEAK), b / HBM_BANDWIDTH, launch)
            i = max(range(3), key=lambda j: times[j])
            out[i] += times[i]
        return tuple(out)

    def seconds(self, launch: float) -> float:
        return sum(max(f / (TF32_PEAK if c else FP32_PEAK), b / HBM_BANDWIDTH, launch)
                   for f, b, c in zip(self.flops, self.bytes, self.conv))


@dataclass
class Totals:
    flops: float = 0.0
    bytes: float = 0.0
    kernels: float = 0.0
    seconds: float = 0.0
    host_seconds: float = 0.0
    compute_s: float = 0.0  # of ``seconds``: kernels bound by FLOPs,
    memory_s: float = 0.0  # by bytes,
    launch_s: float = 0.0  # by the launch floor

    def __add__(self, other: Totals) -> Totals:
        return Totals(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other))))

    def __sub__(self, other: Totals) -> Totals:
        return Totals(*(a - b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other))))

    def __mul__(self, factor: float) -> Totals:
        return Totals(*(a * factor for a in dataclasses.astuple(self)))


def _grouped_conv_backward_flops(func, args: tuple, out: tuple) -> int:
    """FLOPs of a grouped convolution's backward: g times those of one group. FlopCounterMode's formula
    (torch 2.14) ignores ``groups`` for the weight gradient and counts it g times too often; under
    ``torch.func.vmap`` every batched convolution is grouped (g = chains), so its count would grow as K^2."""
    grad_out, x, w = args[0], args[1], args[2]
    g = args[9]

    def meta(shape: Sequence[int]) -> torch.Tensor:
        return torch.empty(tuple(shape), device="meta")

    one = [meta((grad_out.shape[0], grad_out.shape[1] // g, *grad_out.shape[2:])),
           meta((x.shape[0], x.shape[1] // g, *x.shape[2:])), meta((w.shape[0] // g, *w.shape[1:]))]
    outs = (one[1] if out[0] is not None else None, one[2] if out[1] is not None else None, None)
    return g * flop_registry[func.overloadpacket](*one, *args[3:9], 1, args[10], out_val=outs)


class OpMeter(TorchDispatchMode):
    """Records every aten op below autograd and vmap: FLOPs (FlopCounterMode's registry), bytes, kernel or not."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = Ops()
        self.counted = 0  # FlopCounterMode's count (uncorrected), to check against its total

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        schema = func._schema
        is_view = bool(schema.returns) and all(r.alias_info is not None and not r.alias_info.is_write
                                               for r in schema.returns)
        if is_view or name in NO_KERNEL:
            return out
        flops = flop_registry[func.overloadpacket](*args, **kwargs, out_val=out) \
            if func.overloadpacket in flop_registry else 0
        self.counted += flops
        if name == "convolution_backward" and args[9] > 1:
            flops = _grouped_conv_backward_flops(func, args, out)
        ins = list(_tensors(args)) + list(_tensors(kwargs))
        outs = list(_tensors(out))
        if name in GATHERS:
            moved = 2 * sum(nbytes(t) for t in outs) + sum(nbytes(t) for t in ins[1:] if t.dtype == torch.long)
        elif name in PUTS:
            moved = 2 * sum(nbytes(t) for t in ins[1:])
        else:
            written = [a for a, arg in zip(args, schema.arguments)
                       if arg.alias_info is not None and arg.alias_info.is_write]
            moved = sum(nbytes(t) for t in ins) + sum(nbytes(t) for t in outs if not any(t is w for w in written))
        self.ops.flops.append(float(flops))
        self.ops.bytes.append(float(moved))
        self.ops.conv.append(name in CONV_OPS)
        self.ops.names.append(name)
        return out


def measure(fn: Callable[[], object]) -> Ops:
    """The ops of ``fn()``; the FLOPs checked against FlopCounterMode's total."""
    meter = OpMeter()
    try:
        with FlopCounterMode(display=False) as counter, meter:
            fn()
    except RuntimeError as exc:  # FlopCounterMode's module hooks break autograd.grad(inputs=x) (derivative matching)
        if "_will_engine_execute_node" not in str(exc):
            raise
        meter = OpMeter()
        with meter:  # the same registry FlopCounterMode counts with
            fn()
        return meter.ops
    total = counter.get_total_flops()
    if abs(meter.counted - total) > 1e-6 * max(total, 1):
        raise AssertionError(f"op meter counted {meter.counted} FLOPs, FlopCounterMode {total}")
    return meter.ops


def extrapolate(a: Ops, ka: int, b: Ops, kb: int, k: int) -> Ops:
    """Per op, linearly from measurements at ka and kb chains to k chains (totals when the op lists differ)."""
    if a.names == b.names:
        def lin(x: float, y: float) -> float:
            return max(x + (y - x) / (kb - ka) * (k - ka), 0.0)
        return Ops([lin(x, y) for x, y in zip(a.flops, b.flops)], [lin(x, y) for x, y in zip(a.bytes, b.bytes)],
                   list(b.conv), list(b.names))
    return b.scaled(k / kb)
