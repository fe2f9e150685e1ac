"""Entries derived from a chain's full state (searches, comparisons, Experiment 4's evaluations), through the
results store.

A :class:`DerivedTask` names the entry: its chain's :class:`~gped_kit.experiments.chains.ChainTask`, a kind, a
record and a computation from the chain's full result. :func:`derive` keys the entry by ``{"chain": <the chain's
record>, **record}`` and the kind's numerics code, and then

* **reused**: the entry is complete and its chain reported its students' skill (or is not stored): it is read
  back, the chain neither run nor loaded;
* **ran**: otherwise the chain's full state is asked for (:func:`~gped_kit.experiments.chains.run_chains` with
  ``requires_state``: reloaded from its checkpoint, resumed, or run) and the entry computed from it. A chain
  stored before its students reported skill is computed again, and what was derived from it is derived again
  from the new draw;
* **failed** / **missing data**: recorded in the :class:`DerivedOutcome`, not raised.

:func:`run_derived` does this for many, locally, on a Ray cluster, or reading the store only.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.status import Status
from ..data.container import GPEDData
from ..data.sources import DatasetNotFoundError
from ..engine import GPEDResult, resolve_device
from ..engine.spec import build_chain
from ..progress import status_line
from .chains import ChainOutcome, ChainTask, load_data, result_from_entry, run_chains, skill_not_stored
from .executors import ChainExecutor, LocalExecutor, StoredOnly, make_executor
from .store import Entry, ResultsStore


@dataclass
class DerivedOutcome:
    """A chain and the entry derived from it: the chain's outcome (its compact result: summary and
    history), the derived entry (None when it could not be made), the derived entry's status
    (``ran`` / ``reused`` / ``failed`` / ``missing data``), its error message and the seconds the
    whole derivation took (data, chain, derived computation)."""

    chain: ChainOutcome
    entry: Entry | None
    status: Status
    error: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class DerivedTask:
    """An entry of kind ``kind`` to derive from ``task``'s chain (see :func:`derive`):
    keyed by ``{"chain": <the chain's record>, **record}`` and ``code`` (default: the kind's numerics
    code, :func:`~gped_kit.experiments.numerics.numerics_code`), computed by
    ``compute(entry, full_result, data)``. For ``executor="ray"`` ``compute`` travels to the
    worker (pickled by value by Ray, closures included), so it must not hold open files or
    in-memory state that only the driver has."""

    task: ChainTask
    kind: str
    record: Mapping[str, Any]
    compute: Callable[[Entry, GPEDResult, GPEDData], None]
    code: str | None = None


def _derived_entry(item: DerivedTask, store: ResultsStore, started: float
                   ) -> tuple[GPEDData, dict, Entry] | DerivedOutcome:
    """The data, the chain's record and the derived entry of ``item`` -- or, when the data are
    missing or the chain cannot be built, the outcome saying so."""
    task = item.task
    try:
        device = resolve_device(task.config.device)
        data = load_data(task.data, device)
        chain_record = build_chain(data, task.config, task.students).record()
    except DatasetNotFoundError as exc:
        outcome = ChainOutcome(task, Status.MISSING_DATA, error=str(exc), seconds=time.perf_counter() - started)
        return DerivedOutcome(outcome, None, Status.MISSING_DATA, str(exc), time.perf_counter() - started)
    except Exception as exc:  # noqa: BLE001 -- recorded, the caller goes on
        error = f"{type(exc).__name__}: {exc}"
        return DerivedOutcome(ChainOutcome(task, Status.FAILED, error=error, seconds=time.perf_counter() - started),
                              None, Status.FAILED, error, time.perf_counter() - started)
    return data, chain_record, store.entry(item.kind, {"chain": chain_record, **item.record}, item.code)


def _derived_current(item: DerivedTask, store: ResultsStore, entry: Entry, chain_record: Mapping[str, Any]) -> bool:
    """Whether the complete derived ``entry`` can be read back: not when its chain is stored without its
    students' skill (:func:`skill_not_stored`). Such a chain is computed again (:func:`run_chains` sets it and
    what was derived from it aside), so what is derived from it is derived again from the new draw: reusing the
    derived entry would keep students that cannot count as evidence. A chain not stored at all (a derived entry
    whose chain's tables were not kept) leaves the derived entry current."""
    if not entry.complete:
        return False
    chain_entry = store.entry("chain", chain_record)
    return not (chain_entry.complete and skill_not_stored(item.task, chain_entry))


def _reused(item: DerivedTask, store: ResultsStore, entry: Entry, chain_record: Mapping[str, Any],
            started: float, progress: bool) -> DerivedOutcome:
    """A complete derived entry read back: the chain is neither run nor loaded (its compact tables
    are read when stored)."""
    chain_entry = store.entry("chain", chain_record)
    result = result_from_entry(chain_entry) if chain_entry.complete else None
    outcome = ChainOutcome(item.task, Status.REUSED, result, seconds=time.perf_counter() - started, entry=chain_entry)
    if progress:
        status_line(f"{item.task.label}: {item.kind} reused (chain not loaded)")
    return DerivedOutcome(outcome, entry, Status.REUSED, seconds=time.perf_counter() - started)


def derive(item: DerivedTask, store: ResultsStore, recompute: bool = False, progress: bool = True
           ) -> DerivedOutcome:
    """The entry ``item`` derives from its task's chain, keyed by ``{"chain": <the chain's record>,
    **item.record}`` and ``item.code``: reused when complete (the chain is then neither run nor
    loaded; its compact tables are read when stored) unless its chain is stored without its students' skill
    (:func:`_derived_current`: the chain is computed again and the entry derived again from it), else
    computed by ``item.compute(entry, result, data)`` from the chain's full result
    (:func:`~gped_kit.experiments.chains.run_chains` with ``requires_state``: reloaded from its checkpoint,
    resumed, or run). ``recompute`` sets both the chain and the derived entry aside and computes them afresh.
    A missing data set or a failure is recorded in the outcome, not raised. :func:`run_derived` does this for
    many, locally or on Ray."""
    started = time.perf_counter()
    prepared = _derived_entry(item, store, started)
    if isinstance(prepared, DerivedOutcome):
        return prepared
    data, chain_record, entry = prepared
    if not recompute and _derived_current(item, store, entry, chain_record):
        return _reused(item, store, entry, chain_record, started, progress)
    task = item.task
    run_task = dataclasses.replace(task, data=data, name=task.label)
    outcome = run_chains([run_task], store, recompute=recompute, progress=progress, requires_state=True).outcomes[0]
    outcome = dataclasses.replace(outcome, task=task)
    if outcome.result is None:
        return DerivedOutcome(outcome, None, outcome.status, outcome.error, time.perf_counter() - started)
    full = outcome.result
    outcome.result = result_from_entry(outcome.entry)  # the compact tables: the full state is not kept
    try:
        entry, status = store.cached(item.kind, entry.record, item.code, lambda e: item.compute(e, full, data),
                                     recompute=recompute)
    except Exception as exc:  # noqa: BLE001 -- recorded, the caller goes on
        return DerivedOutcome(outcome, None, Status.FAILED, f"{item.kind}: {type(exc).__name__}: {exc}",
                              time.perf_counter() - started)
    return DerivedOutcome(outcome, entry, status, seconds=time.perf_counter() - started)


def compute_derived(item: DerivedTask, store_root: str, recompute: bool, progress: bool) -> dict[str, Any]:
    """One derived entry on a worker of a distributed executor: :func:`derive` through
    the store at ``store_root``; what the driver needs to read the outcome back from the store."""
    out = derive(item, ResultsStore(store_root), recompute, progress)
    chain = out.chain
    return {"status": out.status, "error": out.error, "seconds": out.seconds,
            "record": out.entry.record if out.entry is not None else None,
            "chain_status": chain.status, "chain_error": chain.error, "chain_seconds": chain.seconds,
            "chain_record": chain.entry.record if chain.entry is not None else None}


def run_derived(items: Sequence[DerivedTask], store: ResultsStore, recompute: bool = False, progress: bool = True,
                executor: str | ChainExecutor = "local", address: str | None = None) -> list[DerivedOutcome]:
    """Every item's derived entry (:func:`derive`), in item order.

    ``executor="local"`` derives them one after another in this process. ``"ray"`` first decides
    on the driver which entries are stored (reused without running anything), then derives each
    missing one as a Ray task -- its chain (run, resumed from its checkpoint, or reloaded) and the
    derived computation together on one worker, since the chain's full state (networks, U_o
    stores, snapshots) is what the computation needs and is not sent back -- requesting one GPU
    when the task's device is CUDA, one CPU otherwise. Workers write to the shared, file-locked
    store (a directory every node sees at the same path); the driver reads the entries back. A
    worker that dies is retried by Ray and resumes the chain from its last checkpoint; a failure
    for a real reason (divergence, missing data, an error in ``compute``) is recorded in its
    outcome and the others go on, as locally."""
    runner = make_executor(executor, address)
    if isinstance(runner, LocalExecutor):
        return [derive(item, store, recompute, progress) for item in items]
    stored_only = isinstance(runner, StoredOnly)
    outcomes: list[DerivedOutcome | None] = [None] * len(items)
    submit: list[int] = []
    gpus: list[bool] = []
    for i, item in enumerate(items):
        started = time.perf_counter()
        prepared = _derived_entry(item, store, started)
        if isinstance(prepared, DerivedOutcome):
            outcomes[i] = prepared
        elif not recompute and (prepared[2].complete if stored_only
                                else _derived_current(item, store, prepared[2], prepared[1])):
            outcomes[i] = _reused(item, store, prepared[2], prepared[1], started, progress)
        elif stored_only:
            chain = ChainOutcome(item.task, Status.NOT_STORED, seconds=time.perf_counter() - started)
            outcomes[i] = DerivedOutcome(chain, None, Status.NOT_STORED, seconds=time.perf_counter() - started)
        else:
            submit.append(i)
            gpus.append(resolve_device(item.task.config.device).type == "cuda")
    root = str(store.root.resolve())
    jobs = [(dataclasses.replace(items[i], task=dataclasses.replace(items[i].task, name=items[i].task.label)),
             root, recompute, progress) for i in submit]

    def done(index: int, got: dict[str, Any]) -> None:
        i = submit[index]
        item = items[i]
        chain_entry = store.entry("chain", got["chain_record"]) if got["chain_record"] else None
        result = result_from_entry(chain_entry) if chain_entry is not None and chain_entry.complete else None
        chain = ChainOutcome(item.task, got["chain_status"], result, got["chain_error"], got["chain_seconds"],
                             entry=chain_entry)
        entry = store.entry(item.kind, got["record"], item.code) if got["record"] is not None else None
        outcomes[i] = DerivedOutcome(chain, entry, got["status"], got["error"], got["seconds"])
        if progress:
            status_line(f"[{i + 1}/{len(items)}] {item.task.label}: {item.kind} {got['status']} "
                        f"({got['seconds']:.1f} s on {runner.describe()}; chain {got['chain_status']})"
                        + (f" -- {got['error'].splitlines()[0]}" if got["error"] else ""))

    if jobs:  # everything stored (or failed before computing): no cluster is needed
        runner.map(compute_derived, jobs, gpus, done)
    return [o for o in outcomes if o is not None]
