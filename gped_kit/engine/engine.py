"""Algorithm 1 for K >= 1 chains as one computation, and the run loop.

:class:`GPEDEngine` holds the stacked state of K chains (:mod:`gped_kit.engine.state`), their
data (:class:`~gped_kit.engine.sets.ChainSets`) and random streams
(:class:`~gped_kit.engine.streams.ChainStreams`), and advances them with the step functions of
:mod:`gped_kit.engine.steps`: called directly on chain 0's views when K = 1, and through
``torch.func.vmap`` over the chain axis when K > 1. Everything else -- which steps distil,
which add to the ensemble, the order of random draws -- is the same code for both, so K chains
in one batch compute what K separate runs compute (up to floating-point round-off: batched
matrix products sum in another order).

**One iteration t** (:meth:`GPEDEngine.step`): every chain draws its minibatch of D and its
SGLD noise and takes one step of Eq. 7 (:meth:`~GPEDEngine.teacher_step`); the sample after step
t is kept as a snapshot when t is a snapshot step (:meth:`~GPEDEngine.take_snapshot`); after
burn-in (t > B) the sample is added to the ensemble every ``eval_thinning`` steps
(:meth:`~GPEDEngine.accumulate`), and every distillation group (:class:`GroupKey`) whose H divides
t draws S' from D' (and its input noise), computes the teacher's statistics on it once, and updates
each of its students (:meth:`~GPEDEngine.distill_group`, :func:`~gped_kit.engine.steps.distill_gradients`).
:meth:`GPEDEngine.events` says which of these events step t runs; the event methods are public so
that tools (benchmarks, profilers) can run or time one of them alone.

**A pooled teacher** (one spec with ``GPEDConfig.num_chains`` K > 1): K teacher chains
(seeds and initial values per chain, :func:`~gped_kit.engine.config.chain_seeds`) advance as the
K chains of a batch do, but their kept samples form **one** teacher ensemble and feed **one** set
of students -- a *run*. The engine keeps the teacher's state, random streams and ensemble sums
per chain (the chain axis, K) and the students, their U_o stores, distillation streams, history
and checkpoint per run (one run; for independent chains, one run per chain). At a distillation
step the group draws one S' from D', the K current samples' statistics are computed on it (one
vmapped forward pass) and every student's targets are posterior expectations over the pooled
samples (:func:`~gped_kit.core.estimators.pooled_estimator_update_`): **U_s the mean of g over
the K current samples** (an unbiased estimate of E[g] with 1/K of one sample's variance; one
chain's sample in turn, the alternative, is not offered: it would save little -- the K forward
passes on S' are one vmapped call, every H steps, of about a third of a teacher step's work per
chain, and U_o students of the same group need all K anyway -- and its targets would have K times
the variance), **U_o adds all K samples to each visited input's running mean** (its count grows
by K per visit). The ensemble is the pooled mean over every chain's kept samples, ``sum_k sums_k /
(K * count)``; the history rows carry the pooled teacher's metrics (``teacher_nll`` etc., and
``teacher_samples`` = K * count) and each chain's own ensemble NLL (``teacher_nll_chain<k>``).
With K = 1 it is the single chain (the same code); ``GPEDEngine([spec], pooled=True)`` runs a
one-chain configuration through the pooled code instead (for tests: it gives the same numbers).
A pooled run holds K chain states (theta, the sampler's state, the noise buffer, K x S
snapshots), K ensemble sums on the evaluation sets (for the per-chain NLL) and one set of
students with one U_o store: the students cost what they cost for one chain. A pooled teacher
runs as its own batch (:func:`check_batchable` refuses to batch it with other chains).

**No host synchronisation between log points**: indices, noise and learning rates stay on the
device; per-chain learning-rate changes are written with ``fill_`` (no upload); the only reads
are at log points (:meth:`GPEDEngine.log`: history rows, divergence checks) and checkpoints.

**The run loop** (:meth:`GPEDEngine.run`) calls hooks (:class:`Hook`) at log points and at the
end; progress display and checkpointing are hooks. On CUDA it replays each period of the event
schedule it can as a captured CUDA graph (:mod:`gped_kit.engine.graphs`; ``GPEDConfig.graph``).

**The updates run over flat buffers**: each chain's parameters and momenta and each student's
parameters and Adam moments are views of one ``(K, P)`` buffer per slot (:mod:`gped_kit.core.flat`),
so the sampler's and Adam's element-wise updates are a handful of kernels per step; the values
that change with t (a varying step size, Adam's bias corrections) are read from device-side
tables (:mod:`gped_kit.engine.values`).
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

import pandas as pd
import torch
from torch.func import functional_call, vmap

from ..core.adam import adam_update_, bias_corrections
from ..core.autodiff import Autodiff
from ..core.estimators import estimates, estimator_init
from ..core.options import InputGenerator, StepSchedule
from ..core.schema import record
from ..core.targets import SkillWarning, Target, check_skill
from ..data.container import describe_counts
from ..models.presets import ArchSpec
from . import steps
from .config import GroupKey, chain_seeds, student_lr
from .graphs import PeriodGraphs
from .precision import teacher_matmul_precision
from .result import GPEDResult
from .sets import ChainSets
from .spec import ChainSpec
from .state import (
    ChainState,
    EnsembleRunState,
    EnsembleState,
    HostState,
    RunState,
    StudentRunState,
    StudentState,
    TeacherRunState,
    chain_view,
    flat,
    flatten_chain_,
    flatten_student_,
    init_chain_state,
    init_student_state,
    noise_into_layout_,
    stack_trees,
    tree_leaves,
)
from .steps import StudentFns, TeacherFns
from .streams import ChainStreams
from .values import EngineValues, ValueTable
from .window import RecentWindow


@dataclass(frozen=True)
class StepEvents:
    """The events of iteration t of Algorithm 1 after the teacher's step (:meth:`GPEDEngine.events`):
    ``snapshot``, the index of the snapshot the new sample is kept as (None: not a snapshot step);
    ``accumulate``, whether it joins the teacher ensemble (t > B, t mod ``eval_thinning`` = 0);
    ``groups``, the distillation groups that distil (t > B, t mod H = 0), in the order they run."""

    t: int
    snapshot: int | None
    accumulate: bool
    groups: tuple[GroupKey, ...]


class Hook(Protocol):
    """Called by :meth:`GPEDEngine.run`: ``on_log`` after each log point (with each chain's new
    history rows), ``on_checkpoint`` every ``checkpoint_every`` steps and at the last step,
    ``on_end`` once when the loop stops (normally or by an error)."""

    def on_log(self, engine: GPEDEngine, rows: list[list[dict]]) -> None: ...

    def on_checkpoint(self, engine: GPEDEngine) -> None: ...

    def on_end(self, engine: GPEDEngine) -> None: ...


def check_batchable(chains: Sequence[ChainSpec]) -> None:
    """Raise ``ValueError`` naming the first field in which ``chains`` cannot share one batched
    computation; return None when they can. A pooled teacher (``num_chains`` > 1) is already one
    batched computation of its K chains and is never batched with other chains.

    Shared: the teacher's and each student slot's network structure, the likelihood, input
    shape and number of outputs, device, T, B, ``eval_thinning``, ``log_every``, snapshots, the
    sampler's algorithm and every field of it not carried per chain (for SGLD: M, schedule and
    warm-up; for the momentum samplers all but tau), the evaluation sets (names and sizes), and
    per student slot the target, estimator, H, M' and input generator; |D'| when a student keeps
    a U_o store. Per chain they may differ in the data (N, masks, D'), seed, prior precision, the
    SGLD step size and the students' learning rates and schedules.
    """
    chains = list(chains)
    if not chains:
        raise ValueError("check_batchable: no chains given")
    ref = chains[0]
    pooled = [k for k, c in enumerate(chains) if c.config.num_chains > 1]
    if pooled and len(chains) > 1:
        k = pooled[0]
        raise ValueError(f"check_batchable: chain {k} is a pooled teacher (GPEDConfig.num_chains="
                         f"{chains[k].config.num_chains}): its chains already run as one batched computation, and a "
                         "batch of pooled teachers is not supported; run it alone (distill / a batch of one)")

    def eval_layout(c: ChainSpec) -> list:
        return [(name, int(x.shape[0])) for name, x in c.eval_sets.items()]

    fields: list[tuple[str, Callable[[ChainSpec], Any]]] = [
        ("teacher network", lambda c: c.teacher.structure),
        ("likelihood", lambda c: record(c.likelihood) or c.likelihood.name),
        ("input shape", lambda c: c.data.input_shape),
        ("number of outputs", lambda c: c.data.num_outputs),
        ("device", lambda c: c.device),
        ("GPEDConfig.num_iterations (T)", lambda c: c.config.num_iterations),
        ("GPEDConfig.burn_in (B)", lambda c: c.config.burn_in),
        ("GPEDConfig.eval_thinning", lambda c: c.config.eval_thinning),
        ("GPEDConfig.log_every", lambda c: c.config.log_every),
        ("GPEDConfig.num_snapshots", lambda c: c.config.num_snapshots),
        ("sampler (all but its per-chain coefficients)", lambda c: c.config.sampler.shared_fields()),
        ("evaluation sets (name, size)", eval_layout),
        ("number of students", lambda c: len(c.students)),
    ]
    for k, chain in enumerate(chains[1:], start=1):
        for name, get in fields:
            if get(chain) != get(ref):
                raise ValueError(f"check_batchable: chain {k} differs from chain 0 in {name}: "
                                 f"{get(chain)!r} != {get(ref)!r}")
        for j, (s, s0) in enumerate(zip(chain.students, ref.students)):
            slot = [("target", lambda x: x.target.name), ("target definition", lambda x: x.target),
                    ("estimator", lambda x: x.estimator), ("network", lambda x: x.network.structure),
                    ("distillation group (H, M', input generator)", lambda x: x.group),
                    ("regulariser", lambda x: (x.regularizer, x.config.reg_weight)),
                    ("derivative weight", lambda x: x.config.derivative_weight)]
            for name, get in slot:
                if get(s) != get(s0):
                    raise ValueError(f"check_batchable: chain {k} student {j} ({s.label!r}) differs from chain 0's "
                                     f"({s0.label!r}) in {name}: {get(s)!r} != {get(s0)!r}")
        if any(s.estimator.uses_store for s in ref.students) and chain.num_distill != ref.num_distill:
            raise ValueError(f"check_batchable: chain {k} has |D'| = {chain.num_distill}, chain 0 {ref.num_distill}; "
                             "U_o stores of different sizes cannot be stacked")


def _host_field(name: str) -> property:
    """A property naming field ``name`` of the engine's :class:`~gped_kit.engine.state.HostState`."""

    def get(engine: GPEDEngine) -> Any:
        return getattr(engine.host, name)

    def put(engine: GPEDEngine, value: Any) -> None:
        setattr(engine.host, name, value)

    return property(get, put, doc=f"``host.{name}`` (:class:`~gped_kit.engine.state.HostState`).")


class GPEDEngine:
    """K chains of Algorithm 1 (see the module docstring). Build it from :class:`ChainSpec` s
    (:func:`gped_kit.engine.spec.build_chain`), one per *run* (result, history, checkpoint): K
    independent chains, or one pooled teacher of ``num_chains`` chains; all start at step 0 (load
    checkpoints with :func:`gped_kit.engine.checkpoint.load_checkpoints`). ``use_vmap`` forces
    (True) or avoids (False, only for one teacher chain) the vmapped path; by default it is used
    exactly when K > 1. ``pooled`` True runs a one-chain spec through the pooled code (None: pooled
    exactly when ``num_chains`` > 1).

    ``chains`` are the specs (one per run); ``num_runs`` their number; ``K`` the number of teacher
    chains (the chain axis of the teacher's state and ensemble sums); ``chain_specs[k]`` and
    ``chain_seeds[k]`` chain k's spec and seed; ``chain_run[k]`` the run chain k feeds.
    :meth:`run_state` gives everything run r needs to continue as one typed value
    (:class:`~gped_kit.engine.state.RunState`, what a checkpoint stores) and :meth:`load_run_states`
    continues runs from such values. ``host`` holds the host-side counters shared by the batch as one
    :class:`~gped_kit.engine.state.HostState` (``t``, ``adam_steps``, ... name its fields); ``values``
    the device-side values the steps read (:class:`~gped_kit.engine.values.EngineValues`)."""

    t = _host_field("t")
    steps_in_nll_sum = _host_field("steps_in_nll_sum")
    ensemble_count = _host_field("ensemble_count")
    adam_steps = _host_field("adam_steps")
    steps_since_log = _host_field("steps_since_log")
    snapshots_taken = _host_field("snapshots_taken")

    def __init__(self, chains: Sequence[ChainSpec], use_vmap: bool | None = None, pooled: bool | None = None) -> None:
        chains = list(chains)
        check_batchable(chains)
        self.chains = chains
        self.num_runs = len(chains)
        ref = chains[0]
        self.config = ref.config
        self.device = ref.device
        self.pooled = ref.config.num_chains > 1 if pooled is None else bool(pooled)
        if self.pooled and len(chains) > 1:
            raise ValueError(f"pooled=True needs one spec (one pooled run), got {len(chains)}")
        if not self.pooled and ref.config.num_chains > 1:
            raise ValueError(f"pooled=False: the spec pools num_chains={ref.config.num_chains} chains")
        self.chain_specs = [ref] * ref.config.num_chains if self.pooled else chains
        self.chain_seeds = chain_seeds(ref.config) if self.pooled else [c.config.seed for c in chains]
        self.chain_run = [0] * len(self.chain_specs) if self.pooled else list(range(len(chains)))
        teacher_initial = ref.teacher_initial if self.pooled else [c.initial[0] for c in chains]
        self.K = K = len(self.chain_specs)
        if use_vmap is False and K > 1:
            raise ValueError(f"use_vmap=False needs one chain, got {K}")
        self.batched = K > 1 if use_vmap is None else bool(use_vmap)
        self.autodiff = Autodiff.FUNCTORCH if self.batched else Autodiff.AUTOGRAD  # the teacher's
        self.students_batched = self.batched and not self.pooled
        self.student_autodiff = Autodiff.FUNCTORCH if self.students_batched else Autodiff.AUTOGRAD
        self.num_outputs = ref.data.num_outputs
        self.host = HostState(adam_steps=[0] * len(ref.students), steps_since_log=[0] * len(ref.students))
        self.elapsed = 0.0
        self.history: list[list[dict]] = [[] for _ in chains]
        self.resumed_from: int | None = None

        # data: D (inputs, labels) and the evaluation inputs (test, then further sets) per teacher chain;
        # D' (inputs) per run
        self.train_sets = ChainSets([(c.data.train_x, c.data.train_y) for c in self.chain_specs])
        self.distill_sets = ChainSets([(c.data.distill_x,) for c in chains])
        self.eval_slices: dict[str, slice] = {}
        start = 0
        for name, x in ref.eval_sets.items():
            self.eval_slices[name] = slice(start, start + int(x.shape[0]))
            start += int(x.shape[0])
        self.num_eval = start
        self.eval_sets = ChainSets([(torch.cat(list(c.eval_sets.values())) if len(c.eval_sets) > 1
                                      else c.data.test_x,) for c in self.chain_specs])
        self.test_labels = [c.data.test_y for c in chains]
        # the distillation inputs' noise, made once here (an upload per step would block on CUDA): the
        # noise generator's per-run (mean, std) of D', and per group the runs with input noise and
        # each run's standard deviation (D's distill_noise_std, or the perturb generator's)
        self._noise_moments = (torch.tensor([c.noise_moments for c in chains], device=self.device)
                               if ref.noise_moments is not None else None)
        self._input_noise: dict[GroupKey, tuple[list[int], torch.Tensor]] = {}
        R = self.num_runs
        for key in ref.groups:
            stds = ([float(c.data.distill_noise_std) for c in chains]
                    if key.input_generator == InputGenerator.DATA.value
                    else [key.noise_std] * R if key.input_generator == InputGenerator.PERTURB.value else [0.0] * R)
            self._input_noise[key] = ([k for k, s in enumerate(stds) if s > 0], torch.tensor(stds, device=self.device))

        # state: the teacher per chain, the students per run
        self.chain = stack_trees([init_chain_state(*init, c.config.sampler.init_state(init[0]),
                                                   c.config.sampler.num_coefficients)
                                  for c, init in zip(self.chain_specs, teacher_initial)])
        for k, c in enumerate(self.chain_specs):
            for i, value in enumerate(c.config.sampler.coefficients(c.num_train)):
                self.chain.coefficients[k, i].fill_(value)
        self.students: list[StudentState] = []
        for j, s in enumerate(ref.students):
            states = []
            for c in chains:
                sc = c.students[j]
                store = estimator_init(sc.estimator, c.num_distill, sc.out_dim, self.device)
                states.append(init_student_state(*c.initial[1 + j], sc.config.lr, store))
            self.students.append(stack_trees(states))
        # each slot's parameters and Adam moments as flat (R, P) buffers: an Adam step is a few kernels
        self._student_buffers = [flatten_student_(s) for s in self.students]
        self.lr_values = [[c.students[j].config.lr for c in chains] for j in range(len(ref.students))]
        self.ensemble = EnsembleState({name: torch.zeros(K, self.num_eval, target.out_dim(self.num_outputs),
                                                         device=self.device)
                                       for name, target in ref.ensemble_targets.items()})
        self.recent = RecentWindow()
        self.snapshots = torch.zeros(K, self.config.num_snapshots, ref.teacher.num_params, device=self.device)

        # buffers for one step's draws
        m = self.config.sampler.batch_size
        self._idx = torch.empty(K, m, dtype=torch.long, device=self.device)
        self._noise_flat = torch.empty(K, ref.teacher.num_params, device=self.device)
        self._noise = {}
        offset = 0
        for name in ref.teacher.param_names:
            p = self.chain.params[name]
            n = p[0].numel()
            self._noise[name] = self._noise_flat[:, offset:offset + n].view(p.shape)
            offset += n
        # the chains' parameters and momenta as flat (K, P) buffers: a sampler step is a few kernels
        self._teacher_buffers = flatten_chain_(self.chain, self._noise_flat)
        self._group_idx = {key: torch.empty(self.num_runs, key.batch_size, dtype=torch.long, device=self.device)
                           for key in ref.groups}
        # values that change with t, read from the device (gped_kit.engine.values): the step-size schedule's
        # factors (SGLD; the momentum samplers compute with host floats) and each slot's Adam bias corrections,
        # a period of the event schedule at a time
        self.period = math.lcm(self.config.eval_thinning, *(key.thinning for key in ref.groups))
        sampler = self.config.sampler
        self.values = EngineValues(
            ValueTable(sampler.scales, len(sampler.scales(0)), self.period, self.device)
            if sampler.varies and sampler.device_scales else None,
            [ValueTable(bias_corrections, 2, max(1, self.period // s.group.thinning), self.device)
             for s in ref.students])
        # graph mode (CUDA): periods of the event schedule replayed as captured CUDA graphs
        use_graphs = self.config.graph if self.config.graph is not None else self.device.type == "cuda"
        self.graphs = PeriodGraphs(self) if use_graphs else None
        self.streams = ChainStreams(self.chain_seeds, list(ref.groups), self.device,
                                    group_seeds=[c.config.seed for c in chains])

        # step functions: the same for one chain and, under vmap, for many
        self.teacher_fns = TeacherFns(ref.teacher.train, ref.teacher.eval, ref.likelihood, self.config.sampler)
        self.student_fns = [StudentFns(s.network.train, s.target, s.estimator, s.regularizer, s.config.reg_weight,
                                       s.config.derivative_weight, self.num_outputs) for s in ref.students]
        self._teacher_views = None if self.batched else (chain_view(self.chain, 0), chain_view(self.ensemble, 0))
        self._student_views = None if self.students_batched else [chain_view(s, 0) for s in self.students]
        # dropout masks come from the global random stream, seeded with the chain's initial values
        self._dropout_state: dict[str, torch.Tensor] = dict(ref.rng_after_init)

    # ------------------------------------------------------------------ plumbing
    def _map(self, fn: Callable, in_dims: tuple) -> Callable:
        """``fn`` for one teacher chain, or vmapped over the chain axis (arguments with in_dim None are shared)."""
        if not self.batched:
            return fn
        return vmap(fn, in_dims=in_dims, randomness="different")

    def _teacher(self) -> tuple[ChainState, EnsembleState]:
        """The teacher's state and ensemble sums (chain 0's views when there is one chain)."""
        return self._teacher_views if self._teacher_views is not None else (self.chain, self.ensemble)

    def _students(self) -> list[StudentState]:
        """The students' states (run 0's views when the students are not batched)."""
        return self._student_views if self._student_views is not None else self.students

    def _one(self, x: torch.Tensor) -> torch.Tensor:
        """A per-step input for the teacher's step functions: chain 0's slice when there is one chain."""
        return x if self.batched else x[0]

    @property
    def run_count(self) -> int:
        """The number of samples in each run's ensemble: K x ``ensemble_count`` for a pooled teacher."""
        return self.ensemble_count * (self.K if self.pooled else 1)

    # ------------------------------------------------------------------ one iteration
    def events(self, t: int) -> StepEvents:
        """What iteration t of Algorithm 1 does after the teacher's step (the same for every chain):
        which snapshot it keeps, whether the sample joins the ensemble, which groups distil. Samples
        are kept after burn-in (t > B) and, with a cyclical step-size schedule, only in the cycles'
        sampling phases (:meth:`~gped_kit.core.sampler.SamplerConfig.in_sampling_phase`)."""
        cfg = self.config
        ref = self.chains[0]
        kept = t > cfg.burn_in and cfg.sampler.in_sampling_phase(t)  # the cyclical schedule's exploration keeps none
        return StepEvents(t=t, snapshot=ref.snapshot_at.get(t),
                          accumulate=kept and t % cfg.eval_thinning == 0,
                          groups=tuple(key for key in ref.groups if kept and t % key.thinning == 0))

    def step(self) -> None:
        """Iteration t of Algorithm 1 for every chain (see the module docstring): the teacher's step,
        then the events of :meth:`events` in order (snapshot, ensemble, each group in sorted order);
        then t advances."""
        t = self.t
        events = self.events(t)
        self.teacher_step(t)
        if events.snapshot is not None:
            self.take_snapshot(events.snapshot)
        if events.accumulate:
            self.accumulate()
        for key in events.groups:
            self.distill_group(key, t)
        self.t = t + 1

    def teacher_step(self, t: int | None = None) -> None:
        """One step of the teacher's sampler (Eq. 7 for SGLD) for every chain at step ``t`` (default:
        the current step): draws each chain's minibatch of D and its noise, updates the samples and
        adds the minibatch NLL to the running sum the next log point reports. Does not advance t."""
        t = self.t if t is None else t
        chain = self._teacher()[0]
        self.streams.teacher_indices(self._idx, self.train_sets.sizes)
        self.streams.sgld_noise(self._noise_flat)
        x, y = self.train_sets.gather(self._idx)
        fn = functools.partial(steps.teacher_gradients, fns=self.teacher_fns, autodiff=self.autodiff)
        with teacher_matmul_precision(self.config.matmul_precision, self.device):
            grads = self._map(fn, (0, 0, 0))(chain, self._one(x), self._one(y))
        buffers = self._teacher_buffers
        buffers.params.layout.gather_(buffers.grads, grads, chain_axis=self.batched)
        noise_into_layout_(buffers, self._noise_flat)
        self.config.sampler.update_(buffers.params, buffers.sampler, buffers.grads, buffers.noise,
                                    buffers.coefficients, self.step_scales(t))
        self.steps_in_nll_sum += 1

    def step_scales(self, t: int) -> tuple[float, ...] | torch.Tensor:
        """The sampler's step-size factors at step t: a row of the device-side table when the schedule
        varies and the sampler takes them as a tensor, host floats otherwise (constant for a constant
        schedule)."""
        scales = self.values.scales
        return scales.row(t) if scales is not None else self.config.sampler.scales(t)

    def take_snapshot(self, index: int) -> None:
        """Keep every chain's current sample as snapshot ``index`` (``GPEDConfig.num_snapshots``)."""
        theta = self._teacher_buffers.params
        self.snapshots[:, index] = theta.flat if theta.layout.logical else flat(self.chain.params)
        self.snapshots_taken = index + 1

    def accumulate(self) -> None:
        """Add every chain's current sample to its teacher ensemble: the running sums of each tracked
        target g on every evaluation input (in chunks of ``eval_batch_size``)."""
        chain, ensemble = self._teacher()
        targets = self.chains[0].ensemble_targets
        chunk = self.config.eval_batch_size
        for start in range(0, self.num_eval, chunk):
            (x,), batched = self.eval_sets.rows(start, min(start + chunk, self.num_eval))
            fn = functools.partial(steps.ensemble_step, start=start, fns=self.teacher_fns, targets=targets)
            self._map(fn, (0, 0, 0, 0 if batched else None))(ensemble, chain.params, chain.buffers,
                                                              self._one(x) if batched else x)
        self.ensemble_count += 1

    def draw_distill_inputs(self, key: GroupKey) -> tuple[torch.Tensor, torch.Tensor]:
        """S' for every run of group ``key``: indices (R, M') into D' and the inputs x' of the group's
        generator (R, M', ...), R = ``num_runs`` (one S' per pooled teacher). Advances the group's
        random streams."""
        idx = self._group_idx[key]
        R = self.num_runs
        self.streams.group_indices(key, idx, self.distill_sets.sizes)
        if key.input_generator == InputGenerator.NOISE.value:
            shape = (R, key.batch_size, *self.chains[0].data.input_shape)
            x = torch.empty(shape, device=self.device)
            self.streams.group_normal(key, x, range(R))
            moments = self._noise_moments
            view = (R,) + (1,) * (x.dim() - 1)
            return idx, moments[:, 0].view(view) + moments[:, 1].view(view) * x
        (x,) = self.distill_sets.gather(idx)
        noisy, scale = self._input_noise[key]
        if noisy:
            eps = torch.zeros_like(x)
            self.streams.group_normal(key, eps, noisy)
            x = x + scale.view((R,) + (1,) * (x.dim() - 1)) * eps
        return idx, x

    def distill_group(self, key: GroupKey, t: int | None = None) -> None:
        """Algorithm 1's inner step for distillation group ``key`` of every run at step ``t`` (default:
        the current step; it sets the students' learning rates): draw S' (:meth:`draw_distill_inputs`),
        compute the current teacher sample's statistics on it once (and its input-gradients for
        derivative matching), and update each of the group's students (estimator, then one Adam step
        on its loss). For a pooled teacher the statistics are the K current samples' on the run's one
        S', and the students' targets pool them (see the module docstring). Does not advance t."""
        t = self.t if t is None else t
        if self.pooled:
            self._distill_group_pooled(key, t)
            return
        chain, students = self._teacher()[0], self._students()
        idx, x = self.draw_distill_inputs(key)
        projection = teacher_grad = None
        if key.matches_derivatives:  # one Rademacher projection of the class axis per example
            projection = torch.empty(self.K, key.batch_size, self.num_outputs, device=self.device)
            self.streams.group_signs(key, projection)
            fn = functools.partial(steps.teacher_statistics_and_gradient, fns=self.teacher_fns, autodiff=self.autodiff)
            stats, teacher_grad = self._map(fn, (0, 0, 0, 0))(chain.params, chain.buffers, self._one(x),
                                                               self._one(projection))
        else:
            fn = functools.partial(steps.teacher_statistics, fns=self.teacher_fns)
            stats = self._map(fn, (0, 0, 0))(chain.params, chain.buffers, self._one(x))
        for j in self.chains[0].groups[key]:
            self._set_lr(j, t)
            step = functools.partial(steps.distill_gradients, fns=self.student_fns[j], autodiff=self.autodiff)
            if projection is None:
                fn = functools.partial(step, projection=None, teacher_grad=None)
                grads = self._map(fn, (0, 0, 0, 0))(students[j], self._one(x), self._one(idx), stats)
            else:
                grads = self._map(step, (0, 0, 0, 0, 0, 0))(students[j], self._one(x), self._one(idx), stats,
                                                             self._one(projection), teacher_grad)
            self._adam_step(j, grads, chain_axis=self.students_batched)

    def _teacher_on_inputs(self, fn: Callable, *shared: torch.Tensor) -> Any:
        """``fn(params, buffers, *shared)`` for every teacher chain on the same inputs, with a leading
        chain axis (K, ...) on every output, batched or not."""
        chain = self._teacher()[0]
        if self.batched:
            return vmap(fn, in_dims=(0, 0) + (None,) * len(shared), randomness="different")(
                chain.params, chain.buffers, *shared)
        out = fn(chain.params, chain.buffers, *shared)
        return tuple(v.unsqueeze(0) for v in out) if isinstance(out, tuple) else out.unsqueeze(0)

    def _distill_group_pooled(self, key: GroupKey, t: int) -> None:
        """:meth:`distill_group` for a pooled teacher: one S' and x' for the run, the K chains'
        statistics (K, M', ...) on it, each student updated from targets pooled over them
        (:func:`~gped_kit.engine.steps.pooled_distill_gradients`); derivative matching matches the mean
        of the K chains' projected input-gradients (one projection, shared)."""
        students = self._students()
        idx, x = self.draw_distill_inputs(key)
        x, idx = x[0], idx[0]
        projection = teacher_grad = None
        if key.matches_derivatives:
            signs = torch.empty(1, key.batch_size, self.num_outputs, device=self.device)
            self.streams.group_signs(key, signs)
            projection = signs[0]
            fn = functools.partial(steps.teacher_statistics_and_gradient, fns=self.teacher_fns, autodiff=self.autodiff)
            stats, grads = self._teacher_on_inputs(fn, x, projection)
            teacher_grad = grads.mean(0)
        else:
            stats = self._teacher_on_inputs(functools.partial(steps.teacher_statistics, fns=self.teacher_fns), x)
        for j in self.chains[0].groups[key]:
            self._set_lr(j, t)
            grads = steps.pooled_distill_gradients(students[j], x, idx, stats, projection, teacher_grad,
                                                   fns=self.student_fns[j], autodiff=self.student_autodiff)
            self._adam_step(j, grads, chain_axis=False)

    def _adam_step(self, j: int, grads: dict[str, torch.Tensor], chain_axis: bool) -> None:
        """Student slot ``j``'s Adam step for every run, once over its flat buffers, from the
        gradients ``grads`` (with a leading run axis when ``chain_axis``; one run's otherwise)."""
        buffers = self._student_buffers[j]
        buffers.params.layout.gather_(buffers.grads, grads, chain_axis=chain_axis)
        self.adam_steps[j] += 1
        corrections = self.values.corrections[j].row(self.adam_steps[j])
        adam_update_(buffers.params, buffers.grads, buffers.adam, buffers.lr, corrections[0], corrections[1])
        self.steps_since_log[j] += 1

    def _set_lr(self, j: int, t: int) -> None:
        """Each chain's learning rate of student slot ``j`` at step t (Appendix A.2's halving), written
        into the state only when it changes (``fill_``: no upload, no synchronisation)."""
        for k, lr in enumerate(self.learning_rates(j, t)):
            if lr != self.lr_values[j][k]:
                self.students[j].lr[k].fill_(lr)
                self.lr_values[j][k] = lr

    def learning_rates(self, j: int, t: int) -> list[float]:
        """Each run's learning rate of student slot ``j`` at step t (host floats)."""
        return [student_lr(c.students[j].config, t, c.config.burn_in, c.steps_per_epoch) for c in self.chains]

    # ------------------------------------------------------------------ a run's state (checkpoints)
    def _run_chains(self, r: int) -> int | slice:
        """The index of run ``r``'s teacher chains in the chain axis: its own chain (the axis dropped),
        or all K of a pooled teacher (the axis kept)."""
        return slice(None) if self.pooled else r

    def run_state(self, r: int) -> RunState:
        """Run ``r``'s :class:`~gped_kit.engine.state.RunState` now: its own copies of everything it
        needs to continue from the current step (chain r's slice of the batch, or a pooled teacher's
        K chains). The dropout stream's state is the one the loop saved last (at its last checkpoint
        point or its end), as the loop draws from the global stream while it runs."""
        def own(values: dict[str, torch.Tensor], index: int | slice) -> dict[str, torch.Tensor]:
            return {n: _own(v[index]) for n, v in values.items()}

        k = self._run_chains(r)
        chain = self.chain
        teacher = TeacherRunState(params=own(chain.params, k), buffers=own(chain.buffers, k),
                                  sampler=own(chain.sampler, k), train_nll_sum=_own(chain.train_nll_sum[k]),
                                  steps_in_nll_sum=self.steps_in_nll_sum)
        students = tuple(StudentRunState(params=own(s.params, r), buffers=own(s.buffers, r),
                                         exp_avg=own(s.adam.exp_avg, r), exp_avg_sq=own(s.adam.exp_avg_sq, r),
                                         lr=self.lr_values[j][r], store_sums=_own(s.store.sums[r]),
                                         store_counts=_own(s.store.counts[r]), loss_sum=_own(s.loss_sum[r]),
                                         steps_since_log=self.steps_since_log[j], adam_steps=self.adam_steps[j])
                         for j, s in enumerate(self.students))
        ensemble = EnsembleRunState(sums=own(self.ensemble.sums, k), count=self.ensemble_count,
                                    recent=self.recent.state_dict(r))
        if self.pooled:
            generators = {"chains": [self.streams.chain_state_dict(i) for i in range(self.K)],
                          "groups": self.streams.groups_state_dict(r)}
        else:
            generators = self.streams.state_dict(r)
        return RunState(t=self.t, elapsed=self.elapsed, history=list(self.history[r]), teacher=teacher,
                        students=students, ensemble=ensemble, generators=generators,
                        dropout_rng={n: v.clone() for n, v in self._dropout_state.items()},
                        snapshots=_own(self.snapshots[k]), snapshots_taken=self.snapshots_taken)

    def load_run_states(self, states: Mapping[int, RunState]) -> None:
        """Continue each run r of ``states`` from its :class:`~gped_kit.engine.state.RunState` (runs not
        in it keep theirs), so that the engine goes on as the runs that made them would have.

        Every run of a batch must be at the same step (runs not given: at the engine's), and each state
        must come from a run of this kind (pooled or single, the same students); otherwise
        ``ValueError`` before anything is changed. The host-side counters shared by the batch (the
        step, the counts since the last log point, Adam's and the ensemble's, the snapshots taken, the
        dropout stream) are the lowest run's; the elapsed time is the longest. ``resumed_from`` records
        the step."""
        if not states:
            return
        for r, state in states.items():
            if not 0 <= r < self.num_runs:
                raise ValueError(f"load_run_states: run {r} of an engine of {self.num_runs} runs")
            if state.pooled != self.pooled or len(state.students) != len(self.students):
                raise ValueError(f"load_run_states: run {r}'s state is of a {'pooled' if state.pooled else 'single'} "
                                 f"run with {len(state.students)} students, this engine's runs are "
                                 f"{'pooled' if self.pooled else 'single'} with {len(self.students)}")
        steps = sorted({s.t for s in states.values()} | ({self.t} if len(states) < self.num_runs else set()))
        if len(steps) != 1:
            raise ValueError(f"the chains would resume at different steps {steps}; all chains of a batch must be at "
                             "the same step (run them separately, or start afresh)")
        for r, state in states.items():
            self._load_run(r, state)
        first = states[min(states)]
        self.host = HostState(t=first.t, steps_in_nll_sum=first.teacher.steps_in_nll_sum,
                              ensemble_count=first.ensemble.count,
                              adam_steps=[s.adam_steps for s in first.students],
                              steps_since_log=[s.steps_since_log for s in first.students],
                              snapshots_taken=first.snapshots_taken)
        self.resumed_from = self.t
        self.elapsed = max(s.elapsed for s in states.values())
        self._dropout_state = {n: v.cpu() for n, v in first.dropout_rng.items()}

    def load_run_state(self, r: int, state: RunState) -> None:
        """Continue run ``r`` alone from ``state`` (:meth:`load_run_states` with one run)."""
        self.load_run_states({r: state})

    def _load_run(self, r: int, state: RunState) -> None:
        """Copy run ``r``'s per-run parts of ``state`` into the engine's tensors, generators and history."""
        chain = self.chain
        k = self._run_chains(r)
        teacher = state.teacher
        for values, saved in ((chain.params, teacher.params), (chain.buffers, teacher.buffers),
                              (chain.sampler, teacher.sampler)):
            for n, v in values.items():
                v[k].copy_(saved[n])
        chain.train_nll_sum[k].copy_(teacher.train_nll_sum)
        for j, (s, saved) in enumerate(zip(self.students, state.students)):
            for values, part in ((s.params, saved.params), (s.buffers, saved.buffers),
                                 (s.adam.exp_avg, saved.exp_avg), (s.adam.exp_avg_sq, saved.exp_avg_sq)):
                for n, v in values.items():
                    v[r].copy_(part[n])
            s.store.sums[r].copy_(saved.store_sums)
            s.store.counts[r].copy_(saved.store_counts)
            s.loss_sum[r].copy_(saved.loss_sum)
            s.lr[r].fill_(saved.lr)
            self.lr_values[j][r] = saved.lr
        for n, v in self.ensemble.sums.items():
            v[k].copy_(state.ensemble.sums[n])
        self.recent.load_state_dict(r, state.ensemble.recent, self.test_sums())
        if self.pooled:
            for i, saved in enumerate(state.generators["chains"]):
                self.streams.load_chain_state_dict(i, saved)
            self.streams.load_groups_state_dict(r, state.generators["groups"])
        else:
            self.streams.load_state_dict(r, state.generators)
        self.snapshots[k].copy_(state.snapshots)
        self.history[r] = list(state.history)

    # ------------------------------------------------------------------ the loop
    def run(self, stop: int | None = None, hooks: Sequence[Hook] = ()) -> None:
        """Iterate up to step ``stop`` (default T), logging every ``log_every`` steps and at
        ``stop``; hooks are called at log points, checkpoint points and at the end."""
        cfg = self.config
        stop = cfg.num_iterations if stop is None else min(stop, cfg.num_iterations)
        started = time.perf_counter()
        with torch.random.fork_rng(devices=[self.device.index or 0] if self.device.type == "cuda" else []):
            _set_global_rng(self._dropout_state, self.device)
            try:
                while self.t < stop:
                    if self.graphs is None or not self.graphs.run_period(stop):
                        self.step()
                    if self.t % cfg.log_every == 0 or self.t == stop:
                        now = time.perf_counter()
                        self.elapsed += now - started
                        started = now
                        rows = self.log()
                        for hook in hooks:
                            hook.on_log(self, rows)
                    if self.t % cfg.checkpoint_every == 0 or self.t == stop:
                        self._dropout_state = _global_rng(self.device)
                        for hook in hooks:
                            hook.on_checkpoint(self)
            finally:
                self._dropout_state = _global_rng(self.device)
                for hook in hooks:
                    hook.on_end(self)

    @property
    def finished(self) -> bool:
        return self.t >= self.config.num_iterations

    # ------------------------------------------------------------------ evaluation
    def log(self) -> list[list[dict]]:
        """One history row per (run, student) at the current step (the teacher's columns
        repeated; one row with the teacher's columns alone for a run without students); checks
        every chain for divergence. A pooled run's rows carry the pooled teacher's metrics, the
        mean of its chains' minibatch NLLs and each chain's ensemble NLL (``teacher_nll_chain<k>``).
        Reads the device: call at log points only."""
        train_nll = (self.chain.train_nll_sum / max(self.steps_in_nll_sum, 1)).tolist()
        losses = [(s.loss_sum / max(n, 1)).tolist() for s, n in zip(self.students, self.steps_since_log)]
        for k, value in enumerate(train_nll):
            if not math.isfinite(value):
                c = self.chain_specs[k]
                sampler = c.config.sampler
                what = (f"{self._chain_name(k)}{str(sampler.name).upper()} diverged before step {self.t}: the "
                        f"teacher's minibatch NLL is {value}")
                hint = self._data_hint(self.chain_run[k], ("train_x", "train_y")) or sampler.divergence_hint(
                    self.t, c.num_train)
                raise FloatingPointError(f"{what}. {hint[:1].upper()}{hint[1:]}.")
        for j, (values, n) in enumerate(zip(losses, self.steps_since_log)):
            for r, value in enumerate(values):
                if n and not math.isfinite(value):
                    s = self.chains[r].students[j]
                    hint = self._data_hint(r, ("distill_x",)) or f"lower its lr={s.config.lr:g}"
                    raise FloatingPointError(f"{self._run_name(r)}student {s.label!r} diverged before step {self.t} "
                                             f"(training loss {value}); {hint}")
        self.chain.train_nll_sum.zero_()
        self.steps_in_nll_sum = 0
        for j, s in enumerate(self.students):
            s.loss_sum.zero_()
        outputs = self.student_outputs(["test"]) if self.t > self.config.burn_in else None
        if self.t % self.config.log_every == 0:  # regular log points only: a stop (interruption) changes nothing
            self.recent.advance(self.run_count, self.test_sums())
        rows_per_run = []
        for r, c in enumerate(self.chains):
            run_nll = sum(train_nll) / self.K if self.pooled else train_nll[r]
            base = {"step": self.t, "teacher_train_nll": run_nll, "teacher_samples": self.run_count,
                    "elapsed_s": self.elapsed, **self.teacher_metrics(r)}
            if self.pooled:
                base.update(self.chain_metrics())
            rows = []
            for j, s in enumerate(c.students):
                row = dict(base, student=s.label, student_train_loss=losses[j][r] if self.steps_since_log[j]
                           else float("nan"))
                if outputs is not None:
                    row.update(self.student_metrics(r, j, outputs[r]["test"][s.label]))
                rows.append(row)
            rows = rows or [base]
            self.history[r].extend(rows)
            rows_per_run.append(rows)
        self.steps_since_log = [0] * len(self.steps_since_log)
        return rows_per_run

    def _data_hint(self, r: int, names: Sequence[str]) -> str | None:
        """Why run r diverged when the data behind the failed loss hold NaN or infinite values
        (changed in place after the chain was built: :meth:`GPEDData.validate` rejects them before);
        None when they are finite. Reads the data: only called when a divergence is raised."""
        counts = self.chains[r].data.non_finite_counts(names)
        if not counts:
            return None
        return (f"the chain's data hold non-finite values (NaN or infinity) in {describe_counts(counts)}, so every "
                "loss that touches them is NaN whatever the step size; they were finite when the chain was built, so "
                "the tensors were changed in place since: rebuild the data from finite tensors")

    def _chain_name(self, k: int) -> str:
        if self.pooled:
            return f"chain {k} (seed {self.chain_seeds[k]}) of the pooled teacher: " if self.K > 1 else ""
        return f"chain {k} of the batch: " if self.batched else ""

    def _run_name(self, r: int) -> str:
        return "" if self.pooled else self._chain_name(r)

    def ensemble_means(self, r: int, eval_set: str = "test") -> dict[str, torch.Tensor]:
        """Run r's teacher-ensemble estimates of E[g] per tracked target on ``eval_set`` (empty
        before the first sample): chain r's, or for a pooled teacher the mean over every chain's
        kept samples, ``sum_k sums_k / (K count)``."""
        if self.ensemble_count == 0:
            return {}
        sl = self.eval_slices[eval_set]
        if self.pooled:
            return {name: sums[:, sl].sum(0) / self.run_count for name, sums in self.ensemble.sums.items()}
        return {name: sums[r, sl] / self.ensemble_count for name, sums in self.ensemble.sums.items()}

    def chain_ensemble_means(self, k: int, eval_set: str = "test") -> dict[str, torch.Tensor]:
        """Teacher chain k's own ensemble estimates (its kept samples only; for independent chains
        the same as :meth:`ensemble_means`)."""
        if self.ensemble_count == 0:
            return {}
        sl = self.eval_slices[eval_set]
        return {name: sums[k, sl] / self.ensemble_count for name, sums in self.ensemble.sums.items()}

    def teacher_metrics(self, r: int) -> dict[str, float]:
        """The teacher ensemble's predictive metrics on run r's test set (``teacher_nll`` etc.)."""
        means = self.ensemble_means(r)
        if not means:
            return {}
        likelihood, labels = self.chains[r].likelihood, self.test_labels[r]
        out = {f"teacher_{name}": value for name, value in likelihood.predictive_metrics(means, labels).items()}
        recent = self.recent.means(r, self.run_count, self.test_sums())
        if recent:
            out.update({f"teacher_recent_{name}": value
                        for name, value in likelihood.predictive_metrics(recent, labels).items()})
            out["teacher_recent_from_sample"] = self.recent.start_count + 1
        return out

    def chain_metrics(self) -> dict[str, float]:
        """Each teacher chain's own ensemble NLL on the test set, ``teacher_nll_chain<k>`` (the
        columns a pooled run's history adds; empty before the first sample)."""
        if self.ensemble_count == 0:
            return {}
        likelihood, labels = self.chains[0].likelihood, self.test_labels[0]
        return {f"teacher_nll_chain{k}": likelihood.predictive_metrics(self.chain_ensemble_means(k), labels)["nll"]
                for k in range(self.K)}

    def test_sums(self) -> dict[str, torch.Tensor]:
        """Each run's ensemble running sums on the test rows (run axis first): views of the chains'
        sums, or for a pooled teacher their sum over the chains (1, n, D)."""
        sl = self.eval_slices["test"]
        if self.pooled:
            return {name: sums[:, sl].sum(0, keepdim=True) for name, sums in self.ensemble.sums.items()}
        return {name: sums[:, sl] for name, sums in self.ensemble.sums.items()}

    def student_metrics(self, r: int, j: int, output: torch.Tensor) -> dict[str, float]:
        """Test metrics of student j of run r from its linked outputs (see :func:`prediction_metrics`)."""
        spec = self.chains[r]
        return prediction_metrics(spec, spec.students[j].target, output, self.ensemble_means(r))

    @torch.no_grad()
    def student_outputs(self, eval_sets: Sequence[str] | None = None) -> list[dict[str, dict[str, torch.Tensor]]]:
        """Every run's students' linked outputs (evaluation mode) on the evaluation sets:
        ``[run r][set][student label] -> (n, D)``."""
        names = list(self.eval_slices) if eval_sets is None else list(eval_sets)
        out: list[dict[str, dict[str, torch.Tensor]]] = [{n: {} for n in names} for _ in self.chains]
        chunk = self.config.eval_batch_size
        for j, spec in enumerate(self.chains[0].students):
            module, link = spec.network.eval, spec.target.link
            state = self.students[j]

            def forward(params: dict, buffers: dict, x: torch.Tensor) -> torch.Tensor:
                return link(functional_call(module, (params, buffers), (x,)))

            for name in names:
                sl = self.eval_slices[name]
                parts = []
                for start in range(sl.start, sl.stop, chunk):
                    (x,), batched = self.eval_sets.rows(start, min(start + chunk, sl.stop))
                    if self.students_batched:
                        parts.append(vmap(forward, in_dims=(0, 0, 0 if batched else None))(
                            state.params, state.buffers, x))
                    else:
                        parts.append(forward(chain_view(state.params, 0), chain_view(state.buffers, 0),
                                             x[0] if batched else x).unsqueeze(0))
                values = torch.cat(parts, dim=1)
                for r, c in enumerate(self.chains):
                    out[r][name][c.students[j].label] = values[r]
        return out

    def memory_bytes(self) -> dict[str, int]:
        """Bytes the batch's state and data hold now, by part (data: each distinct set once)."""
        def size(tree: Any) -> int:
            return sum(t.numel() * t.element_size() for t in tree_leaves(tree))

        teacher_scratch = self._teacher_buffers.grads.flat
        noise = self._teacher_buffers.noise.flat
        out = {"teacher": (size(self.chain) + size(self._noise_flat) + size(self.snapshots) + size(teacher_scratch)
                           + (0 if noise is self._noise_flat else size(noise))),
               "students": sum(size((s.params, s.buffers, s.adam, s.lr, s.loss_sum, b.grads.flat))
                               for s, b in zip(self.students, self._student_buffers)),
               "u_o_stores": sum(size(s.store) for s in self.students),
               "ensemble": size(self.ensemble),
               "data": self.train_sets.nbytes + self.distill_sets.nbytes + self.eval_sets.nbytes}
        out["total"] = sum(out.values())
        return out

    # ------------------------------------------------------------------ results
    def results(self) -> list[GPEDResult]:
        """Each run's :class:`GPEDResult` at the current step (a pooled teacher's snapshots: every
        chain's, chain by chain, K x S rows)."""
        outputs = self.student_outputs()
        results = []
        for r, c in enumerate(self.chains):
            history = pd.DataFrame(self.history[r])
            last = history[history["step"] == self.t] if len(history) else history
            rows = []
            for j, s in enumerate(c.students):
                row = config_columns(c, s, self.device)
                match = last[last["student"] == s.label] if "student" in last else last
                if len(match):
                    row.update({key: v for key, v in match.iloc[-1].items() if key not in ("student", "step")})
                row["steps_done"] = self.t
                row["iterations_per_s"] = self.t / self.elapsed if self.elapsed else float("nan")
                if self.finished and (text := check_skill(s.label, row)) is not None:
                    warnings.warn(text, SkillWarning, stacklevel=2)
                rows.append(row)
            teacher = {name: {n: v.cpu() for n, v in self.ensemble_means(r, name).items()} for name in self.eval_slices}
            students = {name: {label: v.cpu() for label, v in outputs[r][name].items()} for name in self.eval_slices}
            snapshots = None
            if self.config.num_snapshots:
                chains = slice(None) if self.pooled else r  # a pooled run's: every chain's, chain by chain
                taken = self.snapshots[chains, :self.snapshots_taken]
                snapshots = taken.reshape(-1, taken.shape[-1]).cpu()
            results.append(GPEDResult(
                summary=pd.DataFrame(rows), history=history, teacher_outputs=teacher, student_outputs=students,
                steps_done=self.t, finished=self.finished, snapshots=snapshots,
                student_params=[{n: v[r].detach().cpu().clone() for n, v in s.params.items()} for s in self.students],
                student_buffers=[{n: v[r].detach().cpu().clone() for n, v in s.buffers.items()} for s in self.students],
                stores=[_store_estimates(s.store, r) if c.students[j].estimator.uses_store else None
                        for j, s in enumerate(self.students)],
                spec=c))
        return results


def _own(t: torch.Tensor) -> torch.Tensor:
    """A tensor's own copy (a view would keep, and a checkpoint would save, the whole stacked storage)."""
    return t.detach().clone()


def _store_estimates(store, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    counts = store.counts[k]
    visited = torch.nonzero(counts > 0).squeeze(1)
    chain_store = type(store)(store.sums[k], counts)
    return visited.cpu(), estimates(chain_store, visited).cpu()


def prediction_metrics(spec: ChainSpec, target: Target, output: torch.Tensor,
                       ensemble: dict[str, torch.Tensor]) -> dict[str, float]:
    """Test metrics of a student's linked outputs as Algorithm 1 reports them: the target's own
    (:meth:`~gped_kit.core.targets.Target.evaluate`) against chain ``spec``'s test labels, the
    teacher ensemble's estimate of the same E[g] (``ensemble[target.name]``, when tracked) and, for a
    target reporting ``nll_gap``, the ensemble's predictive NLL (its likelihood's
    ``predictive_metrics``). ``ensemble`` maps target names to the ensemble's estimates (empty
    before the first sample)."""
    labels = spec.data.test_y.to(output.device)
    ensemble = {name: value.to(output.device) for name, value in ensemble.items()}
    teacher_nll = None
    if target.reports("nll_gap") and spec.likelihood.ensemble_target in ensemble:
        teacher_nll = spec.likelihood.predictive_metrics(ensemble, labels)["nll"]
    return target.evaluate(output, labels, spec.data.num_outputs, ensemble.get(target.name), teacher_nll)


def config_columns(spec: ChainSpec, student, device: torch.device) -> dict[str, Any]:
    """The tidy configuration columns of one (chain, student) row."""
    cfg, sc = spec.config, student.config
    arch = sc.arch if sc.arch is not None else cfg.model
    preset = arch if isinstance(arch, ArchSpec) else None
    cols = dict(spec.data.info)
    cols.update(
        model=cfg.model_name, likelihood=spec.likelihood.name, sampler=str(cfg.sampler.name),
        step_size=cfg.sampler.step_size,
        schedule=str(cfg.sampler.schedule), prior_precision=cfg.sampler.prior_precision,
        batch_size=cfg.sampler.batch_size, num_iterations=cfg.num_iterations, burn_in=cfg.burn_in,
        eval_thinning=cfg.eval_thinning, seed=cfg.seed, device=str(device), torch_version=torch.__version__,
        student=sc.label, target=student.target.name, estimator=sc.estimator.value,
        student_arch=preset.family if preset else _model_name(arch),
        k1=preset.k1 if preset else float("nan"), k2=preset.k2 if preset else float("nan"),
        dropout=preset.dropout if preset else float("nan"), thinning=sc.thinning, student_batch_size=sc.batch_size,
        lr=sc.lr, lr_halving_epochs=sc.lr_halving_epochs,
        regularizer=record(sc.regularizer) if sc.regularizer is not None else None, reg_weight=sc.reg_weight,
        input_generator=sc.input_generator.value, derivative_weight=sc.derivative_weight,
        student_params=student.network.num_params, teacher_params=spec.teacher.num_params)
    if cfg.num_chains > 1:  # columns of the newer options only where they are used: older tables stay as they were
        cols["num_chains"] = cfg.num_chains
    if cfg.matmul_precision != "highest":
        cols["matmul_precision"] = cfg.matmul_precision
    if cfg.sampler.schedule is StepSchedule.CYCLICAL:
        cols.update(cycles=cfg.sampler.cycles, explore_fraction=cfg.sampler.explore_fraction,
                    cycle_floor=cfg.sampler.cycle_floor)
    if sc.lr_warmup:
        cols["lr_warmup"] = sc.lr_warmup
    return cols


def _model_name(model: Any) -> str:
    if isinstance(model, torch.nn.Module):
        return type(model).__name__
    return getattr(model, "__name__", type(model).__name__)


def _global_rng(device: torch.device) -> dict[str, torch.Tensor]:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_global_rng(state: dict[str, torch.Tensor], device: torch.device) -> None:
    torch.set_rng_state(state["cpu"].cpu())
    if "cuda" in state and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)

