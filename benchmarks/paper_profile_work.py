"""The paper profile's work per notebook, and a predicted time on one H100 (writes docs/paper_profile.md).

    .venv/bin/python benchmarks/paper_profile_work.py            # measure, print, write docs/paper_profile.md
    .venv/bin/python benchmarks/paper_profile_work.py --no-write # print only

Nothing here runs a chain to its end: the paper profile (T = 10^6) is a GPU job. For every notebook
with a ``paper`` profile the script builds the notebook's chains exactly as the notebook does (the
experiment modules' task builders with the *unscaled* paper profile), groups them into the batches
:func:`~gped_kit.experiments.chains.run_chains` computes together (up to ``chains_per_batch``
consecutive chains of one structure), builds the real :class:`~gped_kit.engine.GPEDEngine` at the
real sizes (real MNIST; CIFAR-10, absent here, replaced by random tensors of its shapes), and measures
one occurrence of every kind of event of :meth:`GPEDEngine.step <gped_kit.engine.GPEDEngine.step>`
under :class:`torch.utils.flop_counter.FlopCounterMode` and a dispatch mode that records every aten op:

* the **teacher step** (SGLD on M = 100: forward, backward, update; every iteration);
* each **distillation group**'s step (S' drawn, the teacher's statistics on it, one Adam step of every
  student of the group; every H iterations after burn-in);
* the **ensemble accumulation** (the teacher on every evaluation input; every ``eval_thinning``
  iterations after burn-in) and the **student evaluation** at each log point and at the end
  (every student on the test set, and on every evaluation set at the end), measured on one chunk of
  500 inputs and scaled to the set sizes;

and per op: FLOPs (FlopCounterMode's registry: 2 x multiply-accumulates of matmuls and convolutions,
forward and backward; each event's total is checked against FlopCounterMode's, with one correction:
torch 2.14's formula for a *grouped* convolution's backward counts the weight gradient ``groups`` times
too often, and under ``torch.func.vmap`` every convolution of K chains is grouped, g = K, so the
batched CNN steps are counted per group, see :func:`_grouped_conv_backward_flops`), **bytes moved**
(the bytes of the op's tensor inputs and outputs: every op reads its inputs from and writes its
outputs to memory, no cache reuse and no fusion, as eager PyTorch runs it; gathers and scatters
count only the rows they touch) and whether it is a **kernel** (an aten op that is not a view).
Batched kinds are measured at 2 and 3 chains (the vmapped path the engine takes for K > 1) and
extrapolated per op, linearly, to the batch's K; one-chain kinds are measured as they run (the
unbatched path).

Event counts over the chain follow :meth:`GPEDEngine.step` exactly: T teacher steps; a group of
thinning H steps at every t with B < t < T and t mod H = 0, i.e. floor((T - 1) / H) - floor(B / H)
times (9,989 for H = 100 and 99,899 for H = 10 at T = 10^6, B = 1,000); the ensemble likewise with
``eval_thinning``; student evaluations at every log point after burn-in and once more at the end.
After the chains: Experiment 3's fine-tuning of every pruned student (``epochs x N / M / H`` Adam
steps, measured on the unpruned largest network: an upper bound) with its evaluations and latency
passes; Hydra's two phases and its snapshot logits (notebook 07), and the spiral's chain.

**Memory** (the largest batch of each notebook): the tensors the engine holds, by torch's accounting
(:meth:`GPEDEngine.memory_bytes`: parameters, Adam state, U_o stores, ensemble sums, snapshots and
data, each distinct data set once), and the bytes the run keeps on the device in all: the engine's
tensors plus each chain's own copy of its data (the chains' :class:`~gped_kit.data.container.GPEDData`
stays referenced next to the engine's concatenated sets), counted over distinct storages. Data
sets are loaded one chain at a time and compared by content to find the distinct ones, so the
largest batch never has to fit in this machine's memory.

**The prediction** is a roofline per kernel, summed: ``t = max(FLOPs / peak, bytes / bandwidth,
launch)`` with the peaks of one H100 SXM (see ``ASSUMPTIONS``). It is a prediction from counted work,
not a measurement.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import multiprocessing
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from gped_kit.baselines import hydra
from gped_kit.cli.readme import render_deviations
from gped_kit.core.targets import resolve_target
from gped_kit.data.container import GPEDData
from gped_kit.data.experiment import DataConfig
from gped_kit.data.sources import DatasetNotFoundError
from gped_kit.data.spiral import SpiralConfig, spiral_data
from gped_kit.engine import GPEDConfig, GPEDEngine
from gped_kit.engine.config import GroupKey
from gped_kit.engine.spec import ChainSpec, build_chain
from gped_kit.experiments import comparison as C
from gped_kit.experiments import experiment3 as E3
from gped_kit.experiments.chains import ChainTask, load_data
from gped_kit.experiments.paper import FINETUNE_EPOCHS, paper_model
from gped_kit.experiments.registry import NOTEBOOKS
from gped_kit.models.build import instantiate
from gped_kit.models.presets import build_network

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


def _nbytes(t: torch.Tensor) -> int:
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
            moved = 2 * sum(_nbytes(t) for t in outs) + sum(_nbytes(t) for t in ins[1:] if t.dtype == torch.long)
        elif name in PUTS:
            moved = 2 * sum(_nbytes(t) for t in ins[1:])
        else:
            written = [a for a, arg in zip(args, schema.arguments)
                       if arg.alias_info is not None and arg.alias_info.is_write]
            moved = sum(_nbytes(t) for t in ins) + sum(_nbytes(t) for t in outs if not any(t is w for w in written))
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


# ----------------------------------------------------------------------------- data and chains
_FAKE: dict[tuple, torch.Tensor] = {}


def _fake(key: tuple, shape: tuple, labels: bool = False) -> torch.Tensor:
    if key not in _FAKE:
        gen = torch.Generator().manual_seed(abs(hash(key)) % 2**31)
        _FAKE[key] = (torch.randint(0, 10, shape, generator=gen) if labels
                      else torch.rand(shape, generator=gen))
    return _FAKE[key]


def task_data(task: ChainTask) -> tuple[GPEDData, bool]:
    """The task's data at its real sizes, and whether it is real (CIFAR-10: random tensors of its shapes)."""
    try:
        return load_data(task.data, torch.device("cpu")), True
    except DatasetNotFoundError:
        cfg = task.data
        assert isinstance(cfg, DataConfig) and cfg.dataset == "cifar10", cfg
        n = cfg.labelled_size or 50_000
        shape = (3, 32, 32)
        return GPEDData(train_x=_fake(("x", n, cfg.seed), (n, *shape)), train_y=_fake(("y", n, cfg.seed), (n,), True),
                        distill_x=_fake(("d", cfg.seed), (50_000, *shape)).clone(),  # each chain its own copy,
                        test_x=_fake(("t",), (10_000, *shape)).clone(),  # as a real load gives it
                        test_y=_fake(("ty",), (10_000,), True), num_outputs=10,
                        info={"dataset": "cifar10", "labelled_size": n, "mask_size": 0}), False


def spec_of(task: ChainTask) -> tuple[ChainSpec, bool]:
    data, real = task_data(task)
    config = dataclasses.replace(task.config, progress=False, device="cpu")
    return build_chain(data, config, task.students), real


def _digest(t: torch.Tensor) -> str:
    return hashlib.sha1(t.contiguous().numpy().tobytes()).hexdigest()


def batch_memory(tasks: Sequence[ChainTask], state_per_chain: int) -> dict[str, float]:
    """Bytes a batch of ``tasks`` holds: the engine's (state x K + each distinct data set once, as its
    ChainSets store them) and on the device in all: the chains' own data tensors (their ChainSpecs keep
    them), plus, for each kind of set (D, D', evaluation inputs) that is not the same for every chain,
    the engine's concatenation of the distinct ones (a kind shared by all chains is used in place),
    plus a chain's concatenation of its test and OOD inputs. Loads one chain's data at a time."""
    distinct: dict[str, dict[str, int]] = {"train": {}, "distill": {}, "eval": {}}
    own = 0
    for task in tasks:
        data, _ = task_data(task)
        evaluation = torch.cat([data.test_x, *data.ood_x.values()]) if data.ood_x else data.test_x
        for kind, tensors in (("train", (data.train_x, data.train_y)), ("distill", (data.distill_x,)),
                              ("eval", (evaluation,))):
            distinct[kind][":".join(_digest(t) for t in tensors)] = sum(_nbytes(t) for t in tensors)
        own += sum(_nbytes(t) for t in (data.train_x, data.train_y, data.distill_x, data.test_x, data.test_y,
                                        *data.ood_x.values()))
        if data.ood_x:
            own += _nbytes(evaluation)
        del data, evaluation
    data_bytes = sum(sum(d.values()) for d in distinct.values())
    copies = sum(sum(d.values()) for d in distinct.values() if len(d) > 1)
    state = state_per_chain * len(tasks)
    return {"engine": state + data_bytes, "device": state + own + copies, "data": data_bytes}


def _rss_child(tasks: Sequence[ChainTask]) -> float:
    """In a fresh process: build the batch at its real sizes, take a teacher step, every group's student
    step, one ensemble chunk and one evaluation chunk; the process's peak RSS in bytes."""
    engine = GPEDEngine([spec_of(t)[0] for t in tasks])
    engine.step()
    for key in engine.chains[0].groups:
        engine.distill_group(key, engine.config.burn_in + 1)
    with _limited(engine, EVAL_CHUNK):
        engine.accumulate()
        engine.student_outputs(["test"])
    return _peak_rss()


def _peak_rss() -> float:
    """This process's peak RSS in bytes: VmHWM (ru_maxrss would carry the parent's peak across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0


def measured_rss(tasks: Sequence[ChainTask]) -> float:
    """Peak RSS (bytes) of a fresh process that holds the batch at its real sizes (:func:`_rss_child`)."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_rss_child, (list(tasks),))


# ----------------------------------------------------------------------------- events of a chain kind
def count_after_burn_in(T: int, B: int, every: int) -> int:
    """#{t : B < t < T, t mod every = 0}: how often GPEDEngine.step does an every-``every`` event."""
    return (T - 1) // every - B // every


def log_evaluations(config: GPEDConfig) -> int:
    """Log points after burn-in (each evaluates every student on the test set)."""
    T, B, L = config.num_iterations, config.burn_in, config.log_every
    points = set(range(L, T + 1, L)) | {T}
    return sum(1 for t in points if t > B)


@dataclass
class KindWork:
    """One batch kind: K chains of one structure, and how many such batches the notebook runs."""

    label: str
    model: str  # the teacher's model (the spiral's FCNN is "spiral fcnn")
    K: int
    batches: int
    config: GPEDConfig
    teacher: Ops
    groups: dict[GroupKey, Ops]
    accumulate_chunk: Ops  # one chunk of EVAL_CHUNK evaluation inputs
    students_chunk: Ops  # every student on one chunk of EVAL_CHUNK test inputs
    num_eval: int
    num_test: int
    state_per_chain: int
    student_steps_per_chain: int
    group_sizes: dict[GroupKey, int] = field(default_factory=dict)  # students per distillation group
    memory: dict[str, float] = field(default_factory=dict)

    def totals(self) -> dict[str, Totals]:
        c = self.config
        T, B = c.num_iterations, c.burn_in
        out = {"teacher": self.teacher.repeated(T)}
        out["students"] = Totals()
        for key, ops in self.groups.items():
            out["students"] = out["students"] + ops.repeated(count_after_burn_in(T, B, key.thinning))
        ensemble = count_after_burn_in(T, B, c.eval_thinning) * self.num_eval / EVAL_CHUNK
        evals = log_evaluations(c) * self.num_test / EVAL_CHUNK + self.num_eval / EVAL_CHUNK
        out["evaluation"] = self.accumulate_chunk.repeated(ensemble) + self.students_chunk.repeated(evals)
        return {k: Totals(*(x * self.batches for x in dataclasses.astuple(v))) for k, v in out.items()}


def _limited(engine: GPEDEngine, n: int):
    """The engine's evaluation limited to its first ``n`` inputs (one chunk), as a context manager."""
    class _Ctx:
        def __enter__(self_inner):
            self_inner.saved = (engine.num_eval, dict(engine.eval_slices))
            engine.num_eval = n
            engine.eval_slices = {"test": slice(0, n)}

        def __exit__(self_inner, *exc):
            engine.num_eval, engine.eval_slices = self_inner.saved
    return _Ctx()


def _measure_engine(engine: GPEDEngine) -> tuple[Ops, dict[GroupKey, Ops], Ops, Ops]:
    engine.step()  # warm-up at t = 0 (before burn-in: the teacher only)
    teacher = measure(engine.step)
    t = engine.config.burn_in + 1
    groups = {key: measure(lambda key=key: engine.distill_group(key, t)) for key in engine.chains[0].groups}
    with _limited(engine, EVAL_CHUNK):
        accumulate = measure(engine.accumulate)
        outputs = measure(lambda: engine.student_outputs(["test"]))
    return teacher, groups, accumulate, outputs


def model_label(task: ChainTask) -> str:
    return task.config.model_name if isinstance(task.data, DataConfig) else f"spiral {task.config.model_name}"


def measure_kind(label: str, tasks: Sequence[ChainTask], batches: int = 1) -> KindWork:
    """Build and measure one batch kind (``tasks`` = the chains of its largest batch)."""
    K = len(tasks)
    if K == 1:
        spec, _ = spec_of(tasks[0])
        engine = GPEDEngine([spec])
        teacher, groups, accumulate, outputs = _measure_engine(engine)
        ref = engine
    else:
        measured = {}
        for k in (2, 3):
            specs = [spec_of(t)[0] for t in (list(tasks) * 3)[:k]]
            engine = GPEDEngine(specs, use_vmap=True)
            measured[k] = _measure_engine(engine)
            ref = engine
        a, b = measured[2], measured[3]
        teacher = extrapolate(a[0], 2, b[0], 3, K)
        groups = {key: extrapolate(a[1][key], 2, b[1][key], 3, K) for key in b[1]}
        accumulate = extrapolate(a[2], 2, b[2], 3, K)
        outputs = extrapolate(a[3], 2, b[3], 3, K)
    mem = ref.memory_bytes()
    state = (mem["total"] - mem["data"]) // ref.K
    spec0 = ref.chains[0]
    T, B = spec0.config.num_iterations, spec0.config.burn_in
    student_steps = sum(count_after_burn_in(T, B, s.config.thinning) for s in spec0.students)
    return KindWork(label, model_label(tasks[0]), K, batches, spec0.config, teacher, groups, accumulate, outputs,
                    ref.num_eval, int(spec0.data.test_x.shape[0]), state, student_steps,
                    {key: len(slots) for key, slots in spec0.groups.items()})


# ----------------------------------------------------------------------------- work after the chains
def finetune_work(task: ChainTask, settings: E3.Experiment3Settings) -> tuple[Totals, int]:
    """Experiment 3 after the chain: each group l1/l2 student fine-tuned (upper bound: unpruned) for
    epochs x N / M / H steps, evaluated on the test set after pruning and after fine-tuning, and
    every network's latency passes (batch 100, ``latency_repeats`` times)."""
    data, _ = task_data(task)
    model = task.config.model_name
    out_dims = {}
    epochs = settings.search.finetune_epochs or FINETUNE_EPOCHS[paper_model(model).dataset]
    total, steps_all = Totals(), 0
    x = data.distill_x[:1_000]
    shape = tuple(data.input_shape)
    for s in task.students:
        target = resolve_target(s.target)
        dim = out_dims.setdefault(target.name, target.out_dim(10))
        net = build_network(s.arch, shape, dim)
        latency = measure(lambda net=net: net.eval()(torch.zeros(settings.search.latency_batch_size, *shape)))
        networks = 1 if s.regularizer is None else 3  # a group l1/l2 student: distilled, pruned, fine-tuned
        total = total + latency.repeated((settings.search.latency_repeats + 3) * networks)  # 3 warm-up passes
        if s.regularizer is None:
            continue
        targets = torch.rand(x.shape[0], dim)
        targets = targets.softmax(-1) if target.predictive_classes else targets
        one = measure(lambda: E3.finetune(net, x, targets, target, 1, 1e-3, batch_size=s.batch_size)).repeated(1)
        two = measure(lambda: E3.finetune(net, x, targets, target, 2, 1e-3, batch_size=s.batch_size)).repeated(1)
        steps = int(round(epochs * task.data.labelled_size / task.config.sampler.batch_size / s.thinning))
        steps_all += steps
        total = total + one + (two - one) * (steps - 1)
        test = measure(lambda net=net: net.eval()(data.test_x[:EVAL_CHUNK]))
        total = total + test.repeated(2 * data.test_x.shape[0] / EVAL_CHUNK)
    return total, steps_all


def hydra_work(task: ChainTask, settings: C.ComparisonSettings, spiral: bool = False) -> tuple[Totals, int]:
    """Hydra on a chain's S snapshots: their logits on D' (S forward passes over D'), phase 1 (one
    head) and phase 2 (S heads) Adam steps, and the comparison's evaluation of the snapshots and
    Hydra on every evaluation set (twice each: uncertainties and marginal variances)."""
    data, _ = task_data(task) if not spiral else (None, True)
    if spiral:
        data = spiral_data(task.data)
    config = settings.spiral.hydra if spiral else settings.hydra
    S = task.config.num_snapshots
    arch = task.config.model_name if not spiral else "fcnn"
    shape = tuple(data.input_shape)
    c = data.num_classes
    teacher = instantiate(task.config.model, shape, c, "model")
    snaps = torch.nn.utils.parameters_to_vector(teacher.parameters()).detach().expand(S, -1).contiguous()
    n_sub = min(data.distill_x.shape[0], 1_000)
    one_pass = measure(lambda: hydra.snapshot_logits(snaps[:1], arch, shape, c, data.distill_x[:n_sub]))
    distill_passes = S * data.distill_x.shape[0] / n_sub
    total = one_pass.repeated(distill_passes)
    logits = torch.randn(S, n_sub, c)

    def train(p1: int, p2: int) -> Ops:
        cfg = dataclasses.replace(config, phase1_steps=p1, phase2_steps=p2)
        return measure(lambda: hydra.train_hydra(logits, data.distill_x[:n_sub], arch, shape, cfg, progress=False))

    base, p1, p2 = train(1, 1).repeated(1), train(2, 1).repeated(1), train(1, 2).repeated(1)
    total = total + base + (p1 - base) * (config.phase1_steps - 1) + (p2 - base) * (config.phase2_steps - 1)
    eval_inputs = data.test_x.shape[0] + sum(v.shape[0] for v in data.ood_x.values())
    net = hydra.build_hydra(arch, shape, c, S, config.head_hidden)
    head_pass = measure(lambda: net.eval()(data.test_x[:EVAL_CHUNK]))
    total = total + one_pass.repeated(2 * S * eval_inputs / n_sub) + head_pass.repeated(2 * eval_inputs / EVAL_CHUNK)
    return total, config.phase1_steps + config.phase2_steps


# ----------------------------------------------------------------------------- the notebooks
@dataclass
class NotebookWork:
    name: str
    chains: int
    sgld_steps: int
    student_steps: int
    totals: dict[str, Totals]
    memory: dict[str, float]
    notes: list[str] = field(default_factory=list)
    kinds: list[KindWork] = field(default_factory=list)
    extra_steps: int = 0
    extra_label: str = ""

    @property
    def total(self) -> Totals:
        out = Totals()
        for v in self.totals.values():
            out = out + v
        return out


def _batched(tasks: Sequence[ChainTask], per_batch: int) -> list[list[ChainTask]]:
    """Consecutive tasks of one model in batches of at most ``per_batch`` (as run_chains groups them)."""
    out: list[list[ChainTask]] = []
    for task in tasks:
        if out and len(out[-1]) < per_batch and out[-1][0].config.model_name == task.config.model_name:
            out[-1].append(task)
        else:
            out.append([task])
    return out


def chains_work(name: str, tasks: Sequence[ChainTask], per_batch: int | str = 1, notes: Sequence[str] = (),
                measure_rss: bool = True) -> NotebookWork:
    # "auto" batches as many consecutive chains of one model as the device's memory holds; on the GPU predicted
    # here that is all of them (the memory section below gives the largest batch's footprint)
    batches = _batched(tasks, len(tasks) if per_batch == "auto" else per_batch)
    kinds: list[KindWork] = []
    # one measurement per distinct (model, K): the first batch of that shape stands for all of them
    seen: dict[tuple, KindWork] = {}
    for batch in batches:
        key = (model_label(batch[0]), len(batch), tuple(s.label for s in batch[0].students),
               repr(batch[0].config.sampler))
        if key in seen:
            seen[key].batches += 1
            continue
        label = f"{model_label(batch[0])} x{len(batch)}"
        print(f"  {name}: measuring {label}", flush=True)
        kind = measure_kind(label, batch)
        kind.memory = batch_memory(batch, kind.state_per_chain)
        if len(batch) > 1 and measure_rss:
            kind.memory["rss"] = measured_rss(batch)
        seen[key] = kind
        kinds.append(kind)
    totals: dict[str, Totals] = {}
    for kind in kinds:
        for part, value in kind.totals().items():
            totals[part] = totals.get(part, Totals()) + value
    memory = max((k.memory for k in kinds), key=lambda m: m["device"])
    return NotebookWork(name, sum(k.K * k.batches for k in kinds),
                        sum(k.config.num_iterations * k.K * k.batches for k in kinds),
                        sum(k.student_steps_per_chain * k.K * k.batches for k in kinds), totals, memory,
                        list(notes), kinds)


def search_work(work: NotebookWork, tasks: Sequence[ChainTask], settings: E3.Experiment3Settings) -> None:
    """Experiment 3 after its chains: every pruned student's fine-tuning, evaluations and latency passes."""
    extra, steps = Totals(), 0
    for task in tasks:
        t, s = finetune_work(task, settings)
        extra, steps = extra + t, steps + s
    work.totals["after the chains"] = extra
    work.extra_steps, work.extra_label = steps, "fine-tuning steps"


def hydra_chains_work(work: NotebookWork, tasks: Sequence[ChainTask], settings: C.ComparisonSettings) -> None:
    """The comparison after its chains: Hydra on each chain's snapshots (the MNIST chain's and the spiral's)."""
    extra, steps = Totals(), 0
    for task in tasks:
        t, s = hydra_work(task, settings, spiral=isinstance(task.data, SpiralConfig))
        extra, steps = extra + t, steps + s
    work.totals["after the chains"] = extra
    work.extra_steps, work.extra_label = steps, "Hydra steps"


#: What each kind of work after the chains (a registry entry's ``after_chains``) adds to a notebook.
AFTER_CHAINS: dict[str, Callable[[NotebookWork, Sequence[ChainTask], object], None]] = {
    "search": search_work, "hydra": hydra_chains_work}
#: Notes on the page beside a notebook's row.
NOTES = {"06_experiment4_uncertainty": ["OOD sets: those present here (Fashion-MNIST, masked and whole, for MNIST; "
                                        "none for CIFAR-10); KMNIST and notMNIST would add their sizes to every "
                                        "ensemble sample"]}


def all_notebooks(only: Sequence[str] = ()) -> list[NotebookWork]:
    """The work of every registered notebook that runs chains (:data:`gped_kit.experiments.registry.NOTEBOOKS`),
    under its unscaled paper profile, in the registry's order; a chain an earlier notebook runs (the same
    task) is counted there only, since the later notebook reuses it from the store. ``only``: notebook
    name prefixes."""
    out: list[NotebookWork] = []
    earlier: dict[ChainTask, str] = {}
    for entry in NOTEBOOKS.values():
        if entry.tasks is None or "paper" not in entry.profiles:
            continue
        settings = entry.settings("paper")
        tasks = entry.chain_tasks(settings)
        new = [t for t in tasks if t not in earlier]
        reused = sorted({earlier[t] for t in tasks if t in earlier})
        earlier.update({t: entry.name for t in new})
        if only and not any(entry.name.startswith(o) for o in only):
            continue
        notes = list(NOTES.get(entry.name, ()))
        if reused:
            notes.insert(0, f"{len(tasks)} cells; the {len(tasks) - len(new)} that {', '.join(reused)} runs too are "
                            "reused from the store")
        work = chains_work(entry.name, new, entry.chains_per_batch(settings), notes)
        if entry.after_chains:
            AFTER_CHAINS[entry.after_chains](work, new, settings)
        out.append(work)
    return out


# ----------------------------------------------------------------------------- report
def _si(x: float, unit: str = "") -> str:
    for factor, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def _duration(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 60:
        return f"{s / 60:.0f} min"
    return f"{s:.0f} s"


def _shares(t: Totals) -> str:
    whole = t.compute_s + t.memory_s + t.launch_s
    return " / ".join(f"{100 * x / whole:.0f}%" for x in (t.compute_s, t.memory_s, t.launch_s)) if whole else "-"


def _gib(b: float) -> str:
    return f"{b / 2**30:.2f} GiB"


def markdown(works: Sequence[NotebookWork], seconds: float, peak_rss: float) -> str:
    lines = ["# The paper profile's work and a predicted time on one H100", "",
             "Written by `benchmarks/paper_profile_work.py` (see its docstring for the method). Every number of work "
             "below is **counted** on the real networks at the real sizes and batch sizes (FLOPs by "
             "`torch.utils.flop_counter.FlopCounterMode`, forward and backward); the times are a **prediction** "
             "from a roofline model, **not a measurement**. The first measurement on a GPU (NVIDIA H200, "
             "2026-11-26: notebook 01's chains with their four students, FCNN at about 510 SGLD steps/s and "
             "CNN-MNIST at about 385, so 10^6 steps in about 33 and 43 min, launch-bound) is in "
             "[device-runs/2026-11-26-nvidia-h200](device-runs/2026-11-26-nvidia-h200/README.md) and "
             "[device-runs/2026-11-26-nvidia-h200-2](device-runs/2026-11-26-nvidia-h200-2/README.md).", "",
             "The paper profile has been *executed* on the CPU with only its iteration counts scaled down "
             "(`tests/test_paper_profile.py`), so every code path below runs; this page says what the unscaled "
             "runs cost.", "",
             render_deviations(), "",  # what the paper profiles do that the paper does not state
             "## In short: per notebook", "", *compact(works), "",
             "## Per notebook (paper profile, unscaled)", "",
             "| notebook | chains | SGLD steps | student steps | FLOPs per teacher step | FLOPs per student step "
             "| FLOPs in all | bytes moved per SGLD step | peak memory (device) | predicted H100 time "
             f"| at {HOST_LAUNCH_S * 1e6:.0f} us/kernel |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for w in works:
        kinds = _distinct_models(w.kinds)

        def per_kind(value: Callable[[KindWork], float], unit: str) -> str:
            values = [(k, value(k)) for k in kinds]
            if len({round(v, -3) for _, v in values}) == 1:
                return _si(values[0][1], unit)
            return "; ".join(f"{k.model}: {_si(v, unit)}" for k, v in values)

        tot = w.total
        steps = f"{w.student_steps:,}" + (f" + {w.extra_steps:,} {w.extra_label}" if w.extra_steps else "")
        lines.append(f"| {w.name} | {w.chains} | {w.sgld_steps:,} | {steps} "
                     f"| {per_kind(lambda k: sum(k.teacher.flops) / k.K, 'FLOP')} "
                     f"| {per_kind(_student_step_flops, 'FLOP')} | {_si(tot.flops, 'FLOP')} "
                     f"| {per_kind(lambda k: sum(k.teacher.bytes) / k.K, 'B')} "
                     f"| {_gib(w.memory['device'])} | {_duration(tot.seconds)} | {_duration(tot.host_seconds)} |")
    lines += ["", "Columns: *chains* computed by the notebook (run after the notebooks before it, in one store); "
              "*SGLD steps* = chains x T; *student steps* = sum over the chains' students of their Adam steps, "
              "floor((T - 1) / H) - floor(B / H) each (one per H iterations after burn-in); *FLOPs per teacher step* "
              "and *per student step* are per chain, per teacher model (a student step: S' drawn, "
              "the teacher's statistics on it, one Adam step, averaged over its students); *FLOPs in all* includes "
              "the ensemble's evaluation passes, the log-point and final evaluations and the work after the chains; "
              "*bytes moved per SGLD step* per chain (teacher step only); *peak memory* the largest batch's "
              "tensors on the device (see below).", "",
              "## Where the time goes (predicted, H100)", "",
              "| notebook | batches | teacher steps | student steps | evaluation | after the chains | time bound by "
              "compute / memory / launch | FLOPs: teacher / students / evaluation | engine-held tensors (largest "
              "batch) | device in all |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    for w in works:
        parts = {k: w.totals.get(k, Totals()) for k in ("teacher", "students", "evaluation", "after the chains")}
        batches = ", ".join(f"{k.batches} x {k.label}" for k in w.kinds)
        lines.append(f"| {w.name} | {batches} | {_duration(parts['teacher'].seconds)} "
                     f"| {_duration(parts['students'].seconds)} | {_duration(parts['evaluation'].seconds)} "
                     f"| {_duration(parts['after the chains'].seconds) if parts['after the chains'].kernels else '-'} "
                     f"| {_shares(w.total)} | {_si(parts['teacher'].flops)} / {_si(parts['students'].flops)} / "
                     f"{_si(parts['evaluation'].flops)} | {_gib(w.memory['engine'])} | {_gib(w.memory['device'])} |")
    total = Totals()
    for w in works:
        total = total + w.total
    lines += ["", f"All notebooks: {_si(total.flops, 'FLOP')}, predicted **{_duration(total.seconds)}** on one H100 "
              f"({_duration(total.host_seconds)} at {HOST_LAUNCH_S * 1e6:.0f} us per kernel). Notebooks 04 and 09 "
              "have no paper profile (they train nothing, or only their own small digits chains); notebook 08 (the "
              "thesis toys) is NumPy on the CPU and not a GPU job (its paper profile is timed by the test).", ""]
    lines += ["## Per step, per chain kind", "",
              "| notebook | kind | K | kernels per teacher step | teacher step: FLOPs / bytes (batch) | groups (H: "
              "students, FLOPs per step of the batch) | ensemble pass: FLOPs (batch) | predicted teacher step |",
              "| --- | --- | ---: | ---: | --- | --- | ---: | ---: |"]
    for w in works:
        for k in w.kinds:
            groups = "; ".join(f"{_group_label(key)}: {k.group_sizes.get(key, 0)}, {_si(sum(ops.flops))}"
                               for key, ops in k.groups.items())
            ens = sum(k.accumulate_chunk.flops) * k.num_eval / EVAL_CHUNK
            lines.append(f"| {w.name} | {k.label} | {k.K} | {len(k.teacher.flops)} | {_si(sum(k.teacher.flops))} / "
                         f"{_si(sum(k.teacher.bytes), 'B')} | {groups} | {_si(ens)} "
                         f"| {k.teacher.seconds(LAUNCH_S) * 1e3:.2f} ms |")
    lines += ["", "## Memory", "",
              "*Engine-held tensors*: `GPEDEngine.memory_bytes()` (torch's accounting: parameters, Adam state, U_o "
              "stores, ensemble sums, snapshots, and each distinct data set once as the engine's `ChainSets` stores "
              "them) for the notebook's largest batch at its real sizes. *Device in all*: that plus the chains' own "
              "data tensors, which stay referenced by their `ChainSpec`s next to the engine's concatenated copy "
              "(for a batch of chains with different data every set is held twice). Activations of one step are "
              "small beside these (M = 100; evaluation in chunks of 500 inputs). The largest batch of notebook 02 "
              "(23 FCNN or CNN chains at every |D| and mask) holds 23 distinct labelled sets, 6 masked D' and 6 "
              "masked test sets.", ""]
    rss = [(w.name, k) for w in works for k in w.kinds if "rss" in k.memory]
    if rss:
        lines += ["Measured on the CPU, as a check of the accounting: the peak RSS of a fresh process that builds "
                  "the batch at its real sizes (its chains' data, the engine) and takes a teacher step, every "
                  "group's student step and one evaluation chunk (it includes PyTorch's own ~0.3 GiB and the data "
                  "loader's transient copies):", "",
                  "| notebook | batch | device in all (accounting) | peak RSS (measured) |",
                  "| --- | --- | ---: | ---: |"]
        lines += [f"| {name} | {k.label} | {_gib(k.memory['device'])} | {_gib(k.memory['rss'])} |" for name, k in rss]
        lines.append("")
    lines += [f"This script's own peak RSS on the CPU: {_gib(peak_rss)}; it ran {seconds / 60:.1f} min.", "",
              "## Assumptions of the prediction", ""]
    lines += [f"- {a}" for a in ASSUMPTIONS]
    notes = [f"- {w.name}: {n}" for w in works for n in w.notes]
    if notes:
        lines += ["", "## Notes", "", *notes]
    return "\n".join(lines) + "\n"


def compact(works: Sequence[NotebookWork]) -> list[str]:
    """The short table: work per notebook and the predicted time (a prediction, not a measurement)."""
    lines = ["| notebook | chains | SGLD steps | student steps | FLOPs | peak memory | predicted time on one H100 |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    total = Totals()
    for w in works:
        t = w.total
        total = total + t
        steps = f"{w.student_steps / 1e6:.2f} M" + (f" + {w.extra_steps / 1e3:.0f} k {w.extra_label}"
                                                    if w.extra_steps else "")
        lines.append(f"| {w.name} | {w.chains} | {w.sgld_steps / 1e6:g} M | {steps} | {_si(t.flops)} "
                     f"| {_gib(w.memory['device'])} | {_duration(t.seconds)} ({_duration(t.host_seconds)}) |")
    lines.append(f"| all | {sum(w.chains for w in works)} | {sum(w.sgld_steps for w in works) / 1e6:g} M "
                 f"| {sum(w.student_steps for w in works) / 1e6:.1f} M | {_si(total.flops)} | "
                 f"| {_duration(total.seconds)} ({_duration(total.host_seconds)}) |")
    lines += ["", f"Predicted, not measured: a per-kernel roofline on one H100 SXM (FP32 {FP32_PEAK / 1e12:.0f} "
              f"TFLOP/s, HBM3 {HBM_BANDWIDTH / 1e12:.2f} TB/s, {LAUNCH_S * 1e6:.0f} us per kernel; in brackets "
              f"{HOST_LAUNCH_S * 1e6:.0f} us per kernel, a host-bound eager PyTorch) from FLOPs and bytes counted on "
              "the real networks at the real batch sizes; peak memory: the largest batch's tensors on the device."]
    return lines


def _group_label(key: GroupKey) -> str:
    """A distillation group (H, M', input generator, noise std, derivative matching) in words."""
    label = f"H={key.thinning}"
    if key.input_generator != "data":
        label += f" {key.input_generator} inputs"
    return label + (" + derivative" if key.matches_derivatives else "")


def _distinct_models(kinds: Sequence[KindWork]) -> list[KindWork]:
    """One kind per teacher model (the first), in order."""
    out: dict[str, KindWork] = {}
    for k in kinds:
        out.setdefault(k.model, k)
    return list(out.values())


def _student_step_flops(kind: KindWork) -> float:
    """FLOPs of one student step per chain: a group step's FLOPs over its students, averaged over all students."""
    total, n = 0.0, 0
    for key, ops in kind.groups.items():
        students = kind.group_sizes.get(key, 1)
        steps = count_after_burn_in(kind.config.num_iterations, kind.config.burn_in, key.thinning)
        total += sum(ops.flops) / kind.K * steps
        n += students * steps
    return total / max(n, 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=(), help="notebook prefixes, e.g. 02 05")
    parser.add_argument("--no-write", action="store_true", help="print the page, do not write docs/paper_profile.md")
    parser.add_argument("--output", default=str(Path(__file__).resolve().parents[1] / "docs" / "paper_profile.md"))
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    started = time.perf_counter()
    works = all_notebooks(args.only)
    page = markdown(works, time.perf_counter() - started, _peak_rss())
    print(page)
    if not args.no_write:
        Path(args.output).write_text(page)
        print(f"written: {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
