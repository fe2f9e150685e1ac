"""Algorithm 1 for K >= 1 chains as a typed state and a step: :func:`init`, :func:`step`, and the loop.

:func:`init` builds, from :class:`~gped_kit.engine.spec.ChainSpec` s (one per *run*), an
:class:`~gped_kit.engine.setup.EngineSetup` (what stays fixed: the chains'
:class:`~gped_kit.engine.layout.ChainLayout`, their data, the step functions, the event schedule, the
device-side value tables) and an :class:`~gped_kit.engine.state.EngineState` at step 0 (what the
steps advance: the teacher chains, the students, the ensemble, the snapshots, the host counters,
the random streams). :func:`step` advances the state by one iteration;
:func:`gped_kit.engine.loop.run` iterates it with log and checkpoint points, replaying periods as
CUDA graphs where it can (:mod:`gped_kit.engine.graphs`); one run's part of the state is what a
checkpoint saves (:mod:`gped_kit.engine.resume`). :class:`GPEDEngine` holds a setup and a state and
offers these functions as methods.

**One iteration t** (:func:`step`): every chain draws its minibatch of D and its SGLD noise (with
``GPEDConfig(random_numbers="counter")`` counter-based, SGLD's noise inside one compiled update,
:class:`~gped_kit.engine.setup.FusedUpdate`) and takes one step of Eq. 7 (:func:`teacher_step`; with the
default random numbers, over a large enough buffer, also one compiled update, the same numbers),

    theta_{t+1} = theta_t + (eta_t / 2) (grad log p(theta_t) + (N / M) sum_{i in S_t} grad log p(y_i | x_i, theta_t))
                  + N(0, eta_t I)

(or its sampler's update); the sample after step t is kept as a snapshot when t is a snapshot step
(:func:`take_snapshot`); after burn-in (t > B) the sample is added to the ensemble every
``eval_thinning`` steps (:func:`accumulate`), and every distillation group
(:class:`~gped_kit.engine.config.GroupKey`) whose H divides t draws S' from D' and updates each of
its students with one Adam step on Eq. 8's loss towards the targets of Eq. 9 (U_s) or Eq. 10 (U_o)
(:mod:`gped_kit.engine.distill`). :func:`~gped_kit.engine.setup.events` says which of these events
step t runs; the host counters then advance (:meth:`~gped_kit.engine.state.HostState.advanced`).

**Chains as data**: the layout, chosen once by :func:`init`, says how the K teacher chains feed the
runs: K independent chains (:class:`~gped_kit.engine.layout.Independent`; the step functions run on
chain 0's views when K = 1 and under ``torch.func.vmap`` over the chain axis when K > 1, so K chains
in one batch compute what K separate runs compute, up to floating-point round-off of batched matrix
products) or one pooled teacher (:class:`~gped_kit.engine.layout.Pooled`; ``GPEDConfig.num_chains``
K > 1): K chains whose kept samples form one teacher ensemble, ``sum_k sums_k / (K count)``, and feed
one set of students, whose targets pool the K current samples (U_s their mean, U_o all K into the
running means; :func:`~gped_kit.engine.steps.pooled_distill_gradients`). A pooled run's history adds
each chain's ensemble NLL (``teacher_nll_chain<k>``); it runs as its own batch
(:func:`~gped_kit.engine.layout.check_batchable`).

**No host synchronisation between log points**: indices, noise and learning rates stay on the
device; per-chain learning-rate changes are written with ``fill_`` (no upload); the only reads are at
log points (:func:`gped_kit.engine.evaluate.log`: history rows, divergence checks) and checkpoints.

**The updates run over flat buffers**: the chains' parameters and momenta are views of one ``(K, P)``
buffer each (:mod:`gped_kit.core.flat`), and each student slot's parameters and Adam moments views of
its ``(R, P_j)`` segment of its distillation group's buffer, the group's slots one after another
(:class:`~gped_kit.engine.state.AdamGroup`: they step together), so the sampler's update is a handful
of kernels per step and Adam's one handful per group, not per student (:func:`adam_step`); the values
that change with t (a varying step size, Adam's bias corrections) are read from device-side tables
(:mod:`gped_kit.engine.values`).
"""

from __future__ import annotations

import functools
import math
from typing import Callable, Mapping, Protocol, Sequence

import torch

from ..core.adam import AdamState, SegmentRates, adam_update_, bias_corrections
from ..core.estimators import estimator_init
from ..core.fused import Fused
from ..core.options import InputGenerator, RandomNumbers
from ..core.sampler import SamplerName
from ..core.sgld import fused_min_elements, sgld_counter_update_, sgld_fused_update_
from ..models.presets import eval_chunk_rows, eval_chunks, widest_activation
from . import evaluate, loop, resume, steps
from .config import GroupKey
from .distill import (
    IndependentDistillation,
    PooledDistillation,
    draw_distill_inputs,
    one,
    teacher_map,
    teacher_views,
)
from .graphs import PeriodGraphs
from .layout import chain_layout, check_batchable
from .precision import teacher_matmul_precision
from .result import GPEDResult
from .sets import ChainSets
from .setup import EngineSetup, FusedUpdate, StepEvents, events, step_index_row
from .spec import ChainSpec
from .state import (
    AdamGroup,
    EngineState,
    EnsembleState,
    HostState,
    RunState,
    StepBuffers,
    StudentBuffers,
    chain_view,
    flat,
    flatten_chain_,
    flatten_students_,
    init_chain_state,
    init_student_state,
    noise_into_layout_,
    stack_trees,
)
from .steps import StudentFns, TeacherFns
from .streams import ChainStreams, CounterStreams
from .values import EngineValues, ValueTable, step_index
from .window import RecentWindow

__all__ = ["GPEDEngine", "Hook", "StepEvents", "check_batchable", "init", "step", "teacher_step", "take_snapshot",
           "accumulate", "adam_step"]

#: The teacher's move at step t: ``teacher(state, setup, t)`` (default :func:`teacher_step`, the sampler's).
TeacherMove = Callable[[EngineState, EngineSetup, int], None]


class Hook(Protocol):
    """Called by :meth:`GPEDEngine.run`: ``on_log`` after each log point (with each chain's new
    history rows), ``on_checkpoint`` every ``checkpoint_every`` steps and at the last step,
    ``on_end`` once when the loop stops (normally or by an error)."""

    def on_log(self, engine: GPEDEngine, rows: list[list[dict]]) -> None: ...

    def on_checkpoint(self, engine: GPEDEngine) -> None: ...

    def on_end(self, engine: GPEDEngine) -> None: ...


# ---------------------------------------------------------------------- init
def init(chains: Sequence[ChainSpec], use_vmap: bool | None = None,
         pooled: bool | None = None) -> tuple[EngineSetup, EngineState]:
    """The setup and the state at step 0 of ``chains`` (one spec per run: K independent chains, or one
    pooled teacher of ``num_chains`` chains; :func:`~gped_kit.engine.layout.chain_layout` checks them
    and reads ``use_vmap`` and ``pooled``)."""
    layout = chain_layout(chains, use_vmap, pooled)
    chains = layout.runs
    ref = chains[0]
    config, device, K, R = ref.config, ref.device, layout.K, layout.num_runs

    # data: D (inputs, labels) and the evaluation inputs (test, then further sets) per teacher chain; D' per run
    eval_slices: dict[str, slice] = {}
    start = 0
    for name, x in ref.eval_sets.items():
        eval_slices[name] = slice(start, start + int(x.shape[0]))
        start += int(x.shape[0])
    num_eval = start
    # the distillation inputs' noise, made once here (an upload per step would block on CUDA): the noise
    # generator's per-run (mean, std) of D', and per group the runs with input noise and each run's standard
    # deviation (D's distill_noise_std, or the perturb generator's)
    noise_moments = (torch.tensor([c.noise_moments for c in chains], device=device)
                     if ref.noise_moments is not None else None)
    input_noise: dict[GroupKey, tuple[list[int], torch.Tensor]] = {}
    for key in ref.groups:
        stds = ([float(c.data.distill_noise_std) for c in chains]
                if key.input_generator == InputGenerator.DATA.value
                else [key.noise_std] * R if key.input_generator == InputGenerator.PERTURB.value else [0.0] * R)
        input_noise[key] = ([k for k, s in enumerate(stds) if s > 0], torch.tensor(stds, device=device))

    # state: the teacher per chain, the students per run
    chain = stack_trees([init_chain_state(*initial, c.config.sampler.init_state(initial[0]),
                                          c.config.sampler.num_coefficients)
                         for c, initial in zip(layout.chain_specs, layout.teacher_initial())])
    for k, c in enumerate(layout.chain_specs):
        for i, value in enumerate(c.config.sampler.coefficients(c.num_train)):
            chain.coefficients[k, i].fill_(value)
    students = []
    for j, s in enumerate(ref.students):
        states = []
        for c in chains:
            sc = c.students[j]
            store = estimator_init(sc.estimator, c.num_distill, sc.out_dim, device, sc.target.dtype)
            states.append(init_student_state(*c.initial[1 + j], sc.config.lr, store))
        students.append(stack_trees(states))
    # each slot's parameters and Adam moments as flat (R, P) buffers, the slots of a distillation group (which step
    # together) one after another in one buffer per part: a group's Adam step is a few kernels
    student_buffers: list[StudentBuffers | None] = [None] * len(students)
    adam_groups: dict[int, AdamGroup] = {}
    for slots in ref.groups.values():
        group_buffers, group = flatten_students_([students[j] for j in slots], slots)
        for j, b in zip(slots, group_buffers):
            student_buffers[j], adam_groups[j] = b, group
    if any(b is None for b in student_buffers):
        raise ValueError(f"student slots {[j for j, b in enumerate(student_buffers) if b is None]} belong to no "
                         "distillation group")
    num_outputs = ref.data.num_outputs
    ensemble = EnsembleState({name: torch.zeros(K, num_eval, target.out_dim(num_outputs), device=device,
                                                          dtype=target.dtype)
                              for name, target in ref.ensemble_targets.items()})
    snapshots = torch.zeros(K, config.num_snapshots, ref.teacher.num_params, device=device)

    # buffers for one step's draws; the chains' parameters and momenta as flat (K, P) buffers: a sampler step is
    # a few kernels
    idx = torch.empty(K, config.sampler.batch_size, dtype=torch.long, device=device)
    noise = torch.empty(K, ref.teacher.num_params, device=device)
    teacher_buffers = flatten_chain_(chain, noise)
    group_idx = {key: torch.empty(R, key.batch_size, dtype=torch.long, device=device) for key in ref.groups}
    # values that change with t, read from the device (gped_kit.engine.values): a varying step size's factors (every
    # sampler of the kit takes them as a device row: device_scales) and each slot's Adam bias corrections, a period
    # of the event schedule at a time
    period = math.lcm(config.eval_thinning, *(key.thinning for key in ref.groups))
    sampler = config.sampler
    counter = config.random_numbers is RandomNumbers.COUNTER
    values = EngineValues(
        ValueTable(sampler.scales, len(sampler.scales(0)), period, device)
        if sampler.varies and sampler.device_scales else None,
        [ValueTable(bias_corrections, 2, max(1, period // s.group.thinning), device) for s in ref.students],
        ValueTable(step_index, 1, period, device, dtype=torch.int64) if counter else None)
    stream_args = (layout.chain_seeds, list(ref.groups), device, [c.config.seed for c in chains])
    counter_streams = CounterStreams(*stream_args) if counter else None
    streams = counter_streams or ChainStreams(*stream_args)
    # SGLD's update as one compiled loop: with counter-based random numbers its noise drawn inside, keyed by each
    # chain's noise seed; with the generators' noise over a large logical buffer, the element-wise update's numbers
    fused_update = None
    if sampler.name is SamplerName.SGLD and counter_streams is not None:
        fused_update = FusedUpdate(Fused(sgld_counter_update_, "the fused SGLD update (counter-based noise)"),
                                   counter_streams.keys["noise"])
    elif (sampler.name is SamplerName.SGLD and teacher_buffers.params.layout.logical
          and teacher_buffers.params.flat.numel() >= fused_min_elements(device)):
        fused_update = FusedUpdate(Fused(sgld_fused_update_, "the fused SGLD update", exact=True))

    # step functions: the same for one chain and, under vmap, for many
    setup = EngineSetup(
        chains=chains, layout=layout, device=device,
        train_sets=ChainSets([(c.data.train_x, c.data.train_y) for c in layout.chain_specs]),
        distill_sets=ChainSets([(c.data.distill_x,) for c in chains]),
        eval_sets=ChainSets([(torch.cat(list(c.eval_sets.values())) if len(c.eval_sets) > 1 else c.data.test_x,)
                             for c in layout.chain_specs]),
        eval_slices=eval_slices, num_eval=num_eval, test_labels=[c.data.test_y for c in chains],
        noise_moments=noise_moments, input_noise=input_noise, period=period, values=values,
        teacher_fns=TeacherFns(ref.teacher.train, ref.teacher.eval, ref.likelihood, sampler, vmapped=layout.batched),
        student_fns=[StudentFns(s.network.train, s.target, s.estimator, s.regularizer, s.config.reg_weight,
                                s.config.derivative_weight, num_outputs) for s in ref.students],
        distillation=PooledDistillation() if layout.pooled else IndependentDistillation(),
        eval_chunk=config.eval_batch_size or eval_chunk_rows(
            widest_activation([ref.teacher.eval, *(s.network.eval for s in ref.students)], ref.data.test_x.shape[1:]),
            K, device.type),
        fused_update=fused_update)
    buffers = StepBuffers(
        teacher=teacher_buffers, students=[b for b in student_buffers if b is not None], adam_groups=adam_groups,
        idx=idx, noise=noise, group_idx=group_idx,
        teacher_views=None if layout.batched else (chain_view(chain, 0), chain_view(ensemble, 0)),
        student_views=None if layout.students_batched else [chain_view(s, 0) for s in students])
    state = EngineState(
        chain=chain, students=students, ensemble=ensemble, snapshots=snapshots,
        host=HostState(adam_steps=[0] * len(ref.students), steps_since_log=[0] * len(ref.students)),
        streams=streams, lr_values=[[c.students[j].config.lr for c in chains] for j in range(len(ref.students))],
        recent=RecentWindow(), history=[[] for _ in chains], buffers=buffers,
        # dropout masks come from the global random stream, seeded with the chain's initial values
        dropout_rng=dict(ref.rng_after_init))
    return setup, state


# ---------------------------------------------------------------------- one iteration
def step(state: EngineState, setup: EngineSetup, teacher: TeacherMove | None = None) -> None:
    """Iteration t of Algorithm 1 for every chain (see the module docstring): the teacher's move
    (``teacher``, default :func:`teacher_step`), then the events of
    :func:`~gped_kit.engine.setup.events` in order (snapshot, ensemble, each group in sorted order);
    then the host counters advance (t by one)."""
    t = state.host.t
    step_events = events(setup, t)
    (teacher or teacher_step)(state, setup, t)
    if step_events.snapshot is not None:
        take_snapshot(state, step_events.snapshot)
    if step_events.accumulate:
        accumulate(state, setup)
    slots: list[int] = []
    for key in step_events.groups:
        setup.distillation.distil_group(state, setup, key, t, adam_step)
        slots += setup.chains[0].groups[key]
    state.host = state.host.advanced(slots, step_events.accumulate, step_events.snapshot)


def teacher_step(state: EngineState, setup: EngineSetup, t: int) -> None:
    """One step of the teacher's sampler (Eq. 7 for SGLD) for every chain at step ``t``: draws each
    chain's minibatch of D and its noise, updates the samples and adds the minibatch NLL to the running
    sum the next log point reports."""
    chain, buffers = teacher_views(state)[0], state.buffers
    fused, step_row = setup.fused_update, step_index_row(setup, t)
    x, y = state.streams.teacher_minibatch(buffers.idx, setup.train_sets, step_row)
    if fused is None or fused.keys is None:
        state.streams.sgld_noise(buffers.noise, step_row)
    fn = functools.partial(steps.teacher_gradients, fns=setup.teacher_fns, autodiff=setup.layout.autodiff)
    with teacher_matmul_precision(setup.config.matmul_precision, setup.device):
        grads = teacher_map(setup, fn, (0, 0, 0))(chain, one(setup, x), one(setup, y))
    flat_teacher = buffers.teacher
    layout = flat_teacher.params.layout
    if fused is not None:  # Eq. 7 as one compiled update (core.sgld.sgld_counter_update_ with its noise drawn
        # inside, or sgld_fused_update_), which concatenates the gradient's parts itself when the flat layout is
        # their concatenation
        gradient = ([grads[name] for name in layout.names] if layout.logical
                    else layout.gather_(flat_teacher.grads, grads, chain_axis=setup.layout.batched).flat)
        scales = setup.values.scales
        row = scales.row(t) if scales is not None else None
        if fused.keys is not None:
            fused.update(flat_teacher.params.flat, gradient, flat_teacher.coefficients, row, fused.keys, step_row)
        else:
            fused.update(flat_teacher.params.flat, gradient, buffers.noise, flat_teacher.coefficients, row)
        return
    layout.gather_(flat_teacher.grads, grads, chain_axis=setup.layout.batched)
    noise_into_layout_(flat_teacher, buffers.noise)
    setup.config.sampler.update_(flat_teacher.params, flat_teacher.sampler, flat_teacher.grads, flat_teacher.noise,
                                 flat_teacher.coefficients, step_scales(setup, t))


def step_scales(setup: EngineSetup, t: int) -> tuple[float, ...] | torch.Tensor:
    """The sampler's step-size factors at step t: a row of the device-side table when the schedule
    varies and the sampler takes them as a tensor, host floats otherwise (constant for a constant
    schedule)."""
    scales = setup.values.scales
    return scales.row(t) if scales is not None else setup.config.sampler.scales(t)


def take_snapshot(state: EngineState, index: int) -> None:
    """Keep every chain's current sample as snapshot ``index`` (``GPEDConfig.num_snapshots``)."""
    theta = state.buffers.teacher.params
    state.snapshots[:, index] = theta.flat if theta.layout.logical else flat(state.chain.params)


def accumulate(state: EngineState, setup: EngineSetup) -> None:
    """Add every chain's current sample to its teacher ensemble: the running sums of each tracked
    target g on every evaluation input (in chunks of ``setup.eval_chunk`` rows)."""
    chain, ensemble = teacher_views(state)
    targets = setup.chains[0].ensemble_targets
    chunk, num_eval = setup.eval_chunk, setup.num_eval
    for start, stop in eval_chunks(0, num_eval, chunk):
        (x,), batched = setup.eval_sets.rows(start, stop)
        fn = functools.partial(steps.ensemble_step, start=start, fns=setup.teacher_fns, targets=targets)
        teacher_map(setup, fn, (0, 0, 0, 0 if batched else None))(ensemble, chain.params, chain.buffers,
                                                                  one(setup, x) if batched else x)


def adam_step(state: EngineState, setup: EngineSetup, j: int, grads: dict[str, torch.Tensor],
              chain_axis: bool) -> None:
    """Student slot ``j``'s Adam step for every run, from the gradients ``grads`` (with a leading run axis when
    ``chain_axis``; one run's otherwise), written into the slot's flat gradient buffer. The slots of a
    distillation group step together (the distillation calls this for each of them in order, at the same t,
    with the same update count), so the update itself runs once per group, with its last slot's gradient,
    over the group's buffers (:class:`~gped_kit.engine.state.AdamGroup`,
    :func:`~gped_kit.core.adam.adam_update_` with :class:`~gped_kit.core.adam.SegmentRates`: per element the
    same operations as one slot's update, so the same numbers); its bias corrections are those of the
    update ``adam_steps[j] + 1``, read from the device-side table."""
    buffers = state.buffers.students[j]
    buffers.params.layout.gather_(buffers.grads, grads, chain_axis=chain_axis)
    group = state.buffers.adam_groups[j]
    if j != group.slots[-1]:
        return  # the group's update runs with its last slot's gradient
    steps = {state.host.adam_steps[i] for i in group.slots}
    if len(steps) != 1:
        raise RuntimeError(f"the student slots {list(group.slots)} of one distillation group have taken different "
                           f"numbers of Adam steps ({[state.host.adam_steps[i] for i in group.slots]}); they step "
                           "together, so the engine's state is inconsistent")
    corrections = setup.values.corrections[j].row(state.host.adam_steps[j] + 1)
    slots = [state.buffers.students[i] for i in group.slots]
    rates = SegmentRates(tuple(b.grads.flat for b in slots), tuple(b.lr for b in slots))
    adam_update_(group.params, group.grads, AdamState(group.exp_avg, group.exp_avg_sq), rates, corrections[0],
                 corrections[1])


# ---------------------------------------------------------------------- the façade
def _field(part: str, name: str, writable: bool = True) -> property:
    """A property naming field ``name`` of the engine's ``part``: ``"state"``
    (:class:`~gped_kit.engine.state.EngineState`), ``"state.host"`` (its
    :class:`~gped_kit.engine.state.HostState`), ``"setup"`` (:class:`~gped_kit.engine.setup.EngineSetup`)
    or ``"setup.layout"`` (:class:`~gped_kit.engine.layout.ChainLayout`); the setup's are read-only."""
    path = part.split(".")

    def owner(engine: GPEDEngine) -> object:
        for attr in path:
            engine = getattr(engine, attr)
        return engine

    def get(engine: GPEDEngine) -> object:
        return getattr(owner(engine), name)

    def put(engine: GPEDEngine, value: object) -> None:
        setattr(owner(engine), name, value)

    return property(get, put if writable else None, doc=f"``{part}.{name}``.")


class GPEDEngine:
    """K chains of Algorithm 1 as one object: a ``setup`` and a ``state`` (:func:`init`) and the
    module's functions as methods (see the module docstring). Build it from :class:`ChainSpec` s
    (:func:`gped_kit.engine.spec.build_chain`), one per *run* (result, history, checkpoint): K
    independent chains, or one pooled teacher of ``num_chains`` chains; all start at step 0 (load
    checkpoints with :func:`gped_kit.engine.checkpoint.load_checkpoints`). ``use_vmap`` forces
    (True) or avoids (False, only for one teacher chain) the vmapped path; by default it is used
    exactly when K > 1. ``pooled`` True runs a one-chain spec through the pooled code (None: pooled
    exactly when ``num_chains`` > 1).

    ``chains`` are the specs (one per run), ``num_runs`` their number, ``K`` the number of teacher
    chains. :meth:`run_state` gives run r's part of the state as one typed value
    (:class:`~gped_kit.engine.state.RunState`, what a checkpoint stores) and :meth:`load_run_states`
    continues runs from such values. ``host`` holds the host-side counters (``t``, ``adam_steps``, ...
    name its fields); ``values`` the device-side values the steps read; ``graphs`` the captured periods
    (CUDA; None without graph mode). Subclasses change the teacher's move by overriding
    :meth:`teacher_step` (:class:`~gped_kit.engine.offline.OfflineEngine`)."""

    t = _field("state.host", "t")
    steps_in_nll_sum = _field("state.host", "steps_in_nll_sum")
    ensemble_count = _field("state.host", "ensemble_count")
    adam_steps = _field("state.host", "adam_steps")
    steps_since_log = _field("state.host", "steps_since_log")
    snapshots_taken = _field("state.host", "snapshots_taken")
    host = _field("state", "host")
    chain = _field("state", "chain")
    students = _field("state", "students")
    ensemble = _field("state", "ensemble")
    snapshots = _field("state", "snapshots")
    streams = _field("state", "streams")
    recent = _field("state", "recent")
    history = _field("state", "history")
    elapsed = _field("state", "elapsed")
    resumed_from = _field("state", "resumed_from")
    chains = _field("setup", "chains", writable=False)
    config = _field("setup", "config", writable=False)
    device = _field("setup", "device", writable=False)
    num_outputs = _field("setup", "num_outputs", writable=False)
    eval_sets = _field("setup", "eval_sets", writable=False)
    eval_slices = _field("setup", "eval_slices", writable=False)
    num_eval = _field("setup", "num_eval", writable=False)
    period = _field("setup", "period", writable=False)
    values = _field("setup", "values", writable=False)
    num_runs = _field("setup.layout", "num_runs", writable=False)
    K = _field("setup.layout", "K", writable=False)  # the teacher chains (the chain axis)
    pooled = _field("setup.layout", "pooled", writable=False)  # one pooled teacher's runs
    autodiff = _field("setup.layout", "autodiff", writable=False)  # the teacher's autodiff mode

    def __init__(self, chains: Sequence[ChainSpec], use_vmap: bool | None = None, pooled: bool | None = None) -> None:
        self.setup, self.state = init(chains, use_vmap, pooled)
        config = self.setup.config
        # graph mode (CUDA): periods of the event schedule replayed as captured CUDA graphs
        use_graphs = config.graph if config.graph is not None else self.setup.device.type == "cuda"
        self.graphs = PeriodGraphs(self.setup) if use_graphs else None

    @property
    def finished(self) -> bool:
        return evaluate.finished(self.state, self.setup)

    # ------------------------------------------------------------------ the events of one iteration
    def events(self, t: int) -> StepEvents:
        """What iteration t does after the teacher's step (:func:`~gped_kit.engine.setup.events`)."""
        return events(self.setup, t)

    def step(self) -> None:
        """Iteration t of Algorithm 1 for every chain (:func:`step`, with this engine's :meth:`teacher_step`).
        Dropout masks come from the global random stream, which :meth:`run` sets to the state's and saves back;
        called on its own, a step draws from the caller's stream and leaves the state's where it was, so a later
        run or checkpoint does not continue the same masks: to step and keep a run's stream, use
        ``run(stop=t + k)``."""
        step(self.state, self.setup, self._teacher_move)

    def _teacher_move(self, state: EngineState, setup: EngineSetup, t: int) -> None:
        self.teacher_step(t)

    def teacher_step(self, t: int | None = None) -> None:
        """One step of the teacher's sampler for every chain at step ``t`` (default: the current step;
        :func:`teacher_step`). Does not advance t."""
        teacher_step(self.state, self.setup, self.t if t is None else t)

    def take_snapshot(self, index: int) -> None:
        """Keep every chain's current sample as snapshot ``index`` (:func:`take_snapshot`); does not count it."""
        take_snapshot(self.state, index)

    def accumulate(self) -> None:
        """Add every chain's current sample to its ensemble's sums (:func:`accumulate`); does not count it."""
        accumulate(self.state, self.setup)

    def draw_distill_inputs(self, key: GroupKey, t: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """S' for every run of group ``key`` at step ``t`` (default: the current step;
        :func:`~gped_kit.engine.distill.draw_distill_inputs`)."""
        return draw_distill_inputs(self.state, self.setup, key, self.t if t is None else t)

    def distill_group(self, key: GroupKey, t: int | None = None) -> None:
        """Group ``key``'s update of every run's students at step ``t`` (default: the current step; it sets
        the students' learning rates): :mod:`gped_kit.engine.distill`. Does not advance t."""
        self.setup.distillation.distil_group(self.state, self.setup, key, self.t if t is None else t, adam_step)

    # ------------------------------------------------------------------ the loop
    def run(self, stop: int | None = None, hooks: Sequence[Hook] = ()) -> None:
        """Iterate up to step ``stop`` (default T), logging every ``log_every`` steps and at ``stop``
        (:func:`gped_kit.engine.loop.run`); hooks are called at log points, checkpoint points and at the end."""

        def on_log(rows: list[list[dict]]) -> None:
            for hook in hooks:
                hook.on_log(self, rows)

        def on_checkpoint() -> None:
            for hook in hooks:
                hook.on_checkpoint(self)

        def on_end() -> None:
            for hook in hooks:
                hook.on_end(self)

        loop.run(self.state, self.setup, lambda state: self.step(), lambda state: self.log(), stop, self.graphs,
                 on_log, on_checkpoint, on_end)

    # ------------------------------------------------------------------ a run's state (checkpoints)
    def run_state(self, r: int) -> RunState:
        """Run ``r``'s :class:`~gped_kit.engine.state.RunState` now (:func:`gped_kit.engine.resume.run_state`)."""
        return resume.run_state(self.state, self.setup, r)

    def load_run_states(self, states: Mapping[int, RunState]) -> None:
        """Continue each run r of ``states`` from its state (:func:`gped_kit.engine.resume.load_run_states`)."""
        resume.load_run_states(self.state, self.setup, states)

    # ------------------------------------------------------------------ evaluation (gped_kit.engine.evaluate)
    def log(self) -> list[list[dict]]:
        """One history row per (run, student) at the current step (:func:`gped_kit.engine.evaluate.log`)."""
        return evaluate.log(self.state, self.setup)

    def teacher_metrics(self, r: int) -> dict[str, float]:
        """The teacher ensemble's predictive metrics on run r's test set (``teacher_nll`` etc.)."""
        return evaluate.teacher_metrics(self.state, self.setup, r)

    def student_outputs(self, eval_sets: Sequence[str] | None = None) -> list[dict[str, dict[str, torch.Tensor]]]:
        """Every run's students' linked outputs on the evaluation sets: ``[run r][set][label] -> (n, D)``."""
        return evaluate.student_outputs(self.state, self.setup, eval_sets)

    def memory_bytes(self) -> dict[str, int]:
        """Bytes the batch's state and data hold now, by part (data: each distinct set once)."""
        return evaluate.memory_bytes(self.state, self.setup)

    def results(self) -> list[GPEDResult]:
        """Each run's :class:`GPEDResult` at the current step (:func:`gped_kit.engine.evaluate.results`)."""
        return evaluate.results(self.state, self.setup)
