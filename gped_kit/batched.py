"""Many GPED chains and all their students as one batched computation (issue 7).

The paper's experiments are grids of SGLD chains (Experiment 2: 4 labelled-set sizes x 6
masking levels, T = 10^6 each). One FCNN step with M = 100 is microseconds of GPU work, so a
loop over one chain is bound by kernel launches and Python. :class:`BatchedGPED` runs K
independent chains -- grid cells that may differ in their data (N, masking, D'), seed, step
size eta, prior precision tau and the students' learning-rate schedules -- and all their
students as *one* computation: every tensor of the K chains is stacked along a leading chain
axis, networks run as ``torch.func.vmap`` over ``torch.func.functional_call`` of the stacked
parameters, and each optimiser update is a handful of whole-stack kernels.

**Equal to K sequential runs.** The engine is a wrapper over K already-built
:class:`gped_kit.distill.GPEDRun` objects, so initialisation, seeds, random generators,
estimators and accumulators are the sequential engine's. Every random number is drawn with
the run's *own* generator, in the same shapes and order as :meth:`GPEDRun.run` (minibatch
indices from ``gen_data``; SGLD noise from ``gen_noise`` as one ``normal_`` over a flat buffer
of P elements, split in parameter order exactly as :class:`gped_kit.samplers.SGLD` does;
distillation indices and input noise from the group generators). The SGLD update is Eq. 7 as
:func:`gped_kit.samplers.sgld_update_` computes it, the students' update is
``torch.optim.Adam``'s default formula, and U_o's running sums are updated with the same
``index_add_`` (duplicate indices count as several visits). The results of chain k therefore
equal a separate ``GPEDRun.run()`` of an identically built run up to floating-point
round-off: batched matrix products and reductions sum in another order (the teacher differs
by ~1e-8 after tens of steps in the tests; Adam, which divides each gradient element by its
own magnitude, turns that into ~1e-6..2e-5 in student parameters). Like any two runs on
different hardware, the trajectories drift apart slowly over very long chains; the
computation is the same. **Students with dropout are the exception:** their masks come from
the global random stream, drawn for all chains at once (``vmap(randomness="different")``), so
they are valid but cannot equal the sequential run's (a batched run still resumes exactly).

**State lives in the stacks, the runs see views.** Teacher and student parameters, Adam
moments, U_o sums and counts, the test/OOD-set ensemble sums and the NLL/loss sums are
stacked once; every run's own tensors are then re-pointed at views of the stacks
(``p.data = stack[k]``), and the batched loop updates the stacks *in place*. The runs stay
valid at all times: ``run._log()``, ``run.result()``, ``run.teacher_metrics()`` work on them
unchanged, and checkpoints are written by ``run.save_checkpoint`` in the sequential engine's
format (a sequential ``GPEDRun`` resumes them; :meth:`BatchedGPED.save_checkpoints` first
gives each run private copies, because ``torch.save`` of a view writes the whole stacked
storage). Data sets are stacked too (each distinct D / D' / evaluation set once, chains
sharing one share it), and the runs' ``data`` tensors become views of the stacks.

**No host synchronisation in the loop.** As in the sequential engine, nothing is read back
from the device between log points: per-chain step sizes and learning rates are computed on
the host in double precision as the sequential engine does (each run's own ``_set_lr``) and
uploaded as small ``(K, 1)`` tensors (non-blocking copies from pinned memory on CUDA: Adam's
step sizes every distillation step, eta's coefficients once, or every step for the
polynomial schedule), batch shapes never depend on data, and the only reads are the runs' own
``_log()`` calls every ``log_every`` steps and the checkpoints.

Use::

    runs = [GPEDRun(data_k, config_k, students) for data_k, config_k in cells]
    results = BatchedGPED(runs).run(checkpoints=[f"runs/cell{k}.pt" for k in range(len(runs))])

:func:`check_batchable` says which runs can share one computation; :func:`batch_memory_bytes`
what the stacked state costs.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import torch
from torch.func import functional_call, vmap
from torch.nn import functional as F

from .distill import GPEDResult, GPEDRun
from .models import ArchSpec, count_parameters, flat_parameters
from .targets import OnlineMeanEstimator, SplitEstimator, StochasticEstimator, Target

__all__ = ["BatchedGPED", "check_batchable", "batch_memory_bytes", "memory_estimate",
           "batched_sgld_update_", "sgld_coefficients", "batched_adam_step_", "adam_coefficients"]


# --------------------------------------------------------------------------------------
# Batched update rules (tested against the sequential ones)
# --------------------------------------------------------------------------------------

def sgld_coefficients(step_sizes: Sequence[float], num_data: Sequence[int],
                      prior_precisions: Sequence[float]) -> tuple[list[float], list[float], list[float]]:
    """Per-chain host coefficients of Eq. 7 as :func:`gped_kit.samplers.sgld_update_` forms them:
    ``a = tau / N`` (prior term added to the mean-NLL gradient), ``b = -eta N / 2`` (gradient
    step) and ``c = sqrt(eta)`` (noise scale)."""
    a = [tau / n for tau, n in zip(prior_precisions, num_data)]
    b = [-0.5 * eta * n for eta, n in zip(step_sizes, num_data)]
    c = [math.sqrt(eta) for eta in step_sizes]
    return a, b, c


@torch.no_grad()
def batched_sgld_update_(theta: torch.Tensor, nll_grad: torch.Tensor, noise: torch.Tensor,
                         a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    """Eq. 7 for K chains at once, in place: ``theta``, ``nll_grad`` (gradient of each chain's
    minibatch *mean* NLL) and ``noise`` (standard normal) are ``(K, P)``; ``a``, ``b``, ``c``
    are ``(K, 1)`` (:func:`sgld_coefficients`). Row k computes what
    ``samplers.sgld_update_(params_k, grads_k, noise_k, eta_k, N_k, tau_k)`` does:
    ``g += a theta; theta += b g; theta += c xi``. ``nll_grad`` is overwritten. (With tau = 0
    the sequential update skips the prior term; here it adds ``0 * theta``, the same value.)"""
    nll_grad.addcmul_(theta, a)
    theta.addcmul_(nll_grad, b)
    theta.addcmul_(noise, c)


def adam_coefficients(lrs: Sequence[float], step: int, beta1: float = 0.9,
                      beta2: float = 0.999) -> tuple[list[float], float]:
    """Host coefficients of Adam's update ``step`` (1 for the first), computed in double
    precision exactly as ``torch.optim.Adam`` forms them: the per-chain step sizes
    ``-lr_k / (1 - beta1^step)`` and ``sqrt(1 - beta2^step)``."""
    bias_correction1 = 1 - beta1 ** float(step)
    return [-(lr / bias_correction1) for lr in lrs], (1 - beta2 ** float(step)) ** 0.5


@torch.no_grad()
def batched_adam_step_(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
                       neg_step_size: torch.Tensor, bias_correction2_sqrt: float | torch.Tensor,
                       beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> None:
    """One step of ``torch.optim.Adam`` (default: no weight decay, no amsgrad) for K stacked
    parameter sets with per-chain learning rates, in place.

    ``param``, ``grad``, ``exp_avg``, ``exp_avg_sq`` are ``(K, P)`` (any shape with the chain
    axis first); ``neg_step_size`` is ``(K, 1)`` and ``bias_correction2_sqrt`` a float or a
    tensor broadcasting like it (:func:`adam_coefficients`). The formula is Adam's::

        m = lerp(m, g, 1 - beta1);  v = beta2 v + (1 - beta2) g^2
        theta += (-lr / (1 - beta1^step)) m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
    """
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
    param.addcdiv_(exp_avg * neg_step_size, denom)


# --------------------------------------------------------------------------------------
# What can be batched
# --------------------------------------------------------------------------------------

_SUPPORTED_GENERATORS = (None, "resample")


def _student_arch(run: GPEDRun, j: int) -> ArchSpec:
    return run.student_configs[j].arch or ArchSpec(run.config.model)


def _eval_layout(run: GPEDRun) -> list[tuple[str, int]]:
    return [(name, sl.stop - sl.start) for name, sl in run.eval_slices.items()]


def _uses_store(estimator: str) -> bool:
    return "U_o" in estimator


def check_batchable(runs: Sequence[GPEDRun]) -> None:
    """Raise ``ValueError`` naming the first field in which ``runs`` cannot share one batched
    computation (or the unsupported feature and its value); return None when they can.

    Shared by all runs: teacher family, input shape, number of classes, device, T, B,
    ``eval_thinning``, ``log_every``, ``checkpoint_every``, the SGLD batch size M and schedule
    type, the current step t, the evaluation sets (test set and OOD sets: names and sizes), and
    the students slot by slot (target, estimator, architecture, thinning H, batch size M',
    input generator). Per chain they may differ in the data (N, masks, D'; |D'| must be equal
    when a student uses U_o), the seed, eta, tau, and the students' lr and lr-halving period.
    Not supported: regularisers, derivative matching, the "perturb"/"noise" input
    generators, snapshots (``num_snapshots``), Adam settings other than the defaults.
    """
    runs = list(runs)
    if not runs:
        raise ValueError("check_batchable: no runs given")
    for k, run in enumerate(runs):
        if not isinstance(run, GPEDRun):
            raise ValueError(f"check_batchable: runs[{k}] is a {type(run).__name__}, not a GPEDRun")
    if len({id(r) for r in runs}) != len(runs):
        raise ValueError("check_batchable: the same GPEDRun object appears twice; build one run per chain")

    # features the batched loop does not implement, per run and student
    for k, run in enumerate(runs):
        if run.config.num_snapshots:
            raise ValueError(f"check_batchable: runs[{k}] has GPEDConfig.num_snapshots={run.config.num_snapshots}; "
                             "snapshots are not supported by the batched engine (use GPEDRun)")
        if getattr(run, "_batched_owner", None) is not None:
            raise ValueError(f"check_batchable: runs[{k}] already belongs to a BatchedGPED; build fresh runs")
        teacher_dtypes = {p.dtype for p in run.teacher.parameters()}
        if teacher_dtypes != {torch.float32}:
            raise ValueError(f"check_batchable: runs[{k}] teacher dtype {teacher_dtypes}; only float32 is supported")
        for s in run.students:
            sc = s.config
            if s.regularizer is not None:
                raise ValueError(f"check_batchable: runs[{k}] student {sc.label!r} has regularizer="
                                 f"{_describe(sc.regularizer)} with reg_weight={sc.reg_weight}; regularisers are not "
                                 "supported by the batched engine")
            if sc.derivative_weight != 0:
                raise ValueError(f"check_batchable: runs[{k}] student {sc.label!r} has derivative_weight="
                                 f"{sc.derivative_weight}; derivative matching is not supported by the batched engine")
            if sc.input_generator not in _SUPPORTED_GENERATORS:
                raise ValueError(f"check_batchable: runs[{k}] student {sc.label!r} has input_generator="
                                 f"{sc.input_generator!r}; the batched engine supports None and 'resample'")
            group = s.optimizer.param_groups[0]
            if not isinstance(s.optimizer, torch.optim.Adam) or len(s.optimizer.param_groups) != 1:
                raise ValueError(f"check_batchable: runs[{k}] student {sc.label!r} optimizer is not a "
                                 "single-group Adam")
            for name, default in (("weight_decay", 0), ("amsgrad", False), ("maximize", False)):
                if group.get(name, default) != default:
                    raise ValueError(f"check_batchable: runs[{k}] student {sc.label!r} Adam {name}="
                                     f"{group.get(name)!r}; only {default!r} is supported")

    ref = runs[0]
    for k, run in enumerate(runs[1:], start=1):
        fields = [
            ("GPEDConfig.model", lambda r: r.config.model),
            ("data.input_shape", lambda r: tuple(r.data.input_shape)),
            ("data.num_classes", lambda r: r.num_classes),
            ("device", lambda r: r.device),
            ("GPEDConfig.num_iterations (T)", lambda r: r.config.num_iterations),
            ("GPEDConfig.burn_in (B)", lambda r: r.config.burn_in),
            ("GPEDConfig.eval_thinning", lambda r: r.config.eval_thinning),
            ("GPEDConfig.log_every", lambda r: r.config.log_every),
            ("GPEDConfig.checkpoint_every", lambda r: r.config.checkpoint_every),
            ("SGLDConfig.batch_size (M)", lambda r: r.config.sgld.batch_size),
            ("SGLDConfig.schedule", lambda r: r.config.sgld.schedule),
            ("current step t", lambda r: r.t),
            ("evaluation sets (name, size)", _eval_layout),
            ("number of students", lambda r: len(r.students)),
        ]
        for name, get in fields:
            if get(run) != get(ref):
                raise ValueError(f"check_batchable: runs[{k}] differs from runs[0] in {name}: "
                                 f"{get(run)!r} != {get(ref)!r}")
        for j, (s, s0) in enumerate(zip(run.students, ref.students)):
            sc, sc0 = s.config, s0.config
            slot = [
                ("target", lambda c, s_: s_.target.name),
                ("target definition", lambda c, s_: s_.target),
                ("estimator", lambda c, s_: c.estimator),
                ("arch", lambda c, s_: c.arch or ArchSpec(run.config.model)),
                ("thinning (H)", lambda c, s_: c.thinning),
                ("batch_size (M')", lambda c, s_: c.batch_size),
                ("input_generator", lambda c, s_: c.input_generator),
                ("Adam betas", lambda c, s_: tuple(s_.optimizer.param_groups[0]["betas"])),
                ("Adam eps", lambda c, s_: s_.optimizer.param_groups[0]["eps"]),
            ]
            for name, get in slot:
                if get(sc, s) != get(sc0, s0):
                    raise ValueError(f"check_batchable: runs[{k}] student {j} ({sc.label!r}) differs from runs[0]'s "
                                     f"({sc0.label!r}) in {name}: {get(sc, s)!r} != {get(sc0, s0)!r}")
    if any(_uses_store(s.config.estimator) for s in ref.students):
        sizes = [r.data.distill_x.shape[0] for r in runs]
        for k, n in enumerate(sizes):
            if n != sizes[0]:
                raise ValueError(f"check_batchable: runs[{k}] differs from runs[0] in |D'| (the distillation set): "
                                 f"{n} != {sizes[0]}; U_o stores are stacked per chain and need equal |D'|")


def _describe(obj: object) -> str:
    return repr(obj) if obj is None or isinstance(obj, str) else getattr(obj, "__name__", repr(obj))


# --------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------

def memory_estimate(num_chains: int, teacher_params: int, student_params: Sequence[int],
                    store_dims: Sequence[int], distill_size: int, eval_size: int, eval_dims: Sequence[int],
                    train_images: int, distill_sets: int, eval_sets: int, input_numel: int,
                    bytes_per_float: int = 4) -> dict[str, int]:
    """Bytes of the stacked state of :class:`BatchedGPED` for K = ``num_chains`` chains.

    * ``teacher``: K x P teacher parameters, plus the same again for the gradient and the
      SGLD noise buffer of each step (3 K P floats);
    * ``students``: K x P_s per student for parameters, gradient and Adam's two moments (4 K P_s);
    * ``u_o_stores``: per U_o student, K x |D'| x (dim + 1) (running sums and visit counts;
      ``store_dims`` lists ``dim`` per U_o store: C for predictive U_o, 1 for entropy U_o or
      the entropy column of U_s+U_o);
    * ``accumulators``: K x n_eval x sum(dims) for the teacher ensemble's running sums on the
      test and OOD sets (``eval_dims``: the predictive C plus one entry per other target);
    * ``data``: each distinct set once: ``train_images`` labelled images (+ int64 labels),
      ``distill_sets`` x |D'| images, ``eval_sets`` x n_eval images, of ``input_numel`` floats.

    Activations (one forward/backward of K x M inputs, and K x ``eval_batch_size`` inputs for
    the ensemble) and the sequential runs' own left-over buffers (each ``GPEDRun``'s SGLD noise
    buffer of P floats) are not included.
    """
    K, f = num_chains, bytes_per_float
    out = {
        "teacher": 3 * K * teacher_params * f,
        "students": 4 * K * sum(student_params) * f,
        "u_o_stores": sum(K * distill_size * (d + 1) * f for d in store_dims),
        "accumulators": K * eval_size * sum(eval_dims) * f,
        "data": (train_images * (input_numel * f + 8) + distill_sets * distill_size * input_numel * f
                 + eval_sets * eval_size * input_numel * f),
    }
    out["total"] = sum(out.values())
    return out


def batch_memory_bytes(runs: Sequence[GPEDRun]) -> dict[str, int]:
    """:func:`memory_estimate` for ``runs`` (the stacked state a :class:`BatchedGPED` of them
    holds; distinct data sets are counted once, as the engine stores them)."""
    runs = list(runs)
    ref = runs[0]
    store_dims = []
    for s in ref.students:
        if s.config.estimator == "U_o":
            store_dims.append(s.target.out_dim(ref.num_classes))
        elif s.config.estimator == "U_s+U_o":
            store_dims.append(1)
    train = _unique([r.data.train_x for r in runs], check_content=False)[0]
    distill = _unique([r.data.distill_x for r in runs], check_content=False)[0]
    evals = _unique([r.accumulator.inputs for r in runs], check_content=False)[0]
    return memory_estimate(
        num_chains=len(runs), teacher_params=count_parameters(ref.teacher),
        student_params=[s.num_params for s in ref.students], store_dims=store_dims,
        distill_size=ref.data.distill_x.shape[0], eval_size=ref.accumulator.inputs.shape[0],
        eval_dims=[t.out_dim(ref.num_classes) for t in ref.accumulator.targets.values()],
        train_images=sum(t.shape[0] for t in train), distill_sets=len(distill), eval_sets=len(evals),
        input_numel=math.prod(ref.data.input_shape))


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------

def _same_tensor(a: torch.Tensor, b: torch.Tensor, check_content: bool) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    if a.data_ptr() == b.data_ptr() and a.stride() == b.stride():
        return True
    return check_content and bool(torch.equal(a, b))


def _unique(tensors: Sequence[torch.Tensor], check_content: bool = True,
            partners: Sequence[torch.Tensor] | None = None) -> tuple[list[torch.Tensor], list[int]]:
    """Distinct tensors (by identity, or equal content when ``check_content``; with
    ``partners``, the pair must match) and each input's index among them."""
    uniques: list[int] = []
    index = []
    for i, t in enumerate(tensors):
        for u, first in enumerate(uniques):
            if _same_tensor(tensors[first], t, check_content) and (
                    partners is None or _same_tensor(partners[first], partners[i], check_content)):
                index.append(u)
                break
        else:
            index.append(len(uniques))
            uniques.append(i)
    return [tensors[i] for i in uniques], index


def _flat_layout(module: torch.nn.Module) -> tuple[list[str], list[torch.Size], list[int]]:
    named = list(module.named_parameters())
    return [n for n, _ in named], [p.shape for _, p in named], [p.numel() for _, p in named]


def _views(flat: torch.Tensor, names: Sequence[str], shapes: Sequence[torch.Size]) -> dict[str, torch.Tensor]:
    """``{name: (K, *shape)}`` views of the columns of a ``(K, P)`` stack, in parameter order."""
    out, start, K = {}, 0, flat.shape[0]
    for name, shape in zip(names, shapes):
        n = math.prod(shape)
        out[name] = flat[:, start:start + n].view(K, *shape)
        start += n
    return out


def _stack_modules(modules: Sequence[torch.nn.Module], device: torch.device
                   ) -> tuple[torch.Tensor, dict[str, torch.Tensor], list[str], list[torch.Size]]:
    """Stack the modules' parameters into one ``(K, P)`` tensor (parameter order, as
    ``parameters_to_vector``) and point every module's parameters at views of it."""
    names, shapes, _ = _flat_layout(modules[0])
    flat = torch.stack([flat_parameters(m) for m in modules]).to(device)
    views = _views(flat, names, shapes)
    for k, module in enumerate(modules):
        params = dict(module.named_parameters())
        for name in names:
            params[name].data = views[name][k]
    return flat, views, names, shapes


def _cat(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """``torch.cat``, without a copy for a single tensor."""
    return tensors[0] if len(tensors) == 1 else torch.cat(list(tensors))


def _meta_template(module: torch.nn.Module) -> torch.nn.Module:
    """A parameter-free (meta-device) copy in train mode, for ``functional_call``."""
    return copy.deepcopy(module).to("meta").train()


def _cuda_devices(device: torch.device) -> list[int]:
    return [device.index or 0] if device.type == "cuda" else []


@dataclass
class _Slot:
    """Student j of every chain, stacked."""

    index: int
    key: tuple
    target: Target
    estimator: str
    template: torch.nn.Module
    names: list[str]
    shapes: list[torch.Size]
    flat: torch.Tensor  # (K, P_s) parameters
    views: dict[str, torch.Tensor]
    exp_avg: torch.Tensor  # (K, P_s)
    exp_avg_sq: torch.Tensor
    grad: torch.Tensor  # (K, P_s) gradient buffer
    grad_views: dict[str, torch.Tensor]
    step: int
    betas: tuple[float, float]
    eps: float
    randomness: str
    loss_fn: Callable
    step_fn: Callable | None = None  # (x, target_hat, neg_step, bias_correction2_sqrt) -> None
    sums: torch.Tensor | None = None  # (K * |D'|, dim) U_o running sums (flattened stack)
    counts: torch.Tensor | None = None  # (K * |D'|,)
    loss_row: torch.Tensor | None = None  # (K,) view of the loss-sum stack


class BatchedGPED:
    """K :class:`GPEDRun` chains (and all their students) as one batched computation.

    ``BatchedGPED(runs).run(checkpoints=paths)`` gives ``[run.result() for run in runs]``, each
    equal (up to round-off; not for dropout students) to ``run.run(checkpoint=path)`` of that
    run alone. The runs must pass :func:`check_batchable`; they are modified: their tensors
    become views of the batched stacks, so after (or during) a batched run they can be
    inspected, evaluated and checkpointed as usual. A run belongs to at most one
    ``BatchedGPED``; do not call ``run.run()`` on it while the batched engine is in use.

    ``compile=True`` wraps the teacher step and the student steps in ``torch.compile``
    (experimental; see benchmarks/bench_batched.py for what it gave on the CPU).
    """

    def __init__(self, runs: Sequence[GPEDRun], compile: bool = False) -> None:
        runs = list(runs)
        check_batchable(runs)
        self.runs = runs
        self.K = K = len(runs)
        ref = runs[0]
        self.device = dev = ref.device
        self.config = ref.config
        self.input_shape = tuple(ref.data.input_shape)
        self.num_classes = ref.num_classes

        # ---------------------------------------------------------------- data, each distinct set once
        train_u, train_i = _unique([r.data.train_x for r in runs], partners=[r.data.train_y for r in runs])
        train_y_u = [runs[train_i.index(u)].data.train_y for u in range(len(train_u))]
        starts = [0]
        for x in train_u:
            starts.append(starts[-1] + x.shape[0])
        self._train_x, self._train_y = _cat(train_u), _cat(train_y_u)
        self._n_train = [r.data.train_x.shape[0] for r in runs]
        self._train_off = torch.tensor([starts[u] for u in train_i], device=dev).view(K, 1)
        distill_u, distill_i = _unique([r.data.distill_x for r in runs])
        dstarts = [0]
        for x in distill_u:
            dstarts.append(dstarts[-1] + x.shape[0])
        self._distill_x = _cat(distill_u)
        self._n_distill = [r.data.distill_x.shape[0] for r in runs]
        self._distill_off = torch.tensor([dstarts[u] for u in distill_i], device=dev).view(K, 1)
        eval_u, eval_i = _unique([r.accumulator.inputs for r in runs])
        self._eval_x = eval_u[0].unsqueeze(0) if len(eval_u) == 1 else torch.stack(eval_u)  # (U, n_eval, ...)
        self._eval_index = None if eval_i == list(range(K)) else torch.tensor(eval_i, device=dev)
        self.n_eval = ref.accumulator.inputs.shape[0]
        for k, run in enumerate(runs):  # the runs' data become views of the stacks
            t0 = starts[train_i[k]]
            d0 = dstarts[distill_i[k]]
            ev = self._eval_x[eval_i[k]]
            run.data = dataclasses.replace(
                run.data,
                train_x=self._train_x[t0:t0 + self._n_train[k]], train_y=self._train_y[t0:t0 + self._n_train[k]],
                distill_x=self._distill_x[d0:d0 + self._n_distill[k]],
                test_x=ev[run.eval_slices["test"]],
                ood_x={name: ev[run.eval_slices[name]] for name in run.data.ood_x})
            run.accumulator.inputs = ev
        self._distill_noise_std = [float(getattr(r.data.config, "distill_noise_std", 0.0) or 0.0) for r in runs]

        # ---------------------------------------------------------------- teacher
        self._theta, self._theta_views, self._theta_names, _ = _stack_modules([r.teacher for r in runs], dev)
        self._teacher_template = _meta_template(ref.teacher)
        self._noise = torch.empty_like(self._theta)
        self._theta_grad = torch.empty_like(self._theta)
        self._theta_grad_views = _views(self._theta_grad, self._theta_names,
                                        [v.shape[1:] for v in self._theta_views.values()])
        self._noise_rows = list(self._noise.unbind(0))
        M = self.config.sgld.batch_size
        self._train_idx = torch.empty(K, M, dtype=torch.long, device=dev)
        self._train_idx_rows = list(self._train_idx.unbind(0))
        self._gen_data = [r.gen_data for r in runs]
        self._gen_noise = [r.gen_noise for r in runs]
        self._sgld_constant = self.config.sgld.schedule == "constant"
        if self._sgld_constant:
            self._sgld_coeffs = self._upload_columns(self._sgld_host_coefficients(0), 3)
        self._nll_sum = torch.stack([r.train_nll_sum.detach().reshape(()) for r in runs]).to(dev)
        for k, run in enumerate(runs):
            run.train_nll_sum = self._nll_sum[k]

        # ---------------------------------------------------------------- ensemble accumulators
        self._acc_targets = dict(ref.accumulator.targets)
        self._acc_sums = {name: torch.stack([r.accumulator.sums[name] for r in runs]) for name in self._acc_targets}
        for k, run in enumerate(runs):
            run.accumulator.sums = {name: self._acc_sums[name][k] for name in self._acc_targets}
        self._eval_chunk = ref.config.eval_batch_size

        # ---------------------------------------------------------------- students
        S = len(ref.students)
        self._loss_sums = torch.stack([torch.stack([r.students[j].loss_sum.detach().reshape(()) for r in runs])
                                       for j in range(S)]).to(dev) if S else torch.zeros(0, K, device=dev)
        self.slots: list[_Slot] = []
        n_store = self._n_distill[0]
        self._store_off = (torch.arange(K, device=dev) * n_store).view(K, 1)
        for j in range(S):
            students = [r.students[j] for r in runs]
            s0 = students[0]
            flat, views, names, shapes = _stack_modules([s.net for s in students], dev)
            arch = _student_arch(ref, j)
            group = s0.optimizer.param_groups[0]
            slot = _Slot(
                index=j, key=s0.config.group_key, target=s0.target, estimator=s0.config.estimator,
                template=_meta_template(s0.net), names=names, shapes=shapes, flat=flat, views=views,
                exp_avg=torch.zeros_like(flat), exp_avg_sq=torch.zeros_like(flat), step=0,
                grad=torch.zeros_like(flat), grad_views={},
                betas=tuple(group["betas"]), eps=group["eps"],
                randomness="different" if arch.dropout > 0 else "error",
                loss_fn=None,  # set below
            )
            slot.grad_views = _views(slot.grad, names, shapes)
            slot.loss_fn = self._make_student_loss(slot)
            slot.loss_row = self._loss_sums[j]
            for k, s in enumerate(students):
                s.loss_sum = self._loss_sums[j, k]
            if slot.estimator in ("U_o", "U_s+U_o"):
                stores = [s.estimator.online if isinstance(s.estimator, SplitEstimator) else s.estimator
                          for s in students]
                sums = torch.stack([e.sums for e in stores])  # (K, |D'|, dim)
                counts = torch.stack([e.counts for e in stores])
                for k, e in enumerate(stores):
                    e.sums, e.counts = sums[k], counts[k]
                slot.sums, slot.counts = sums.view(K * n_store, -1), counts.view(K * n_store)
            else:
                assert all(isinstance(s.estimator, StochasticEstimator) for s in students)
            self.slots.append(slot)
            self._pull_optimizer(slot)
            self._push_optimizer(slot)
        self._dropout = any(slot.randomness == "different" for slot in self.slots)

        # ---------------------------------------------------------------- distillation groups (the runs' order)
        self.groups: dict[tuple, list[_Slot]] = {}
        for key in ref.groups:
            self.groups[key] = [slot for slot in self.slots if slot.key == key]
        self._group_bufs = {}
        for key in self.groups:
            m = key[1]
            idx = torch.empty(K, m, dtype=torch.long, device=dev)
            uses_data_config = len(key) == 2 or key[2] == "data"  # input_generator None: D' as the data configures it
            noisy = [k for k in range(K) if self._distill_noise_std[k] > 0] if uses_data_config else []
            noise = torch.zeros(K, m, *self.input_shape, device=dev) if noisy else None
            std = (torch.tensor(self._distill_noise_std, device=dev).view(K, *[1] * (1 + len(self.input_shape)))
                   if noisy else None)
            self._group_bufs[key] = dict(
                idx=idx, idx_rows=list(idx.unbind(0)), gens=[r.gen_groups[key] for r in runs],
                noisy=noisy, noise=noise, noise_rows=list(noise.unbind(0)) if noisy else None, std=std,
                ones=torch.ones(K * m, device=dev))

        self._compiled = compile
        self._teacher_step_fn = self._teacher_update
        for slot in self.slots:
            slot.step_fn = functools.partial(self._student_update, slot)
        if compile:  # one compiled graph per step function (the slots differ in shapes and targets)
            self._teacher_step_fn = torch.compile(self._teacher_update, dynamic=False)
            for slot in self.slots:
                slot.step_fn = torch.compile(slot.step_fn, dynamic=False)
        for run in runs:
            run._batched_owner = self

    # ------------------------------------------------------------------ host -> device scalars
    def _upload_columns(self, columns: Sequence[Sequence[float]], n: int) -> list[torch.Tensor]:
        """Host float lists -> ``(K, 1)`` float32 device tensors without a synchronisation (pinned
        memory and a non-blocking copy on CUDA)."""
        host = torch.tensor(list(columns), dtype=torch.float32)  # (n, K)
        if self.device.type == "cuda":
            host = host.pin_memory().to(self.device, non_blocking=True)
        return [host[i].view(self.K, 1) for i in range(n)]

    def _sgld_host_coefficients(self, t: int) -> tuple[list[float], list[float], list[float]]:
        return sgld_coefficients([r.config.sgld.step_size_at(t) for r in self.runs], self._n_train,
                                 [r.config.sgld.prior_precision for r in self.runs])

    # ------------------------------------------------------------------ networks
    def _teacher_forward(self, params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        tpl = self._teacher_template
        return vmap(lambda p, xb: functional_call(tpl, p, (xb,)), randomness="error")(params, x)

    def _teacher_loss(self, params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor):
        logits = self._teacher_forward(params, x)  # (K, M, C)
        K, M = y.shape
        nll = F.cross_entropy(logits.reshape(K * M, -1), y.reshape(-1), reduction="none").view(K, M).mean(1)
        return nll.sum(), nll.detach()

    def _make_student_loss(self, slot: _Slot) -> Callable:
        tpl, target, randomness = slot.template, slot.target, slot.randomness

        def loss_fn(params, x, target_hat):
            raw = vmap(lambda p, xb: functional_call(tpl, p, (xb,)), randomness=randomness)(params, x)
            K, m = raw.shape[:2]
            loss = target.loss(target_hat, raw.reshape(K * m, -1)).view(K, m).mean(1)
            return loss.sum(), loss.detach()

        return loss_fn

    # ------------------------------------------------------------------ the step
    def _teacher_update(self, x, y, a, b, c) -> None:
        grads, nll = torch.func.grad(self._teacher_loss, has_aux=True)(self._theta_views, x, y)
        with torch.no_grad():
            for name in self._theta_names:  # into one (K, P) buffer (weight gradients arrive transposed)
                self._theta_grad_views[name].copy_(grads[name])
            batched_sgld_update_(self._theta, self._theta_grad, self._noise, a, b, c)
            self._nll_sum.add_(nll)

    def _teacher_step(self, t: int) -> None:
        M = self.config.sgld.batch_size
        for n, gen, row in zip(self._n_train, self._gen_data, self._train_idx_rows):
            torch.randint(n, (M,), generator=gen, out=row)
        flat_idx = (self._train_idx + self._train_off).view(-1)
        x = self._train_x.index_select(0, flat_idx).view(self.K, M, *self.input_shape)
        y = self._train_y.index_select(0, flat_idx).view(self.K, M)
        for gen, row in zip(self._gen_noise, self._noise_rows):
            row.normal_(generator=gen)
        a, b, c = self._sgld_coeffs if self._sgld_constant else self._upload_columns(self._sgld_host_coefficients(t), 3)
        self._teacher_step_fn(x, y, a, b, c)
        for run in self.runs:
            run._steps_in_sum += 1

    @torch.no_grad()
    def _accumulate(self) -> None:
        """The teacher ensemble on every chain's evaluation set (test + OOD), one vmapped pass per chunk."""
        K, step = self.K, self._eval_chunk
        for start in range(0, self.n_eval, step):
            if self._eval_index is None:
                x = self._eval_x[:, start:start + step]
            else:
                x = self._eval_x[self._eval_index, start:start + step]
            log_probs = F.log_softmax(self._teacher_forward(self._theta_views, x), dim=-1)
            c = log_probs.shape[1]
            flat = log_probs.reshape(K * c, -1)
            for name, target in self._acc_targets.items():
                self._acc_sums[name][:, start:start + c].add_(target.g(flat).reshape(K, c, -1))
        for run in self.runs:
            run.accumulator.count += 1

    def _student_update(self, slot: _Slot, x, target_hat, neg_step, bias_correction2_sqrt) -> None:
        grads, loss = torch.func.grad(slot.loss_fn, has_aux=True)(slot.views, x, target_hat)
        with torch.no_grad():
            for name in slot.names:
                slot.grad_views[name].copy_(grads[name])
            batched_adam_step_(slot.flat, slot.grad, slot.exp_avg, slot.exp_avg_sq, neg_step, bias_correction2_sqrt,
                               slot.betas[0], slot.betas[1], slot.eps)
            slot.loss_row.add_(loss)

    def _distill_step(self, key: tuple, t: int) -> None:
        K, m = self.K, key[1]
        buf = self._group_bufs[key]
        for n, gen, row in zip(self._n_distill, buf["gens"], buf["idx_rows"]):
            torch.randint(n, (m,), generator=gen, out=row)
        for k in buf["noisy"]:  # D' perturbation of the data config (drawn after S', as GPEDRun does)
            torch.randn(m, *self.input_shape, generator=buf["gens"][k], out=buf["noise_rows"][k])
        idx = buf["idx"]
        x = self._distill_x.index_select(0, (idx + self._distill_off).view(-1)).view(K, m, *self.input_shape)
        if buf["noisy"]:
            x = x + buf["std"] * buf["noise"]
        with torch.no_grad():
            log_probs = F.log_softmax(self._teacher_forward(self._theta_views, x), dim=-1).reshape(K * m, -1)
        store_idx = None
        for slot in self.groups[key]:
            with torch.no_grad():
                value = slot.target.g(log_probs)
                if slot.estimator == "U_s":
                    target_hat = value
                else:
                    if store_idx is None:
                        store_idx = (idx + self._store_off).view(-1)
                    online = value if slot.estimator == "U_o" else value[:, -1:]
                    slot.sums.index_add_(0, store_idx, online.to(slot.sums.dtype))
                    slot.counts.index_add_(0, store_idx, buf["ones"])
                    estimate = slot.sums[store_idx] / slot.counts[store_idx].unsqueeze(-1)
                    target_hat = estimate if slot.estimator == "U_o" else torch.cat([value[:, :-1], estimate], dim=-1)
            slot.step += 1
            neg_steps, bc2_sqrt = adam_coefficients(self._lrs(slot, t), slot.step, *slot.betas)
            if self._compiled:  # a tensor, so that the compiled step does not specialise on the step number
                neg_step, bc2_sqrt = self._upload_columns([neg_steps, [bc2_sqrt] * K], 2)
            else:
                neg_step = self._upload_columns([neg_steps], 1)[0]
            slot.step_fn(x, target_hat, neg_step, bc2_sqrt)
            for run in self.runs:
                run.students[slot.index].steps_since_log += 1

    def _lrs(self, slot: _Slot, t: int) -> list[float]:
        """Each chain's lr at step t, host floats: the run's own schedule (``GPEDRun._set_lr``
        sets its torch optimizer's lr, as the sequential loop does before every Adam step)."""
        lrs = []
        for run in self.runs:
            s = run.students[slot.index]
            run._set_lr(s, t)
            lrs.append(s.optimizer.param_groups[0]["lr"])
        return lrs

    def _step(self, t: int) -> None:
        """Iteration t of Algorithm 1 for every chain: the SGLD step, after burn-in the ensemble
        update every ``eval_thinning`` steps and the distillation steps of the groups due. Reads
        nothing back from the device; does not advance the runs' ``t`` (``run`` does)."""
        cfg = self.config
        self._teacher_step(t)
        if t > cfg.burn_in:
            if t % cfg.eval_thinning == 0:
                self._accumulate()
            for key in self.groups:
                if t % key[0] == 0:
                    self._distill_step(key, t)

    # ------------------------------------------------------------------ optimizer state <-> runs
    def _pull_optimizer(self, slot: _Slot) -> None:
        """Read each chain's torch Adam state (e.g. after loading a checkpoint) into the stacks."""
        steps = set()
        for k, run in enumerate(self.runs):
            s = run.students[slot.index]
            params = list(s.net.parameters())
            states = [s.optimizer.state.get(p, {}) for p in params]
            if not any(states):
                steps.add(0)
                slot.exp_avg[k].zero_()
                slot.exp_avg_sq[k].zero_()
            else:
                steps.update(int(float(st["step"])) for st in states)
                slot.exp_avg[k].copy_(torch.cat([st["exp_avg"].reshape(-1) for st in states]))
                slot.exp_avg_sq[k].copy_(torch.cat([st["exp_avg_sq"].reshape(-1) for st in states]))
        if len(steps) != 1:
            raise ValueError(f"BatchedGPED: student {slot.index} has taken different numbers of Adam steps "
                             f"in different chains ({sorted(steps)}); the chains are not at the same point")
        slot.step = steps.pop()

    def _push_optimizer(self, slot: _Slot) -> None:
        """Make each chain's torch Adam state views of the stacked moments (and its step count
        current), so that the run's checkpoint is the sequential engine's. (The optimizers' lr is
        kept current by ``_lrs``.)"""
        if slot.step == 0:
            return
        from torch.optim.optimizer import _get_scalar_dtype

        m_views = _views(slot.exp_avg, slot.names, slot.shapes)
        v_views = _views(slot.exp_avg_sq, slot.names, slot.shapes)
        for k, run in enumerate(self.runs):
            s = run.students[slot.index]
            for name, p in s.net.named_parameters():
                s.optimizer.state[p] = {"step": torch.tensor(float(slot.step), dtype=_get_scalar_dtype()),
                                        "exp_avg": m_views[name][k], "exp_avg_sq": v_views[name][k]}

    def _sync_runs(self, t: int) -> None:
        for run in self.runs:
            run.t = t
        for slot in self.slots:
            self._push_optimizer(slot)

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoints(self, paths: Sequence[str | Path | None]) -> None:
        """Each run's ``save_checkpoint`` (the sequential format), with its tensors copied out of
        the stacks first so that a file holds only its own chain (``torch.save`` of a view would
        write the whole stacked storage)."""
        self._sync_runs(self.runs[0].t)
        for run, path in zip(self.runs, paths):
            if path is not None:
                with _own_tensors(run):
                    run.save_checkpoint(path)

    def load_checkpoints(self, paths: Sequence[str | Path | None], resume: bool = True) -> None:
        """Resume each run from its checkpoint (where one exists); all chains must end up at the same step."""
        paths = [None if p is None else Path(p) for p in paths]
        if len(paths) != self.K:
            raise ValueError(f"BatchedGPED: {len(paths)} checkpoint paths for {self.K} runs")
        existing = [p is not None and p.exists() for p in paths]
        if any(existing) and not resume:
            first = next(p for p, e in zip(paths, existing) if e)
            raise FileExistsError(f"checkpoint {first} exists; pass resume=True to continue it, or another path")
        steps = []
        for run, path, exists in zip(self.runs, paths, existing):
            steps.append(torch.load(path, map_location="cpu", weights_only=False)["t"] if exists else run.t)
        if len(set(steps)) != 1:
            raise ValueError(f"BatchedGPED: the chains would resume at different steps {steps}; "
                             "all must be at the same t (resume them separately, or start afresh)")
        for run, path, exists in zip(self.runs, paths, existing):
            if exists:
                run.load_checkpoint(path)  # copies into the stacked views in place
        for slot in self.slots:
            self._pull_optimizer(slot)
            self._push_optimizer(slot)

    # ------------------------------------------------------------------ the loop
    def _rng(self):
        if not self._dropout:
            return nullcontext()
        return torch.random.fork_rng(devices=_cuda_devices(self.device))

    def run(self, checkpoints: Sequence[str | Path | None] | None = None, resume: bool = True,
            max_steps: int | None = None) -> list[GPEDResult]:
        """Run (or continue) all chains up to T, or ``max_steps`` more steps if given.

        ``checkpoints`` (one path or None per run) resume each run first and are saved every
        ``checkpoint_every`` steps and at the end, in :class:`GPEDRun`'s format. Returns
        ``[run.result() for run in runs]``."""
        cfg = self.config
        if checkpoints is not None:
            checkpoints = list(checkpoints)
            self.load_checkpoints(checkpoints, resume=resume)
        t0 = self.runs[0].t
        if any(r.t != t0 for r in self.runs):
            raise ValueError(f"BatchedGPED: the runs are at different steps {[r.t for r in self.runs]}")
        stop = cfg.num_iterations if max_steps is None else min(cfg.num_iterations, t0 + max_steps)
        progress = self._progress_bar(t0) if t0 < stop else None
        save = checkpoints is not None and any(p is not None for p in checkpoints)
        started = time.perf_counter()
        t_done = t0
        with self._rng():
            if self._dropout:
                self.runs[0]._set_rng_state(self.runs[0]._dropout_rng)
            try:
                for t in range(t0, stop):
                    self._step(t)
                    t_done = t + 1
                    if t_done % cfg.log_every == 0 or t_done == stop:
                        now = time.perf_counter()
                        for run in self.runs:
                            run.elapsed += now - started
                        started = now
                        self._sync_runs(t_done)
                        rows = []
                        for k, run in enumerate(self.runs):
                            try:
                                rows.append(run._log())
                            except FloatingPointError as err:
                                raise FloatingPointError(f"chain {k} of the batch: {err}") from err
                        if progress is not None:
                            progress.update(t_done - progress.n)
                            progress.set_postfix(teacher_nll=_mean(r.get("teacher_nll", float("nan")) for r in rows),
                                                 train_nll=_mean(r["teacher_train_nll"] for r in rows))
                    if save and (t_done % cfg.checkpoint_every == 0 or t_done == stop):
                        self._store_dropout_rng()
                        self.save_checkpoints(checkpoints)
            finally:
                self._store_dropout_rng()
                self._sync_runs(t_done)
                if progress is not None:
                    progress.close()
        return [run.result() for run in self.runs]

    def _store_dropout_rng(self) -> None:
        if self._dropout:  # one global stream drives every chain's dropout masks; each run keeps a copy
            state = self.runs[0]._rng_state()
            for run in self.runs:
                run._dropout_rng = state

    def _progress_bar(self, start: int):
        if not self.config.progress:
            return None
        from tqdm.auto import tqdm

        return tqdm(total=self.config.num_iterations, initial=start, desc=f"GPED x{self.K}", unit="it",
                    mininterval=1.0)

    def memory_bytes(self) -> dict[str, int]:
        """Bytes this batch's stacks hold now (the categories of :func:`memory_estimate`; data as
        actually stored, i.e. with equal-content sets merged)."""
        size = lambda *ts: sum(t.numel() * t.element_size() for t in ts if t is not None)  # noqa: E731
        out = {
            "teacher": size(self._theta, self._theta_grad, self._noise),
            "students": sum(size(s.flat, s.grad, s.exp_avg, s.exp_avg_sq) for s in self.slots),
            "u_o_stores": sum(size(s.sums, s.counts) for s in self.slots),
            "accumulators": size(*self._acc_sums.values()),
            "data": size(self._train_x, self._train_y, self._distill_x, self._eval_x),
        }
        out["total"] = sum(out.values())
        return out


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


@contextmanager
def _own_tensors(run: GPEDRun) -> Iterator[None]:
    """Temporarily give ``run`` private copies of every tensor that is a view of a batched stack."""
    restore: list[Callable[[], None]] = []

    def swap(obj, attr):
        old = getattr(obj, attr)
        setattr(obj, attr, old.clone())
        restore.append(lambda: setattr(obj, attr, old))

    try:
        for module in (run.teacher, *(s.net for s in run.students)):
            for p in module.parameters():
                old = p.data
                p.data = old.clone()
                restore.append(lambda p=p, old=old: setattr(p, "data", old))
        swap(run, "train_nll_sum")
        old_sums = run.accumulator.sums
        run.accumulator.sums = {k: v.clone() for k, v in old_sums.items()}
        restore.append(lambda: setattr(run.accumulator, "sums", old_sums))
        for s in run.students:
            swap(s, "loss_sum")
            store = s.estimator.online if isinstance(s.estimator, SplitEstimator) else s.estimator
            if isinstance(store, OnlineMeanEstimator):
                swap(store, "sums")
                swap(store, "counts")
            for p, st in list(s.optimizer.state.items()):
                old_state = st
                s.optimizer.state[p] = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in st.items()}
                restore.append(lambda s=s, p=p, old_state=old_state: s.optimizer.state.__setitem__(p, old_state))
        yield
    finally:
        for undo in reversed(restore):
            undo()
