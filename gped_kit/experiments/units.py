"""The paper's work in units that finish: chains, or batches of chains of one model, each sized from measured
rates to finish within a wall-time budget, run one after another in the order of what they settle.

A **work unit** (:class:`WorkUnit`) is what one :func:`~gped_kit.experiments.chains.run_chains` call computes
as one batch: one chain, or K chains of one model and structure (the same T, students and sampler; they may
differ in data, seed and step size). :func:`paper_units` lists the paper profile's units from the notebooks'
own task builders (the registry, :mod:`~gped_kit.experiments.registry`), so their store keys are the
notebooks', in the order of what they settle (:data:`SETTLES`):

1. Table 1's chains, seed 0 (notebook 01: FCNN, CNN-MNIST);
2. Table 1's seeds 1 and 2 (notebook 01 with ``table1_seeds=(0, 1, 2)``: the chains a notebook 01 run with
   ``seed=1`` or ``seed=2`` computes, under the same keys);
3. the U_s - U_o ablation at the paper's length (notebook 01's FCNN chain of seed 0 feeding U_s and U_o students
   whose rate is held constant or annealed, :func:`~gped_kit.experiments.experiment1.ablation_for`);
4. Experiment 2's MNIST grid (notebook 02; its cells N = 60,000, m = 0 are Table 1's chains, run once);
5. Experiment 4 (notebook 06), 6. the Hydra comparison (notebook 07), 7. the samplers (notebook 10);
8. the CIFAR-10 chains of notebooks 01 and 06, when CIFAR-10 is under the data root (else they are skipped,
   and the list says so).

A chain already complete in the store is *done* (:func:`mark_done`, by the summary columns that tell chains
apart, as ``python -m gped_kit.cli.store missing`` does) and is not planned again.

**The plan** (:func:`plan_units`) sizes each unit's pending chains from the rates
(:class:`~gped_kit.experiments.rates.RateTable`): as many chains as fit the time left in the job
(``budget_s``), at most ``max_chains``; a job whose time is used up continues in the next job (the next run of
the command). A chain that alone takes longer than a whole job is reported with its predicted time and left
out, unless ``slices`` asks for it to run as resumable slices (stopped at a checkpoint when the job's time is
up, resumed by the next run from the store's checkpoint). :func:`run_units` runs the units one after another
in this one process, each through ``run_chains`` into the store, planning again after each unit (with its
measured rate added), and stops before the first unit that would not finish in the time left.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import tempfile
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from filelock import FileLock, Timeout

from ..core.status import FINISHED, Status
from ..data.container import GPEDData
from ..engine import resolve_device
from . import registry
from .batching import MAX_CHAINS
from .budget import Budget
from .chains import ChainTask, run_chains, skill_not_stored
from .experiment1 import ablation_for
from .frame import absent_datasets, chain_summaries, dataset_of, task_chains
from .rates import Rate, RateRecorder, RateTable, Workload, device_kind, slug
from .store import ResultsStore

#: What the units settle, in the order they run (:func:`paper_units`).
SETTLES = ("Table 1, seed 0", "Table 1, seeds 1 and 2", "the U_s - U_o gap at the paper's length (notebook 01)",
           "Experiment 2's MNIST grid (Tables 5, 6)",
           "Experiment 4 (notebook 06)", "the Hydra comparison (notebook 07)", "the samplers (notebook 10)",
           "CIFAR-10 cells (Table 1, Experiment 4)")
#: The priority of notebook 01's U_s - U_o ablation (its index in :data:`SETTLES`).
ABLATION = 2
#: The notebooks of the paper profile's units, in order, with their settings' overrides.
PAPER_NOTEBOOKS = ("01_experiment1", "02_experiment2_mnist", "06_experiment4_uncertainty", "07_hydra_comparison",
                   "10_samplers")
#: Table 1's seeds (notebook 01's paper profile runs one; the units run three).
TABLE1_SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class WorkUnit:
    """Chains one ``run_chains`` call computes as one batch (see the module docstring): ``name``, the
    ``notebook`` and ``profile`` whose tasks they are, the ``tasks``, what they ``settle`` (one of
    :data:`SETTLES`, or your own words), ``order`` (what it settles first, then its position) and per task
    whether it is ``done`` (complete in the store). ``needs_state``: the notebook derives its results from the
    chains' full state, so their final checkpoints must stay in the store until it has run."""

    name: str
    notebook: str
    profile: str
    tasks: tuple[ChainTask, ...]
    settles: str
    order: tuple[int, int] = (0, 0)
    done: tuple[bool, ...] = ()
    needs_state: bool = False

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ValueError(f"WorkUnit {self.name!r}: no tasks")
        if not self.done:
            object.__setattr__(self, "done", (False,) * len(self.tasks))
        if len(self.done) != len(self.tasks):
            raise ValueError(f"WorkUnit {self.name!r}: {len(self.done)} done marks for {len(self.tasks)} tasks")

    @property
    def chains(self) -> int:
        return len(self.tasks)

    @property
    def model(self) -> str:
        return self.tasks[0].config.model_name

    @property
    def dataset(self) -> str:
        return dataset_of(self.tasks[0])

    @property
    def steps(self) -> int:
        """T of each chain."""
        return self.tasks[0].config.num_iterations

    @property
    def pending(self) -> tuple[ChainTask, ...]:
        return tuple(t for t, d in zip(self.tasks, self.done) if not d)

    @property
    def complete(self) -> bool:
        return all(self.done)

    def workload(self, chains: int | None = None) -> Workload:
        return Workload(self.dataset, self.model, len(self.tasks[0].students), chains or self.chains)

    def part(self, tasks: Sequence[ChainTask], name: str) -> WorkUnit:
        """A unit of some of this unit's tasks (a sized part), none of them done."""
        return dataclasses.replace(self, name=name, tasks=tuple(tasks), done=())


def batch_signature(task: ChainTask) -> tuple:
    """What chains must share to run as one batch, read from their configurations (the engine checks the
    rest, :func:`~gped_kit.engine.check_batchable`); a pooled teacher is a batch of its own."""
    c = task.config
    students = tuple((s.label, s.thinning, s.batch_size, str(s.input_generator), repr(s.arch)) for s in task.students)
    own = id(task) if c.num_chains > 1 else None
    return (dataset_of(task), c.model_name, repr(c.model), repr(c.likelihood), c.num_iterations, c.burn_in,
            c.eval_thinning, c.log_every, c.num_snapshots, repr(c.sampler.shared_fields()), str(c.device),
            getattr(task.data, "test_size", None), students, own)


def _identity(task: ChainTask) -> tuple:
    """What makes two tasks the same chain (the data configuration, or tensors by identity)."""
    data = id(task.data) if isinstance(task.data, GPEDData) else task.data
    return data, task.config, task.students


def units_of(tasks: Sequence[ChainTask], notebook: str, profile: str, settles: str, priority: int,
             needs_state: bool = False, start: int = 0) -> list[WorkUnit]:
    """``tasks`` grouped into units of chains that can share a batch (:func:`batch_signature`), in the order
    their first task comes; each named by the notebook's number and its first task (``02 fcnn N=10000 m=0 seed=0
    + 22 more``)."""
    groups: dict[tuple, list[ChainTask]] = {}
    for task in tasks:
        groups.setdefault(batch_signature(task), []).append(task)
    out = []
    for i, same in enumerate(groups.values()):
        first = same[0].label
        name = f"{notebook.split('_', 1)[0]} {first}" + (f" + {len(same) - 1} more" if len(same) > 1 else "")
        out.append(WorkUnit(name, notebook, profile, tuple(same), settles, (priority, start + i),
                            needs_state=needs_state))
    return out


@dataclass
class UnitList:
    """The ordered units and the lines that say what was left out and why."""

    units: list[WorkUnit]
    notes: list[str] = field(default_factory=list)


def check_overrides(overrides: Mapping[str, Any], notebooks: Sequence[str] = PAPER_NOTEBOOKS,
                    profile: str = "paper") -> None:
    """``ValueError`` naming an override that no notebook's settings have (with the allowed names), or a
    profile a notebook lacks, before any work."""
    allowed: set[str] = set()
    for name in notebooks:
        entry = registry.notebook(name)
        if profile not in entry.profiles:
            raise ValueError(f"profile={profile!r} is not a profile of {entry.name}; allowed: {sorted(entry.profiles)}")
        allowed |= {f.name for f in dataclasses.fields(entry.profiles[profile])}
    unknown = sorted(k for k in overrides if k.split(".", 1)[0] not in allowed)
    if unknown:
        raise ValueError(f"override {unknown[0]!r} is not a setting of the notebooks' profile {profile!r}; allowed: "
                         f"{sorted(allowed)}")
    for name in notebooks:  # the settings classes check the values
        registry.notebook(name).settings(profile, overrides)


def paper_units(profile: str = "paper", overrides: Mapping[str, Any] | None = None, *,
                store: ResultsStore | None = None, device: str = "auto", data_root: str | None = None,
                absent: Collection[str] | None = None, seeds: Sequence[int] = TABLE1_SEEDS,
                notebooks: Sequence[str] = PAPER_NOTEBOOKS) -> UnitList:
    """The paper profile's units (see the module docstring), built by the notebooks' own task builders for
    ``profile`` with the settings ``overrides`` (e.g. ``num_iterations`` for a rehearsal), ``device`` and
    ``data_root``; Table 1 over ``seeds`` (the first is "seed 0"). Chains of data sets in ``absent`` (None:
    those not under the data root, :func:`~gped_kit.experiments.frame.absent_datasets`) are left out with a
    note; a chain two notebooks share is one unit's (the first's). With ``store``, chains complete there are
    marked done (:func:`mark_done`)."""
    overrides = dict(overrides or {})
    check_overrides(overrides, notebooks, profile)
    absent = absent_datasets(data_root) if absent is None else frozenset(absent)
    units: list[WorkUnit] = []
    notes: list[str] = []
    seen: list[tuple] = []
    cifar = SETTLES.index("CIFAR-10 cells (Table 1, Experiment 4)")
    for name in notebooks:
        entry = registry.notebook(name)
        changes = {**overrides, **({"table1_seeds": tuple(seeds)} if name == "01_experiment1" else {})}
        settings = entry.settings(profile, changes)
        tasks = entry.chain_tasks(settings, device=device, data_root=data_root)
        ablation = ({_identity(t) for t in ablation_for(settings).tasks(0, device, data_root)}
                    if name == "01_experiment1" else set())
        by_priority: dict[int, list[ChainTask]] = {}
        shared = 0
        for task in tasks:
            if _identity(task) in seen:
                shared += 1
                continue
            seen.append(_identity(task))
            priority = ABLATION if _identity(task) in ablation else _priority(name, task, seeds, cifar)
            by_priority.setdefault(priority, []).append(task)
        if shared:
            notes.append(f"{name}: {shared} chain(s) are an earlier notebook's (the same store entry), run once there")
        for priority, group in sorted(by_priority.items()):
            dropped = [t for t in group if dataset_of(t) in absent]
            if dropped:
                datasets = sorted({dataset_of(t) for t in dropped})
                notes.append(f"{name}: {len(dropped)} chain(s) skipped: data set(s) {', '.join(datasets)} not under "
                             f"the data root ({', '.join(t.label for t in dropped)})")
            kept = [t for t in group if dataset_of(t) not in absent]
            if kept:
                units += units_of(kept, entry.name, profile, SETTLES[priority], priority, entry.needs_chain_state,
                                  start=len(units))
    units.sort(key=lambda u: u.order)
    if store is not None:
        units = mark_done(units, store)
    return UnitList(units, notes)


def _priority(notebook: str, task: ChainTask, seeds: Sequence[int], cifar: int) -> int:
    if dataset_of(task) == "cifar10":
        return cifar
    if notebook == "01_experiment1":
        return 0 if task.config.seed == seeds[0] else 1
    return {"02_experiment2_mnist": 3, "06_experiment4_uncertainty": 4, "07_hydra_comparison": 5,
            "10_samplers": 6}.get(notebook, 6)


def mark_done(units: Sequence[WorkUnit], store: ResultsStore) -> list[WorkUnit]:
    """``units`` with every chain complete in ``store`` under this checkout's numerics marked done, read from
    the stored summaries (:func:`~gped_kit.experiments.frame.task_chains`: the columns that tell chains apart;
    tasks alike in all of them take one stored chain each, in order). A chain stored before its students
    reported skill (:func:`~gped_kit.experiments.chains.skill_not_stored`) is not done: running its unit
    computes it again."""
    summaries = chain_summaries(store)
    used: set[str] = set()
    out = []
    for unit in units:
        done = []
        for task, was in zip(unit.tasks, unit.done):
            found = sorted(task_chains(summaries, [task]) - used) if len(summaries) else []
            if found:
                used.add(found[0])
            current = bool(found) and not skill_not_stored(task, store.by_key("chain", found[0]))
            done.append(was or current)
        out.append(dataclasses.replace(unit, done=tuple(done)))
    return out


def shard(units: Sequence[WorkUnit], index: int, count: int) -> list[WorkUnit]:
    """The units of shard ``index`` of ``count`` (0-based): every ``count``-th unit from ``index``, by the units'
    order, so that the tasks of a job array each take their own (the split does not depend on the store)."""
    if not (isinstance(count, int) and count >= 1 and isinstance(index, int) and 0 <= index < count):
        raise ValueError(f"shard {index}/{count}: give INDEX/COUNT with 0 <= INDEX < COUNT (e.g. 0/4)")
    return [u for i, u in enumerate(units) if i % count == index]


# ------------------------------------------------------------------------------ the plan
#: Statuses of a planned unit.
PLANNED, DONE, TOO_LONG, SLICE, NO_RATE = "planned", "done", "too long", "slice", "no rate"


@dataclass(frozen=True)
class PlannedUnit:
    """A unit in a plan: the (sized) unit, its status (planned, done, too long, slice, no rate), its rate, its
    predicted seconds, the job that runs it (1: the next run) and a note."""

    unit: WorkUnit
    status: str
    rate: Rate | None = None
    seconds: float | None = None
    job: int | None = None
    note: str = ""


@dataclass
class Plan:
    """The units in order with their predicted times (:func:`plan_units`)."""

    units: list[PlannedUnit]
    device: str
    budget_s: float | None
    notes: list[str] = field(default_factory=list)

    @property
    def runnable(self) -> list[PlannedUnit]:
        return [p for p in self.units if p.status in (PLANNED, SLICE)]

    @property
    def total_s(self) -> float:
        """Predicted wall time of every unit that runs (planned and sliced)."""
        return sum(p.seconds or 0.0 for p in self.runnable)

    @property
    def jobs(self) -> int:
        return max((p.job or 0 for p in self.runnable), default=0)

    def table(self) -> pd.DataFrame:
        rows, cumulative = [], 0.0
        for i, p in enumerate(self.units, start=1):
            if p.status in (PLANNED, SLICE):
                cumulative += p.seconds or 0.0
            rows.append({"order": i, "unit": p.unit.name, "chains": p.unit.chains, "model": p.unit.model,
                         "steps": p.unit.steps, "status": p.status,
                         "predicted_s": None if p.seconds is None else round(p.seconds),
                         "cumulative_s": round(cumulative) if p.status in (PLANNED, SLICE) else None,
                         "job": p.job, "settles": p.unit.settles, "rate": "" if p.rate is None else p.rate.label,
                         "note": p.note})
        return pd.DataFrame(rows)


def _seconds(rates: RateTable, device: str, unit: WorkUnit, chains: int) -> tuple[Rate | None, float]:
    rate = rates.rate(device, unit.workload(chains))
    return rate, (math.inf if rate is None else rate.seconds(chains, unit.steps))


def plan_units(units: Sequence[WorkUnit], rates: RateTable, device: str, budget_s: float | None = None,
               max_chains: int | None = None, slices: bool = False, left_s: float | None = None) -> Plan:
    """The plan of ``units`` on ``device`` (a kind; see the module docstring): per unit its done chains as one
    row, then its pending chains in parts of as many chains as fit the time left in the job (``left_s``, default
    the whole ``budget_s``), at most ``max_chains`` (default: the device's batch cap,
    :data:`~gped_kit.experiments.batching.MAX_CHAINS`). Without ``budget_s`` every unit is one job's, in parts
    of at most ``max_chains``."""
    if budget_s is not None and not (math.isfinite(budget_s) and budget_s > 0):
        raise ValueError(f"budget_s={budget_s!r}: must be a finite number of seconds > 0")
    cap = max_chains if max_chains is not None else MAX_CHAINS["cpu" if device == "cpu" else "cuda"]
    if not (isinstance(cap, int) and cap >= 1):
        raise ValueError(f"max_chains={max_chains!r}: must be an integer >= 1")
    left = budget_s if left_s is None else min(left_s, budget_s if budget_s is not None else left_s)
    job, out = 1, []
    for unit in units:
        if any(unit.done):
            done = [t for t, d in zip(unit.tasks, unit.done) if d]
            out.append(PlannedUnit(unit.part(done, f"{unit.name}: {len(done)} done"), DONE, note="in the store"))
        pending = list(unit.pending)
        part = 0
        while pending:
            k = min(len(pending), cap)
            rate, seconds = _seconds(rates, device, unit, k)
            if rate is None:
                out.append(PlannedUnit(unit.part(pending, unit.name), NO_RATE,
                                       note=f"nothing measured on any device: run one unit to measure {device}"))
                break
            if budget_s is not None:  # the most chains that fit the time left (a batch may be faster than fewer)
                sized = [(n, *_seconds(rates, device, unit, n)) for n in range(k, 0, -1)]
                k, rate, seconds = next(((n, r, t) for n, r, t in sized if t <= left), sized[-1])
                if seconds > left and left < budget_s and any(t <= budget_s for _, _, t in sized):
                    job, left = job + 1, budget_s  # this job's time is used: the next job
                    continue
                if seconds > budget_s:  # no part fits a whole job, one chain alone takes longer
                    if not slices:
                        out.append(PlannedUnit(unit.part(pending, unit.name), TOO_LONG, rate, seconds,
                                               note=f"one chain takes {seconds:,.0f} s, more than a job of "
                                                    f"{budget_s:,.0f} s: give a larger budget, or --slices"))
                        break
                    if left < budget_s:  # slices take whole jobs, from the start of one
                        job += 1
                    jobs = math.ceil(seconds / budget_s)
                    out.append(PlannedUnit(unit.part(pending[:1], _part_name(unit, part, 1, pending)), SLICE, rate,
                                           seconds, job, note=f"resumable slices over {jobs} jobs; the store's "
                                                              "checkpoint carries it from one job to the next"))
                    job, left = job + jobs - 1, jobs * budget_s - seconds
                    pending, part = pending[1:], part + 1
                    continue
                left -= seconds
            out.append(PlannedUnit(unit.part(pending[:k], _part_name(unit, part, k, pending)), PLANNED, rate,
                                   seconds, job, note="chains' final checkpoints needed by the notebook"
                                   if unit.needs_state else ""))
            pending, part = pending[k:], part + 1
    return Plan(out, device, budget_s)


def _part_name(unit: WorkUnit, part: int, k: int, pending: Sequence[ChainTask]) -> str:
    if part == 0 and k == len(pending) == unit.chains:
        return unit.name
    first = pending[0].label
    return f"{unit.name.split(' ', 1)[0]} {first}" + (f" + {k - 1} more" if k > 1 else "")


# ------------------------------------------------------------------------------ running units
@dataclass(frozen=True)
class UnitOutcome:
    """What became of a unit run: its planned row, every chain's status, the seconds it took, the rate row
    recorded (None: none) and the store entries it wrote."""

    planned: PlannedUnit
    statuses: tuple[str, ...]
    seconds: float
    recorded: bool
    entries: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        return all(s in FINISHED for s in self.statuses)


@dataclass
class RunReport:
    """A run's units (:func:`run_units`), the first unit that did not fit the time left (None: all done), and the
    rate file written."""

    outcomes: list[UnitOutcome]
    stopped_before: PlannedUnit | None
    left_s: float
    rates_file: Path | None
    remaining: Plan | None = None


@contextlib.contextmanager
def device_lock(device: str, folder: str | Path | None = None) -> Iterator[Path]:
    """Hold the lock that keeps a second ``units run`` off ``device`` (a torch device; a GPU by its UUID, so
    jobs sharing a node do not block each other); ``RuntimeError`` naming the lock file when another holds it."""
    resolved = resolve_device(device)
    name = "cpu"
    if resolved.type == "cuda":
        props = torch.cuda.get_device_properties(resolved)
        name = f"cuda-{getattr(props, 'uuid', resolved.index or 0)}"
    path = Path(folder or tempfile.gettempdir()) / f"gped-kit-units-{slug(name)}.lock"
    lock = FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise RuntimeError(f"another `units run` holds {resolved} (lock file {path}): one process on a device at a "
                           "time; wait for it, or give this run another device") from None
    try:
        yield path
    finally:
        lock.release()


def _chain_steps(unit: WorkUnit, statuses: Sequence[str], batched: Sequence[bool], budget: Budget) -> int | None:
    """The steps per chain this unit computed, where they are known: T when every chain ran from its first
    step; the guard budget's iterations when the chains were one batch (or one chain) that resumed or stopped
    alike; else None (no rate is recorded)."""
    if all(s == Status.RAN for s in statuses):
        return unit.steps
    one_batch = unit.chains == 1 or all(batched)
    resumable = (Status.RESUMED, Status.STOPPED)
    if one_batch and len(set(statuses)) == 1 and statuses[0] in resumable and budget.steps_done > 0:
        return budget.steps_done
    return None


def run_units(units: Sequence[WorkUnit], store: ResultsStore, rates: RateTable, budget_s: float, *,
              device: str = "auto", max_chains: int | None = None, slices: bool = False,
              recorder: RateRecorder | None = None, progress: bool = True,
              clock: Callable[[], float] = time.monotonic, prepare: Callable[[ChainTask], ChainTask] | None = None,
              say: Callable[[str], None] = print) -> RunReport:
    """Run ``units`` one after another in this process within ``budget_s`` seconds (see the module docstring):
    plan, run the first unit of the plan's first job through ``run_chains`` (its chains as one batch, a guard
    :class:`~gped_kit.experiments.budget.Budget` of the time left), record its rate, plan again; stop before a
    unit predicted to take longer than the time left. ``prepare`` changes a task before it runs (e.g. graph
    mode; nothing of its key)."""
    kind, name = device_kind(device)
    recorder = recorder or RateRecorder(store.root, kind)
    started = clock()
    units = list(units)
    outcomes: list[UnitOutcome] = []
    while True:
        left = budget_s - (clock() - started)
        plan = plan_units(units, rates, kind, budget_s, max_chains, slices,
                          left_s=max(left, 0.0) if outcomes else None)
        first = next((p for p in plan.units if p.status in (PLANNED, SLICE)), None)
        if first is None or first.job != 1:
            return RunReport(outcomes, first, left, recorder.path if recorder.rows else None, plan)
        unit = first.unit
        say(f"unit {unit.name} ({unit.chains} chain(s) of {unit.model}, T = {unit.steps:,}; settles "
            f"{unit.settles}): predicted {first.seconds:,.0f} s, {left:,.0f} s left")
        guard = Budget(seconds=max(left, 0.0), clock=clock)
        began = clock()
        grid = run_chains([prepare(t) if prepare else t for t in unit.tasks], store, chains_per_batch=unit.chains,
                          progress=progress, budget=guard)
        seconds = clock() - began
        statuses = tuple(grid.cells["status"])
        steps = _chain_steps(unit, statuses, tuple(grid.cells["batched"]), guard)
        recorded = None
        if steps and seconds > 0:
            status = "finished" if all(s in FINISHED for s in statuses) else "stopped"
            recorded = recorder.add(kind, name, unit.notebook, unit.name, unit.workload(), steps, seconds, status)
            rates = rates.with_measurement(recorded)
        entries = tuple(str(o.entry.path) for o in grid.outcomes if o.entry is not None and o.status in FINISHED)
        errors = tuple(f"{o.task.label}: {o.error}" for o in grid.outcomes if o.error)
        outcomes.append(UnitOutcome(first, statuses, seconds, recorded is not None, entries, errors))
        say(f"  {', '.join(sorted(set(statuses)))} in {seconds:,.1f} s"
            + (f"; {recorded.chain_steps_per_s:,.1f} chain-steps/s recorded" if recorded else "; no rate recorded"))
        units = _after(units, unit, statuses)


def _after(units: list[WorkUnit], ran: WorkUnit, statuses: Sequence[str]) -> list[WorkUnit]:
    """``units`` with the chains of ``ran`` marked done when they finished, and left out of this run when they
    failed, had no data or stopped (the next run takes them up again)."""
    settled = {id(t) for t, s in zip(ran.tasks, statuses) if s != Status.NOT_STARTED}
    out = []
    for unit in units:
        keep = [(t, d or id(t) in settled) for t, d in zip(unit.tasks, unit.done)]
        out.append(dataclasses.replace(unit, done=tuple(d for _, d in keep)))
    return out


__all__ = ["SETTLES", "PAPER_NOTEBOOKS", "TABLE1_SEEDS", "WorkUnit", "UnitList", "PlannedUnit", "Plan",
           "UnitOutcome", "RunReport", "batch_signature", "units_of", "paper_units", "mark_done", "shard",
           "check_overrides", "plan_units", "run_units", "device_lock", "PLANNED", "DONE", "TOO_LONG", "SLICE",
           "NO_RATE"]
