"""The state of Algorithm 1 as plain tensors: typed containers, stacked along a chain axis.

* :class:`ChainState`: the teacher's parameters theta_t and buffers, the sampler's extra state,
  its per-chain step coefficients and the running sum of minibatch NLLs since the last log.
* :class:`StudentState`: a student's parameters phi and buffers, Adam's moments, its current
  learning rate, its estimator store (U_o's sums and counts) and its running loss sum.
* :class:`EnsembleState`: the teacher ensemble's running sums of every target g on the
  evaluation sets (the test set, then the further sets), one Monte Carlo estimate per input.

Every tensor has a leading chain axis of size K (the chains of a batch, K >= 1), so a batch is
one set of tensors; :func:`chain_view` gives one chain's views (no copies). The step functions
of :mod:`gped_kit.engine.steps` update these containers in place, for one chain or under
``torch.func.vmap`` over the chain axis.

* :class:`HostState`: the host-side counters, the same for every chain of a batch (the step t, the
  minibatch NLLs summed since the last log, the ensemble's sample count, each student slot's Adam
  steps and updates since the last log, the snapshots taken): one typed value the engine holds and
  graph mode advances by what a captured period did (:meth:`HostState.minus`, :meth:`HostState.plus`).

* :class:`RunState`: everything one *run* needs to continue exactly where it stopped, in one
  typed, immutable value with no chain axis of the batch (its own copies, not views): the step
  and the host-side counters, the history, its teacher's part (:class:`TeacherRunState`; every
  chain of a pooled teacher), each student's part (:class:`StudentRunState`), the ensemble's
  (:class:`EnsembleRunState`), the random generators' and the dropout stream's states and the
  snapshots. :func:`gped_kit.engine.resume.run_state` takes one out of an :class:`EngineState`
  and :func:`~gped_kit.engine.resume.load_run_states` puts it back; a checkpoint
  (:mod:`gped_kit.engine.checkpoint`) is a run state as a dict of tensors and plain data
  (:meth:`RunState.to_dict`, :meth:`RunState.from_dict`), so it never reads the engine's fields.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import torch

from ..core.adam import AdamState
from ..core.estimators import EstimatorState
from ..core.flat import FlatLayout, FlatTensors
from ..core.sampler import FLAT_MOMENTA, momentum_key
from .streams import ChainStreams
from .window import RecentWindow


class ChainState(NamedTuple):
    params: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    sampler: dict[str, torch.Tensor]
    coefficients: torch.Tensor
    train_nll_sum: torch.Tensor


class StudentState(NamedTuple):
    params: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    adam: AdamState
    lr: torch.Tensor
    store: EstimatorState
    loss_sum: torch.Tensor


class EnsembleState(NamedTuple):
    sums: dict[str, torch.Tensor]


@dataclass
class HostState:
    """The engine's host-side counters (see the module docstring): ``t`` the next step, ``steps_in_nll_sum``
    the teacher steps whose minibatch NLL the running sum holds, ``ensemble_count`` the samples in the
    ensemble's sums, per student slot ``adam_steps`` (Adam's update count, for its bias corrections) and
    ``steps_since_log`` (updates since the last log point), and ``snapshots_taken``. Plain ints: reading
    them never waits for a device."""

    t: int = 0
    steps_in_nll_sum: int = 0
    ensemble_count: int = 0
    adam_steps: list[int] = field(default_factory=list)
    steps_since_log: list[int] = field(default_factory=list)
    snapshots_taken: int = 0

    def copy(self) -> HostState:
        return dataclasses.replace(self, adam_steps=list(self.adam_steps), steps_since_log=list(self.steps_since_log))

    def minus(self, other: HostState) -> HostState:
        """What changed from ``other`` to this state, counter by counter (a period's advance)."""
        return HostState(self.t - other.t, self.steps_in_nll_sum - other.steps_in_nll_sum,
                         self.ensemble_count - other.ensemble_count,
                         [a - b for a, b in zip(self.adam_steps, other.adam_steps)],
                         [a - b for a, b in zip(self.steps_since_log, other.steps_since_log)],
                         self.snapshots_taken - other.snapshots_taken)

    def advanced(self, slots: Sequence[int], accumulate: bool, snapshot: int | None) -> HostState:
        """This state after one step, as a new value (the step replaces the engine's, so a value once
        read never changes): t and the steps in the NLL sum by one, the ensemble's count when the
        sample joined it, each updated student slot's counters in ``slots``, the snapshots taken."""
        adam, since = list(self.adam_steps), list(self.steps_since_log)
        for j in slots:
            adam[j] += 1
            since[j] += 1
        count = self.ensemble_count + (1 if accumulate else 0)
        return HostState(self.t + 1, self.steps_in_nll_sum + 1, count, adam, since,
                         self.snapshots_taken if snapshot is None else snapshot + 1)

    def plus(self, delta: HostState) -> HostState:
        """This state advanced by ``delta`` (:meth:`minus` of a captured period), as a new value."""
        return HostState(self.t + delta.t, self.steps_in_nll_sum + delta.steps_in_nll_sum,
                         self.ensemble_count + delta.ensemble_count,
                         [a + b for a, b in zip(self.adam_steps, delta.adam_steps)],
                         [a + b for a, b in zip(self.steps_since_log, delta.steps_since_log)],
                         self.snapshots_taken + delta.snapshots_taken)


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """Apply ``fn`` to the tensors of ``tree`` (and the matching leaves of ``rest``), keeping the
    structure of named tuples, tuples, lists and dicts."""
    if isinstance(tree, torch.Tensor):
        return fn(tree, *rest)
    if isinstance(tree, dict):
        return {k: tree_map(fn, v, *(r[k] for r in rest)) for k, v in tree.items()}
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(tree_map(fn, v, *(r[i] for r in rest)) for i, v in enumerate(tree)))
    if isinstance(tree, (tuple, list)):
        return type(tree)(tree_map(fn, v, *(r[i] for r in rest)) for i, v in enumerate(tree))
    raise TypeError(f"tree_map: unsupported node {type(tree).__name__}")


def tree_leaves(tree: Any) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    tree_map(out.append, tree)
    return out


def stack(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Stack per-chain tensors along a new leading axis, each chain's slice with the first tensor's
    exact strides (e.g. conv weights trained channels-last on the CPU: oneDNN picks its kernels by
    the strides, and a slice that is channels-last in another way can run half as fast)."""
    first = tensors[0]
    dense = first.is_contiguous() or (first.dim() == 4 and first.is_contiguous(memory_format=torch.channels_last))
    if first.dim() and first.numel() and dense:
        out = torch.empty_strided((len(tensors), *first.shape), (first.numel(), *first.stride()),
                                  dtype=first.dtype, device=first.device)
        for row, t in zip(out, tensors):
            row.copy_(t)
        return out
    return torch.stack(list(tensors))


def stack_trees(trees: Sequence[Any]) -> Any:
    """One tree whose tensors stack the matching tensors of ``trees`` (:func:`stack`)."""
    return tree_map(lambda *ts: stack(ts), trees[0], *trees[1:])


def chain_view(tree: Any, k: int) -> Any:
    """Chain ``k``'s slice of every tensor of a stacked tree (views: writes go to the stack)."""
    return tree_map(lambda t: t[k], tree)


def init_chain_state(params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor],
                     sampler_state: dict[str, torch.Tensor], num_coefficients: int) -> ChainState:
    """A chain's state from its initial values (copied), with ``num_coefficients`` zero sampler
    coefficients (filled per chain by the engine) and a zero NLL sum."""
    device = next(iter(params.values())).device
    return ChainState({k: v.clone() for k, v in params.items()}, {k: v.clone() for k, v in buffers.items()},
                      sampler_state, torch.zeros(num_coefficients, device=device), torch.zeros((), device=device))


def init_student_state(params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], lr: float,
                       store: EstimatorState) -> StudentState:
    """A student's state: copied initial values, zero Adam moments, learning rate ``lr``."""
    params = {k: v.clone() for k, v in params.items()}
    device = next(iter(params.values())).device
    return StudentState(params, {k: v.clone() for k, v in buffers.items()},
                        AdamState({k: torch.zeros_like(v) for k, v in params.items()},
                                  {k: torch.zeros_like(v) for k, v in params.items()}),
                        torch.tensor(float(lr), device=device), store, torch.zeros((), device=device))


def flat(params: dict[str, torch.Tensor], chain_axis: bool = True) -> torch.Tensor:
    """All parameters as one vector per chain, in ``named_parameters()`` order (the order of
    ``torch.nn.utils.vector_to_parameters``): ``(K, P)`` for stacked parameters."""
    if chain_axis:
        first = next(iter(params.values()))
        return torch.cat([p.reshape(first.shape[0], -1) for p in params.values()], dim=1)
    return torch.cat([p.reshape(-1) for p in params.values()])


# ---------------------------------------------------------------------- flat buffers for the updates
class TeacherBuffers(NamedTuple):
    """The teacher chains' flat ``(K, P)`` buffers (:mod:`gped_kit.core.flat`), in the parameters'
    layout: theta (whose views *are* the :class:`ChainState`'s parameters), the sampler's state
    for its update (momenta as one buffer under ``FLAT_MOMENTA`` and per parameter; other per-chain
    values, e.g. SGNHT's thermostat, as ``(K, 1)`` views), the gradient (scratch, written each
    step), the noise in the parameters' layout, and the coefficients as ``(C, K, 1)``."""

    params: FlatTensors
    sampler: dict[str, Any]
    grads: FlatTensors
    noise: FlatTensors
    coefficients: torch.Tensor


class StudentBuffers(NamedTuple):
    """One student slot's flat ``(R, P)`` buffers: phi and Adam's moments (whose views *are* the
    :class:`StudentState`'s), the gradient (scratch), and the learning rates as ``(R, 1)``."""

    params: FlatTensors
    adam: AdamState
    grads: FlatTensors
    lr: torch.Tensor


def flatten_chain_(chain: ChainState, noise: torch.Tensor) -> TeacherBuffers:
    """Move the stacked teacher state ``chain`` into flat buffers: its parameters and momenta become
    views of one buffer each (the dicts are updated in place, values unchanged). ``noise`` is the
    engine's ``(K, P)`` buffer of standard normal draws, in the parameters' logical order: the
    update reads it as it is when the layout is logical, otherwise a copy in the parameters' layout
    (:func:`noise_into_layout_`, each step)."""
    layout = FlatLayout.of(chain.params)
    params = layout.flatten(chain.params)
    chain.params.update(params)
    state: dict[str, Any] = {}
    keys = {momentum_key(n): n for n in layout.names}
    if all(k in chain.sampler for k in keys):
        momenta = layout.flatten({n: chain.sampler[k] for k, n in keys.items()})
        chain.sampler.update({k: momenta[n] for k, n in keys.items()})
        state[FLAT_MOMENTA] = momenta
    for key, value in chain.sampler.items():  # momenta per parameter; per-chain values as (K, 1)
        state[key] = value if key in keys else value.reshape(value.shape[0], -1)
    k, device = int(params.flat.shape[0]), params.flat.device
    drawn = FlatTensors(noise, layout) if layout.logical else layout.zeros(k, device)
    return TeacherBuffers(params, state, layout.zeros(k, device), drawn, chain.coefficients.T.unsqueeze(-1))


def noise_into_layout_(buffers: TeacherBuffers, noise: torch.Tensor) -> None:
    """Copy the draws ``noise`` (K, P, logical order) into ``buffers.noise`` when the parameters'
    layout is not logical (channels-last weights), pairing each draw with the parameter element it
    paired with tensor by tensor; nothing to do otherwise (the buffer is ``noise`` itself)."""
    layout = buffers.noise.layout
    if layout.logical:
        return
    for name, view in layout.contiguous().views(noise).items():
        buffers.noise[name].copy_(view)


class AdamGroup(NamedTuple):
    """The student slots of one distillation group (``slots``, in order), which take their Adam steps together
    (at the same t, with the same update count), as one buffer per part: ``params``, ``grads``, ``exp_avg``
    and ``exp_avg_sq``, each a :class:`~gped_kit.core.flat.FlatTensors` of one row (:func:`group_layout`)
    holding the slots' ``(R, P_j)`` buffers one after another (their :class:`StudentBuffers` are views of
    these). One Adam update of the group is one set of element-wise kernels over these buffers
    (:func:`~gped_kit.core.adam.adam_update_` with :class:`~gped_kit.core.adam.SegmentRates`)."""

    slots: tuple[int, ...]
    params: FlatTensors
    grads: FlatTensors
    exp_avg: FlatTensors
    exp_avg_sq: FlatTensors


def group_layout(size: int) -> FlatLayout:
    """The layout of a distillation group's buffers: one row of ``size`` elements, one segment ``"*"`` (the
    slots' own layouts are their :class:`StudentBuffers`')."""
    return FlatLayout(("*",), ((size,),), ((1,),), (0,), size)


def flatten_students_(states: Sequence[StudentState], slots: Sequence[int]) -> tuple[list[StudentBuffers], AdamGroup]:
    """Move the stacked states of the student slots ``slots`` (one distillation group; ``states`` in that
    order, each with the same run axis R) into one buffer per part (:class:`AdamGroup`): slot j's parameters
    and Adam moments become views of its ``(R, P_j)`` segment (the dicts are updated in place, values
    unchanged), its gradient a zero segment of the group's scratch buffer. Returns each slot's
    :class:`StudentBuffers` and the group."""
    if len(states) != len(slots) or not states:
        raise ValueError(f"flatten_students_: {len(states)} student states for slots {list(slots)}")
    first = next(iter(states[0].params.values()))
    runs = int(first.shape[0])
    layouts = [FlatLayout.of(s.params) for s in states]
    for j, state in zip(slots, states):
        p = next(iter(state.params.values()))
        if p.shape[0] != runs or p.dtype != first.dtype or p.device != first.device:
            raise ValueError(f"flatten_students_: slot {j}'s parameters ({int(p.shape[0])} runs, {p.dtype}, "
                             f"{p.device}) differ from slot {slots[0]}'s ({runs}, {first.dtype}, {first.device})")
    whole = group_layout(sum(runs * layout.size for layout in layouts))
    params, grads, exp_avg, exp_avg_sq = (whole.zeros(1, first.device, first.dtype) for _ in range(4))
    out, offset = [], 0
    for state, layout in zip(states, layouts):
        views = [_segment(b.flat, offset, runs, layout) for b in (params, exp_avg, exp_avg_sq)]
        for view, values in zip(views, (state.params, state.adam.exp_avg, state.adam.exp_avg_sq)):
            for name, part in view.items():
                part.copy_(values[name])
            values.update(view)
        out.append(StudentBuffers(views[0], AdamState(views[1], views[2]), _segment(grads.flat, offset, runs, layout),
                                  state.lr.reshape(runs, 1)))
        offset += runs * layout.size
    return out, AdamGroup(tuple(slots), params, grads, exp_avg, exp_avg_sq)


def _segment(buffer: torch.Tensor, offset: int, runs: int, layout: FlatLayout) -> FlatTensors:
    """The ``(runs, layout.size)`` buffer laid out by ``layout`` at ``offset`` of the one-row ``buffer`` (a view)."""
    return FlatTensors(buffer[0, offset:offset + runs * layout.size].view(runs, layout.size), layout)


class StepBuffers(NamedTuple):
    """What a step writes besides the state: the flat views of the state for the updates
    (:class:`TeacherBuffers`, one :class:`StudentBuffers` per slot, and each slot's :class:`AdamGroup` in
    ``adam_groups``, slot -> its distillation group's), the draws' buffers (each chain's minibatch indices
    ``idx`` (K, M), its noise ``noise`` (K, P), each group's indices into D' (R, M')), and chain 0's views of
    the teacher and ensemble (``teacher_views``) and of the students (``student_views``) when the step
    functions run on one chain rather than under vmap (else None)."""

    teacher: TeacherBuffers
    students: list[StudentBuffers]
    adam_groups: dict[int, AdamGroup]
    idx: torch.Tensor
    noise: torch.Tensor
    group_idx: dict[Any, torch.Tensor]
    teacher_views: tuple[ChainState, EnsembleState] | None
    student_views: list[StudentState] | None


@dataclass
class EngineState:
    """Everything an engine's steps advance, for a batch of K teacher chains and R runs: the
    teacher chains' state (``chain``), each student slot's (``students``, run axis first), the
    ensemble's sums, the snapshots (K, S, P), the host-side counters (``host``, replaced by each
    step), the random generators (``streams``), each slot's current learning rates per run
    (``lr_values``, host floats), the recent window of the ensemble, each run's history rows, the
    elapsed seconds, the step a resume started from (``resumed_from``), the dropout stream's saved
    state (``dropout_rng``) and the step's buffers (:class:`StepBuffers`). One run's part of it is a
    :class:`RunState` (:func:`gped_kit.engine.resume.run_state`)."""

    chain: ChainState
    students: list[StudentState]
    ensemble: EnsembleState
    snapshots: torch.Tensor
    host: HostState
    streams: ChainStreams
    lr_values: list[list[float]]
    recent: RecentWindow
    history: list[list[dict]]
    buffers: StepBuffers
    dropout_rng: dict[str, torch.Tensor]
    elapsed: float = 0.0
    resumed_from: int | None = None


# ---------------------------------------------------------------------- one run's state, for checkpoints
Tensors = dict[str, torch.Tensor]


@dataclass(frozen=True)
class TeacherRunState:
    """A run's teacher: its chain's parameters theta_t, buffers and sampler state (for a pooled
    teacher all K chains', chain axis first), the running sum of minibatch NLLs since the last log
    point (per chain) and the number of steps in that sum (the same for every chain)."""

    params: Tensors
    buffers: Tensors
    sampler: Tensors
    train_nll_sum: torch.Tensor
    steps_in_nll_sum: int

    def to_dict(self) -> dict[str, Any]:
        return {"params": self.params, "buffers": self.buffers, "sampler": self.sampler,
                "train_nll_sum": self.train_nll_sum, "steps_in_nll_sum": self.steps_in_nll_sum}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TeacherRunState:
        return cls(params=dict(d["params"]), buffers=dict(d["buffers"]), sampler=dict(d["sampler"]),
                   train_nll_sum=d["train_nll_sum"], steps_in_nll_sum=int(d["steps_in_nll_sum"]))


@dataclass(frozen=True)
class StudentRunState:
    """One student of a run: its parameters phi and buffers, Adam's moments, its current learning
    rate (a host float: the value the halving schedule last set), its U_o store (running sums and
    visit counts per input of D'; empty for U_s), its running loss sum since the last log point, and
    its slot's counters: the updates in that loss sum and Adam's step count (the same for every run
    of a batch)."""

    params: Tensors
    buffers: Tensors
    exp_avg: Tensors
    exp_avg_sq: Tensors
    lr: float
    store_sums: torch.Tensor
    store_counts: torch.Tensor
    loss_sum: torch.Tensor
    steps_since_log: int
    adam_steps: int

    def to_dict(self) -> dict[str, Any]:
        return {"params": self.params, "buffers": self.buffers, "exp_avg": self.exp_avg,
                "exp_avg_sq": self.exp_avg_sq, "lr": self.lr, "store_sums": self.store_sums,
                "store_counts": self.store_counts, "loss_sum": self.loss_sum,
                "steps_since_log": self.steps_since_log, "adam_steps": self.adam_steps}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StudentRunState:
        return cls(params=dict(d["params"]), buffers=dict(d["buffers"]), exp_avg=dict(d["exp_avg"]),
                   exp_avg_sq=dict(d["exp_avg_sq"]), lr=float(d["lr"]), store_sums=d["store_sums"],
                   store_counts=d["store_counts"], loss_sum=d["loss_sum"],
                   steps_since_log=int(d["steps_since_log"]), adam_steps=int(d["adam_steps"]))


@dataclass(frozen=True)
class EnsembleRunState:
    """A run's teacher ensemble: the running sums of every tracked target on the evaluation inputs
    (per chain for a pooled teacher), the number of kept samples per chain, and the recent window's
    saved sums (:meth:`~gped_kit.engine.window.RecentWindow.state_dict`, in the window's own layout)."""

    sums: Tensors
    count: int
    recent: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"sums": self.sums, "count": self.count, "recent": self.recent}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EnsembleRunState:
        return cls(sums=dict(d["sums"]), count=int(d["count"]), recent=dict(d["recent"]))


@dataclass(frozen=True)
class RunState:
    """Everything run r of an engine needs to continue exactly where it stopped (see the module
    docstring): made by :func:`gped_kit.engine.resume.run_state`, applied by
    :func:`~gped_kit.engine.resume.load_run_states`; continuing from it gives
    the same numbers as never having stopped, bit for bit.

    ``t`` is the next step to run and ``elapsed`` the seconds spent so far; ``history`` the run's
    history rows; ``teacher``, ``students`` (one per student slot, in order) and ``ensemble`` the
    parts above; ``generators`` the random generators' states as uint8 tensors: for one chain
    ``{"data", "noise", "groups": {group name: state}}`` (its minibatches of D, its noise, its
    distillation groups), for a pooled teacher ``{"chains": [each chain's {"data", "noise"}], "groups":
    {...}}`` (:class:`~gped_kit.engine.streams.ChainStreams`); ``dropout_rng`` the global random
    state that draws dropout masks (``{"cpu"[, "cuda"]}``); ``snapshots`` the kept teacher samples
    (S rows of P values; K x S for a pooled teacher, chain axis first), of which the first
    ``snapshots_taken`` are filled.

    Frozen, and holding only tensors and plain data: :meth:`to_dict` is a checkpoint's layout
    (format 2 of :mod:`gped_kit.engine.checkpoint`, readable with ``torch.load(weights_only=True)``)
    and :meth:`from_dict` reads it back, so older checkpoints of that format load unchanged. The
    tensors are the state's own copies; applying a state copies them into the engine again.
    """

    t: int
    elapsed: float
    history: list[dict[str, Any]]
    teacher: TeacherRunState
    students: tuple[StudentRunState, ...]
    ensemble: EnsembleRunState
    generators: dict[str, Any]
    dropout_rng: Tensors
    snapshots: torch.Tensor
    snapshots_taken: int

    @property
    def pooled(self) -> bool:
        """Whether a pooled teacher's run made this state (its generators hold every chain's)."""
        return "chains" in self.generators

    def to_dict(self) -> dict[str, Any]:
        """The state as nested dicts and lists of tensors and plain data (the teacher's part under
        ``"chain"``), in the order a checkpoint stores them."""
        return {"t": self.t, "elapsed": self.elapsed, "history": self.history, "chain": self.teacher.to_dict(),
                "students": [s.to_dict() for s in self.students], "ensemble": self.ensemble.to_dict(),
                "generators": self.generators, "dropout_rng": self.dropout_rng, "snapshots": self.snapshots,
                "snapshots_taken": self.snapshots_taken}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunState:
        """The state :meth:`to_dict` gave (entries it does not know, e.g. a checkpoint's format and
        fingerprint, are ignored); ``KeyError`` names a missing entry."""
        return cls(t=int(d["t"]), elapsed=float(d["elapsed"]), history=list(d["history"]),
                   teacher=TeacherRunState.from_dict(d["chain"]),
                   students=tuple(StudentRunState.from_dict(s) for s in d["students"]),
                   ensemble=EnsembleRunState.from_dict(d["ensemble"]), generators=dict(d["generators"]),
                   dropout_rng=dict(d["dropout_rng"]), snapshots=d["snapshots"],
                   snapshots_taken=int(d["snapshots_taken"]))
