"""Chains of Algorithm 1 through the results store: run, resume or reuse, one by one or batched.

A :class:`ChainTask` names one chain (its data, :class:`~gped_kit.engine.GPEDConfig` and
students). :func:`run_chains` gives each task its store entry (kind ``"chain"``, keyed by the
chain's record -- data identity with checksums, configuration, students -- and the chain's
numerics version, :mod:`~gped_kit.experiments.numerics`) and then, per task:

* **reused**: the entry is complete: its compact tables (``summary``, ``history``) and kept
  outputs are read back, nothing is computed. A task that needs the run's full state
  (``requires_state``: networks, U_o stores, every output, snapshots) reuses it only from the
  entry's checkpoint, and recomputes when there is none (e.g. in a fresh clone, where
  checkpoints are not committed). An entry stored before its students reported their skill over the best
  constant prediction (:func:`skill_not_stored`) is computed again, the stored one set aside, so that its
  students can count as evidence; ``executor="stored"`` still reads it as it is;
* **resumed** / **ran**: computed, continuing from the entry's checkpoint if an interrupted run
  left one, with up to ``chains_per_batch`` compatible tasks as one batched computation
  (:class:`~gped_kit.engine.GPEDEngine`); the compact results are then written and the entry
  marked complete;
* **failed** (e.g. a diverging chain) or **missing data** (the loader's message): recorded; the
  other tasks go on. :meth:`ChainGrid.raise_if_failed` stops a notebook at the end;
* **stopped** / **not started**: with a ``budget`` (:mod:`~gped_kit.experiments.budget`, for
  slices of a long grid), a batch whose budget ran out was checkpointed and stopped at a
  checkpoint point, and batches after it were not started; the next call resumes them.
"""

from __future__ import annotations

import dataclasses
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from ..core.status import FINISHED, Status
from ..core.targets import SkillWarning
from ..data.container import GPEDData
from ..data.experiment import DataConfig, prepare_data
from ..data.sources import DatasetNotFoundError
from ..data.spiral import SpiralConfig, spiral_data
from ..engine import GPEDConfig, GPEDEngine, GPEDResult, StudentConfig, check_batchable, resolve_device
from ..engine.checkpoint import load_checkpoints, read_checkpoint
from ..engine.run import run_engine
from ..engine.spec import ChainSpec, build_chain
from ..progress import status_line
from .batching import AUTO, check_chains_per_batch, plan_batch
from .budget import Budget, BudgetReached
from .collapse import ChainCollapsed, CollapseHook, check_history, sampler_text
from .executors import ChainExecutor, LocalExecutor, StoredOnly, make_executor
from .store import Entry, ResultsStore

DataSpec = DataConfig | SpiralConfig | GPEDData


@dataclass(frozen=True)
class ChainTask:
    """One chain: its data (a configuration of the kit's data, or tensors), configuration and
    students. ``keep_outputs`` names the evaluation sets (``"test"``, OOD set names) whose teacher
    and student outputs the compact results keep (float16), for figures drawn without the run."""

    data: DataSpec
    config: GPEDConfig
    students: tuple[StudentConfig, ...]
    keep_outputs: tuple[str, ...] = ()
    name: str | None = None

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        info = self.data if isinstance(self.data, DataConfig) else None
        size = f" N={info.labelled_size}" if info is not None and info.labelled_size is not None else ""
        mask = f" m={info.mask_size}" if info is not None else ""
        return f"{self.config.model_name}{size}{mask} seed={self.config.seed}"


@dataclass
class ChainOutcome:
    """What became of one task: ``status`` (ran / resumed / reused / failed / missing data; with a
    budget stopped / not started; with ``executor="stored"`` not stored), the result (None unless it
    ran or was reused), the error message, the seconds it took, whether it was part of a batch, and
    its store entry."""

    task: ChainTask
    status: Status
    result: GPEDResult | None = None
    error: str = ""
    seconds: float = 0.0
    batched: bool = False
    entry: Entry | None = None


class FailureReport:
    """``failed`` and ``raise_if_failed`` for a result whose ``cells`` table has ``status``/``error`` columns."""

    what = "chain(s)"

    @property
    def cells(self) -> pd.DataFrame:  # pragma: no cover - defined by subclasses
        raise NotImplementedError

    @property
    def failed(self) -> pd.DataFrame:
        cells = self.cells
        return cells[cells["status"] == Status.FAILED] if len(cells) else cells

    def raise_if_failed(self) -> None:
        """Raise ``RuntimeError`` listing the failed cells and their errors (a notebook's last cell)."""
        if len(self.failed):
            raise RuntimeError(f"{len(self.failed)} {self.what} failed:\n"
                               + self.failed[["cell", "error"]].to_string(index=False))


@dataclass
class ChainGrid(FailureReport):
    """The outcomes of :func:`run_chains`, in task order."""

    outcomes: list[ChainOutcome] = field(default_factory=list)

    @property
    def results(self) -> list[GPEDResult | None]:
        return [o.result for o in self.outcomes]

    @property
    def table(self) -> pd.DataFrame:
        """Every finished chain's summary rows (one per student), with ``cell``, ``run_key`` and
        ``store_status`` columns."""
        frames = [o.result.summary.assign(cell=o.task.label, run_key=o.entry.key, store_status=o.status)
                  for o in self.outcomes if o.result is not None]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    @property
    def cells(self) -> pd.DataFrame:
        """One status row per task."""
        rows = []
        for o in self.outcomes:
            info = o.task.data if isinstance(o.task.data, DataConfig) else None
            rows.append({"cell": o.task.label, "model": o.task.config.model_name,
                         "labelled_size": None if info is None else info.labelled_size,
                         "mask_size": None if info is None else info.mask_size, "status": o.status, "error": o.error,
                         "seconds": round(o.seconds, 1), "batched": o.batched,
                         "run_key": o.entry.key if o.entry is not None else ""})
        return pd.DataFrame(rows)


def load_data(spec: DataSpec, device: torch.device) -> GPEDData:
    """The data of a task on ``device`` (the kit's loaders for configurations)."""
    if isinstance(spec, GPEDData):
        return spec.to(device)
    if isinstance(spec, SpiralConfig):
        return spiral_data(spec).to(device)
    return prepare_data(spec, device=device)


def result_from_entry(entry: Entry) -> GPEDResult:
    """A chain's compact results read back (tables and kept outputs; no networks or stores)."""
    summary, history = entry.table("summary"), entry.table("history")
    teacher: dict[str, dict[str, torch.Tensor]] = {}
    students: dict[str, dict[str, torch.Tensor]] = {}
    for key, array in entry.arrays().items():
        who, eval_set, name = key.split("/", 2)
        (teacher if who == "teacher" else students).setdefault(eval_set, {})[name] = torch.from_numpy(array).float()
    steps = int(summary["steps_done"].iloc[0]) if "steps_done" in summary and len(summary) else 0
    return GPEDResult(summary=summary, history=history, teacher_outputs=teacher, student_outputs=students,
                      steps_done=steps, finished=True)


def write_compact(entry: Entry, result: GPEDResult, keep_outputs: Sequence[str]) -> None:
    """The compact results of a finished chain: summary and history tables, the calibration of its teacher
    and classifying students (:meth:`~gped_kit.engine.GPEDResult.calibration_table`), the kept outputs."""
    entry.write_table("summary", result.summary)
    entry.write_table("history", result.history)
    if result.spec is not None:
        calibration = result.calibration_table()
        if len(calibration):
            entry.write_table("calibration", calibration)
    arrays = {}
    for eval_set in keep_outputs:
        for name, value in result.teacher_outputs.get(eval_set, {}).items():
            arrays[f"teacher/{eval_set}/{name}"] = value
        for label, value in result.student_outputs.get(eval_set, {}).items():
            arrays[f"student/{eval_set}/{label}"] = value
    if arrays:
        entry.write_arrays(arrays)


def skill_not_stored(task: ChainTask, entry: Entry) -> tuple[str, ...]:
    """The skill columns (:data:`~gped_kit.core.targets.SKILL_FLOOR`: a student counts only if it beats the best
    constant prediction) that ``task``'s students report under this code, by their targets' metrics, and the
    stored summary of ``entry`` lacks (:func:`summary_columns`): the chain was stored before its students
    reported skill, so none of its students can be counted as evidence. Empty when the summary has them all (a
    skill that is NaN in it, a constant that was already exact, is stored)."""
    wanted = {name for student in task.students for name in student.resolved_target.metric_names
              if name.endswith("skill")}
    return tuple(sorted(wanted - summary_columns(entry)))


def set_aside_derived(store: ResultsStore, chain: Entry) -> list[Path]:
    """Set aside every complete entry derived from ``chain`` (a derived entry's record holds its chain's record
    under ``"chain"``: searches, evaluations, comparisons), for a chain computed again: they came from the draw
    set aside with it, so the notebook derives them again from the new one. The paths they were moved to, in
    the store's order."""
    return [e.set_aside() for e in store.entries() if e.kind != "chain" and isinstance(e.record, Mapping)
            and "chain" in e.record and store.entry("chain", e.record["chain"]).key == chain.key]


def summary_columns(entry: Entry) -> set[str]:
    """The columns of ``entry``'s stored ``summary`` table (its header only; empty without one)."""
    path = entry.path / "summary.csv"
    return set(pd.read_csv(path, nrows=0).columns) if path.exists() else set()


def _has_outputs(entry: Entry, keep_outputs: Sequence[str]) -> bool:
    if not keep_outputs:
        return True
    stored = {k.split("/")[1] for k in entry.arrays()}
    return set(keep_outputs) <= stored


def run_chains(tasks: Sequence[ChainTask], store: ResultsStore, recompute: bool = False,
               chains_per_batch: int | str = 1,
               progress: bool = True, requires_state: bool = False,
               executor: str | ChainExecutor = "local", address: str | None = None,
               budget: Budget | None = None) -> ChainGrid:
    """Run, resume or reuse every task through ``store`` (see the module docstring).

    ``chains_per_batch`` K > 1 computes up to K consecutive tasks that can share one computation
    (:func:`~gped_kit.engine.check_batchable`, at the same step) as one batch, for a GPU; ``"auto"``
    picks K from one chain's memory and the device's free memory
    (:func:`~gped_kit.experiments.batching.plan_batch`, printed with the progress). It changes how
    chains are computed, not their keys or results (equal up to round-off; dropout masks differ).
    ``requires_state`` asks for full results (see :class:`ChainOutcome`).
    ``executor`` ``"ray"`` computes each batch as a task on the Ray cluster at ``address``
    (:mod:`~gped_kit.experiments.executors`; the store must be a directory every node sees).
    ``budget`` (local executor only) stops the grid at a checkpoint once it is spent
    (:mod:`~gped_kit.experiments.budget`): tasks computed part of the way are ``stopped``, those
    not reached ``not started``. ``executor="stored"`` computes nothing: stored chains are read back,
    the others are ``not stored``, without taking the entries' locks (``entry.json`` is written last,
    so a chain another process is computing reads as not stored instead of being waited for).
    """
    runner = make_executor(executor, address)
    stored_only = isinstance(runner, StoredOnly)
    if budget is not None and not isinstance(runner, LocalExecutor):
        raise ValueError("run_chains: a budget stops the chains of this process: it needs executor='local'")
    if requires_state and not isinstance(runner, LocalExecutor) and not stored_only:
        raise ValueError("run_chains: requires_state=True keeps full results in memory: it needs executor='local'")
    check_chains_per_batch("chains_per_batch", chains_per_batch)
    outcomes: list[ChainOutcome | None] = [None] * len(tasks)
    data_cache: dict[Any, GPEDData] = {}
    pending: list[tuple[int, ChainSpec, Entry, int]] = []  # (task index, spec, entry, resume step)
    first_of: dict[str, int] = {}  # entry key -> the first task that asks for it
    same_as: dict[int, int] = {}  # a task asking for an earlier task's chain -> that task

    def report(i: int) -> None:
        o = outcomes[i]
        if progress:
            how = ", one of a batch" if o.batched else ""
            status_line(f"[{i + 1}/{len(tasks)}] {o.task.label}: {o.status} ({o.seconds:.1f} s{how})"
                        + (f" -- {o.error.splitlines()[0]}" if o.error else ""))

    for i, task in enumerate(tasks):
        started = time.perf_counter()
        try:
            device = resolve_device(task.config.device)
            key = (task.data, str(device)) if not isinstance(task.data, GPEDData) else (id(task.data), str(device))
            if key not in data_cache:
                data_cache[key] = load_data(task.data, device)
            config = task.config if progress else dataclasses.replace(task.config, progress=False)
            spec = build_chain(data_cache[key], config, task.students)
            entry = store.entry("chain", spec.record())
            if entry.key in first_of:  # the same chain twice: computed once, its outcome given to both
                first = tasks[first_of[entry.key]]
                if not set(task.keep_outputs) <= set(first.keep_outputs):
                    raise ValueError(f"run_chains: tasks {first_of[entry.key]} ({first.label}) and {i} ({task.label}) "
                                     f"are the same chain with other keep_outputs ({first.keep_outputs!r} and "
                                     f"{task.keep_outputs!r}); give the first every output either needs")
                same_as[i] = first_of[entry.key]
                continue
            first_of[entry.key] = i
            if stored_only:  # no lock: a chain another process is computing is not stored yet, and is not waited for
                found = entry.complete and not requires_state and _has_outputs(entry, task.keep_outputs)
                outcomes[i] = (_reused_chain(task, spec, entry, started) if found
                               else ChainOutcome(task, Status.NOT_STORED, entry=entry))
                outcomes[i].seconds = time.perf_counter() - started
                report(i)
                continue
            with store.lock(entry):
                if recompute and entry.path.exists():
                    entry.set_aside()
                lacking = skill_not_stored(task, entry) if entry.complete else ()
                if lacking:
                    # stored before its students reported skill: none of them could count as evidence
                    _set_aside(store, entry, task.label,
                               f"stored before its students reported skill ({', '.join(lacking)})")
                if entry.complete and not requires_state and _has_outputs(entry, task.keep_outputs):
                    outcomes[i] = _reused_chain(task, spec, entry, started)
                    report(i)
                    continue
                # computed, resumed, or reloaded from a finished checkpoint (full state)
                step = read_checkpoint(entry.checkpoint)["t"] if entry.checkpoint.exists() else 0
                if entry.complete and step < spec.config.num_iterations:
                    _set_aside(store, entry, task.label, _why_computed_again(entry, task, requires_state, step))
                    step = 0
            pending.append((i, spec, entry, step))
        except DatasetNotFoundError as exc:
            outcomes[i] = ChainOutcome(task, Status.MISSING_DATA, error=str(exc), seconds=time.perf_counter() - started)
            report(i)
        except Exception as exc:  # noqa: BLE001 -- recorded, the grid goes on
            outcomes[i] = ChainOutcome(task, Status.FAILED, error=f"{type(exc).__name__}: {exc}",
                                       seconds=time.perf_counter() - started)
            report(i)

    size = chains_per_batch
    if size == AUTO:
        size = 1
        if pending and not stored_only:
            plan = plan_batch(pending[0][1], len(pending))
            size = plan.chains
            if progress:
                status_line(plan.describe())
    batches = _batches(pending, size)
    if isinstance(runner, LocalExecutor):
        for batch in batches:
            if budget is not None and budget.spent():
                for i, _, entry, _ in batch:
                    outcomes[i] = ChainOutcome(tasks[i], Status.NOT_STARTED, entry=entry)
            else:
                _compute(batch, tasks, outcomes, store, budget)
            for i, *_ in batch:
                report(i)
    else:
        root = str(store.root.resolve())
        jobs = [(tuple(dataclasses.replace(tasks[i], name=tasks[i].label) for i, *_ in batch), root, len(batch),
                 progress) for batch in batches]
        gpus = [batch[0][1].device.type == "cuda" for batch in batches]

        def done(index: int, report_rows: list[tuple[str, str, float, bool]]) -> None:
            for (i, spec, entry, _), (status, error, seconds, batched) in zip(batches[index], report_rows):
                result = result_from_entry(entry) if status in FINISHED else None
                outcomes[i] = ChainOutcome(tasks[i], status, result, error, seconds, batched, entry)
                report(i)

        runner.map(compute_batch, jobs, gpus, done)
    for i, first in same_as.items():
        o = outcomes[first]
        outcomes[i] = dataclasses.replace(o, task=tasks[i], seconds=0.0,
                                          status=Status.REUSED if o.status in FINISHED else o.status)
        report(i)
    return ChainGrid([o for o in outcomes if o is not None])


def _why_computed_again(entry: Entry, task: ChainTask, requires_state: bool, step: int) -> str:
    """Why a complete chain is computed again: it is needed for its full state or for outputs it was stored
    without, and has no checkpoint of its last step to reload them from (stored without its checkpoint, as in a
    fresh clone, or beside an earlier slice's); on another machine or thread count that is another draw."""
    had = f"with a checkpoint of step {step:,}, not its last" if entry.checkpoint.exists() else "without its checkpoint"
    why = ("its full state" if requires_state
           else f"its outputs on {', '.join(o for o in task.keep_outputs if not _has_outputs(entry, (o,)))}")
    return f"stored {had}, needed for {why}"


def _set_aside(store: ResultsStore, entry: Entry, label: str, reason: str) -> None:
    """Set a complete chain's entry aside with the results derived from it (:func:`set_aside_derived`), before
    it is computed again from step 0 for ``reason``: another draw, which must not overwrite them; says so."""
    aside = entry.set_aside()
    derived = set_aside_derived(store, entry)
    print(f"{label}: {reason}; computed again, the stored tables are kept in {aside.name}"
          + (f", and the {len(derived)} results derived from it in "
             f"{', '.join(f'{p.parent.name}/{p.name}' for p in derived)}" if derived else ""), file=sys.stderr)


def _reused_chain(task: ChainTask, spec: ChainSpec, entry: Entry, started: float) -> ChainOutcome:
    """A complete stored chain read back, or ``failed`` when its history shows a pooled teacher's chain
    that collapsed to chance level (:func:`~gped_kit.experiments.collapse.check_history`; such a result,
    made before the check, is not used)."""
    result = result_from_entry(entry)
    chance = spec.likelihood.chance_nll(spec.data.num_outputs)
    if chance is not None:
        try:
            check_history(result.history, chance, task.label, sampler_text(spec.config))
        except ChainCollapsed as exc:
            return ChainOutcome(task, Status.FAILED, error=f"ChainCollapsed: {exc}",
                                seconds=time.perf_counter() - started, entry=entry)
    return ChainOutcome(task, Status.REUSED, result, seconds=time.perf_counter() - started, entry=entry)


def compute_batch(tasks: Sequence[ChainTask], store_root: str, chains_per_batch: int,
                  progress: bool) -> list[tuple[str, str, float, bool]]:
    """One batch on a worker of a distributed executor: ``tasks`` computed (or resumed from their
    entries' checkpoints) through the store at ``store_root``; each task's (status, error,
    seconds, batched)."""
    grid = run_chains(list(tasks), ResultsStore(store_root), chains_per_batch=chains_per_batch, progress=progress)
    return [(o.status, o.error, o.seconds, o.batched) for o in grid.outcomes]


def _batches(pending: list, size: int) -> list[list]:
    """Consecutive pending tasks grouped into batches of at most ``size`` that can share one computation."""
    batches: list[list] = []
    for item in pending:
        if batches and len(batches[-1]) < size and batches[-1][0][3] == item[3]:
            try:
                check_batchable([b[1] for b in batches[-1]] + [item[1]])
                batches[-1].append(item)
                continue
            except ValueError:
                pass
        batches.append([item])
    return batches


def _report_skill(caught: Sequence[warnings.WarningMessage], labels: Sequence[str]) -> None:
    """The run-end warnings of students below the skill floor, each as one line on standard error naming its
    chain (a notebook shows it without the library's file paths); any other warning is issued again."""
    for w in caught:
        if issubclass(w.category, SkillWarning):
            print(f"SkillWarning ({', '.join(labels)}): {w.message}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _compute(batch: list, tasks: Sequence[ChainTask], outcomes: list, store: ResultsStore,
             budget: Budget | None = None) -> None:
    started = time.perf_counter()
    entries = [b[2] for b in batch]
    with ExitStack() as stack:
        for entry in sorted(entries, key=lambda e: e.key):  # one order: no deadlock between processes
            stack.enter_context(store.lock(entry))
        try:
            engine = GPEDEngine([b[1] for b in batch])
            paths = [e.checkpoint for e in entries]
            loaded = load_checkpoints(engine, paths)
            resumed_from = engine.t if any(loaded) else None
            if engine.t >= engine.config.num_iterations:  # finished before: reload from the checkpoint
                results = engine.results()
            else:
                hooks = [CollapseHook([tasks[b[0]].label for b in batch], [sampler_text(b[1].config) for b in batch])]
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", SkillWarning)
                    results = run_engine(engine, paths,
                                         hooks=hooks + ([budget.hook(paths)] if budget is not None else []))
                _report_skill(caught, [tasks[b[0]].label for b in batch])
            finished = resumed_from is not None and resumed_from >= engine.config.num_iterations
            for (i, spec, entry, _), result in zip(batch, results):
                task = tasks[i]
                # a stored chain reloaded for its full state keeps its stored tables and record as they are (when
                # it was made, in what batch): only a chain finished here, or stored without its kept outputs, is
                # written
                if not (finished and entry.complete and _has_outputs(entry, task.keep_outputs)):
                    write_compact(entry, result, task.keep_outputs)
                    entry.finish(seconds=round(engine.elapsed, 2), device=str(engine.device), steps=engine.t,
                                 batched_with=len(batch))
                # the tables as stored, so that fresh and reused results read alike (e.g. None -> NaN)
                result.summary, result.history = entry.table("summary"), entry.table("history")
                status = Status.REUSED if finished else (Status.RESUMED if resumed_from else Status.RAN)
                outcomes[i] = ChainOutcome(task, status, result, seconds=time.perf_counter() - started,
                                           batched=len(batch) > 1, entry=entry)
        except BudgetReached as stop:  # checkpointed: the next call resumes the batch
            for i, spec, entry, _ in batch:
                outcomes[i] = ChainOutcome(tasks[i], Status.STOPPED, error=str(stop),
                                           seconds=time.perf_counter() - started, batched=len(batch) > 1, entry=entry)
        except Exception as exc:  # noqa: BLE001 -- recorded for every chain of the batch; the grid goes on
            for i, spec, entry, _ in batch:
                outcomes[i] = ChainOutcome(tasks[i], Status.FAILED, error=f"{type(exc).__name__}: {exc}",
                                           seconds=time.perf_counter() - started, batched=len(batch) > 1, entry=entry)
