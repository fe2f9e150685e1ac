"""The frame every experiment fills in: one :class:`Experiment` per notebook, and what its notebook shares.

An experiment package (``experiment1``, ``experiment4``, ``samplers``, ...) owns everything its notebook needs:
its settings and profiles, its chains, what it reads from the results store, its summary tables, its declared
artifacts and checks (:mod:`~gped_kit.experiments.artifacts`, :mod:`~gped_kit.experiments.checks`) and its rows
of the README's claims table. It declares them in one :class:`Experiment`, which the registry
(:mod:`gped_kit.experiments.registry`, a list of experiments) hands to the tools around the notebooks: the batch
runner checks a run's settings and chains before starting (:meth:`Experiment.chain_tasks`), ``--profile all``
runs :attr:`Experiment.shown_profiles`, ``python -m gped_kit.cli.store missing`` asks :meth:`Experiment.missing`,
``tests/test_paper_profile.py`` runs :attr:`Experiment.scaled_paper` and checks the outcomes
:attr:`Experiment.expected_checks` gives, and ``python -m gped_kit.cli.readme`` asks
:attr:`Experiment.readme_rows`.

What every notebook shares: :class:`Summary` (one profile's results: the run, its named tables, what the store
lacks), :meth:`Experiment.summarise` (a notebook's main results, computed or, with ``executor="stored"``, read
back) and :meth:`Experiment.stored_profiles` (the other profiles the store holds, read beside this run's with
:func:`side_by_side`, computing nothing), and the checks of what a run must leave in the store
(:func:`chain_gaps`, :func:`derived_rows`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.options import StepSchedule
from ..core.status import Status
from ..data.container import GPEDData
from ..data.sources import DatasetNotFoundError, load_split
from ..engine import StudentConfig
from ..models.presets import ArchSpec
from .artifacts import Artifact
from .chains import ChainGrid, ChainTask, run_chains, skill_not_stored
from .checks import Check
from .derived import DerivedOutcome
from .executors import ExecutorName
from .numerics import numerics_code
from .settings import changed_settings, resolve_settings
from .store import ResultsStore

#: The chain of a scaled paper profile (``tests/test_paper_profile.py``): T = 10^6 -> 101 with B -> 50, so
#: that every event of Algorithm 1 happens at least once at the paper's thinnings, and 500 of the 10,000
#: test images (evaluating every student on all of them is most of the scaled run's time, and proves
#: nothing more).
SCALED_CHAIN = {"num_iterations": 101, "burn_in": 50, "test_size": 500}

TaskBuilder = Callable[..., list[ChainTask]]
StoreCheck = Callable[[ResultsStore, Any, Sequence[ChainTask], Collection[str], int], list[str]]
#: The check outcomes a run must record for (settings, absent data sets): each check's statement for its cell
#: (:meth:`~gped_kit.experiments.checks.Check.cell`) and the value it must have.
ExpectedChecks = Callable[[Any, Collection[str]], dict[str, Any]]


def batch_command(notebook: str, profile: str) -> str:
    """The command that runs ``notebook`` with ``profile`` into the results store."""
    return f"python -m gped_kit.cli.batch --profile {profile} {notebook}"


def _no_checks(settings: Any, absent: Collection[str]) -> dict[str, Any]:
    return {}


class AfterChains(str, Enum):
    """What an experiment computes from its chains once they are done: work the chains' count does not hold
    (``benchmarks/paper_profile_work.py`` counts each kind's)."""

    #: Experiment 3: every searched student pruned and fine-tuned, evaluated and timed
    SEARCH = "search"
    #: the comparison: Hydra's two phases on each chain's snapshots
    HYDRA = "hydra"

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class Experiment:
    """A notebook of ``notebooks/`` and the experiment it runs (see the module docstring).

    ``name`` is the notebook's stem; ``profiles`` its settings by profile name (empty: it has none, e.g. it
    only draws or runs its own small example); ``tasks(settings, seed=, device=, data_root=, **parameters)``
    builds its chain tasks in the order it runs them (None: it runs no chain of the store), with
    ``parameters`` the notebook parameters they take besides the settings, at the defaults of the notebook's
    parameters cell; ``summary(experiment, store, settings, *, profile, executor, progress, **parameters)``
    computes (or with ``executor="stored"`` reads back) its main results as a :class:`Summary`;
    ``shown_profiles`` are the profiles its section "Other profiles in the store" shows, in order (and what
    ``--profile all`` runs); ``after_chains`` names what it computes from its chains (:class:`AfterChains`;
    None: nothing); ``scaled_paper`` are the overrides of its ``paper`` profile that make it run on a CPU (None:
    no paper profile to run); ``stored`` checks what else than the chains a run must store, ``expected_checks``
    gives the outcomes of its ``checks`` a run must record, with their values (both for a run where the data sets
    ``absent`` are missing);
    ``needs_chain_state`` says whether what it derives from its chains needs their full final state;
    ``artifacts`` the files it writes to ``figures/`` (:mod:`~gped_kit.experiments.artifacts`), by key, and
    ``checks`` what its notebook tests on its results (:mod:`~gped_kit.experiments.checks`), by key;
    ``description`` its line in the README's list of notebooks;
    ``readme_rows(figures)`` gives its rows of the README's claims table from the tables it wrote to
    ``figures`` (:class:`~gped_kit.experiments.verdicts.Claim`), and ``long_rows(figures, profile)`` the
    rows its ``long`` profile judges too."""

    name: str
    profiles: Mapping[str, Any] = field(default_factory=dict)
    tasks: TaskBuilder | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    summary: Callable[..., Summary] | None = None
    shown_profiles: tuple[str, ...] = ("default",)
    after_chains: AfterChains | None = None
    scaled_paper: Mapping[str, Any] | None = None
    stored: StoreCheck | None = None
    expected_checks: ExpectedChecks = _no_checks
    needs_chain_state: bool = False
    readme_rows: Callable[[Path], list] | None = None
    long_rows: Callable[[Path, str], list] | None = None
    artifacts: Mapping[str, Artifact] = field(default_factory=dict)
    description: str = ""
    checks: Mapping[str, Check] = field(default_factory=dict)

    def path(self, notebook_dir: str | Path = "notebooks") -> Path:
        return Path(notebook_dir) / f"{self.name}.ipynb"

    def settings(self, profile: str = "default", overrides: Mapping[str, Any] | None = None) -> Any:
        """The settings of ``profile`` with ``overrides`` (as the notebook resolves its parameters,
        :func:`~gped_kit.experiments.settings.resolve_settings`); None without profiles."""
        if not self.profiles:
            return None
        return resolve_settings(self.profiles, profile, overrides)

    def chain_tasks(self, settings: Any, *, seed: int = 0, device: str = "auto", data_root: str | None = None,
                    **parameters: Any) -> list[ChainTask]:
        """The chains under ``settings``, in the order the notebook runs them; ``parameters`` override
        :attr:`parameters` (names it does not take are an error). Empty when the notebook runs no chain."""
        unknown = sorted(set(parameters) - set(self.parameters))
        if unknown:
            raise ValueError(f"{self.name}: {unknown[0]} is not a parameter of its chains; allowed: "
                             f"{sorted(self.parameters)}")
        if self.tasks is None:
            return []
        return list(self.tasks(settings, seed=seed, device=device, data_root=data_root,
                               **{**self.parameters, **parameters}))

    def chains_per_batch(self, settings: Any) -> int | str:
        """How many consecutive compatible chains the notebook runs as one batch (``"auto"``: as many as
        the device's memory allows, :mod:`~gped_kit.experiments.batching`)."""
        return getattr(settings, "chains_per_batch", 1) or 1

    def missing(self, store: ResultsStore, settings: Any, absent: Collection[str] = (), *, seed: int = 0,
                **parameters: Any) -> list[str]:
        """What a completed run under ``settings`` would have stored and ``store`` lacks, one line each (empty:
        all there): a complete chain entry per chain task whose data set is present (and none for those in
        ``absent``), and the derived results, each under this checkout's numerics (entries a version bump
        superseded count as missing)."""
        tasks = self.chain_tasks(settings, seed=seed, **parameters)
        gaps = chain_gaps(store, tasks, absent)
        if self.stored is not None:
            gaps += self.stored(store, settings, tasks, absent, seed)
        return gaps

    def summarise(self, store: ResultsStore, settings: Any, **options: Any) -> Summary:
        """The notebook's main results under ``settings`` (``profile``, ``executor``, ``recompute``,
        ``progress`` and its parameters in ``options``): computed, reused, or with ``executor="stored"``
        read back without computing anything."""
        if self.summary is None:
            raise ValueError(f"{self.name}: it has no summary of its own")
        return self.summary(self, store, settings, **options)

    def stored_profiles(self, current: Summary, store: ResultsStore, profiles: Sequence[str] | None = None,
                        **parameters: Any) -> ProfilesBeside:
        """The other profiles of this notebook (``profiles``, default :attr:`shown_profiles`), read from
        ``store`` beside ``current`` (this run's summary; ``parameters`` are the notebook's, as given to
        :meth:`summarise`).

        Each profile's settings are this notebook's with this run's overrides, i.e. what this run's settings
        change in its own profile (:func:`~gped_kit.experiments.settings.changed_settings`: a run with tiny
        chains reads the other profile's tiny chains; a run without overrides reads the profile as it is).
        :meth:`summarise` with ``executor="stored"`` reads its results without computing anything. A profile
        whose results are all stored joins ``summaries``; the others give one line each (also a profile
        whose settings or chains this run's overrides make invalid)."""
        order = list(profiles if profiles is not None else self.shown_profiles)
        if current.profile not in order:
            order.insert(0, current.profile)
        overrides = changed_settings(current.settings, self.settings(current.profile))
        summaries: dict[str, Summary] = {}
        lines: list[str] = []
        for name in order:
            if name == current.profile:
                summaries[name] = current
                continue
            try:
                settings = self.settings(name, overrides)
                self.chain_tasks(settings)  # the chains' configurations are checked before anything is read
            except (TypeError, ValueError) as exc:
                lines.append(f"Profile {name!r}: its settings do not take this run's overrides ({exc}).")
                continue
            summary = self.summarise(store, settings, profile=name, executor=ExecutorName.STORED.value,
                                     progress=False, **parameters)
            if summary.complete:
                summaries[name] = summary
                lines += failed_lines(summary)
            else:
                lines.append(summary.missing_line())
        return ProfilesBeside(summaries, lines)


# ----------------------------------------------------------------------------- a profile's summary
@dataclass
class Summary:
    """One notebook's results under one profile: ``run`` (what the notebook reads further), the named
    ``tables`` and the results the store lacks (``missing``, one line each; only with ``executor="stored"``,
    which stops at the first chain when that one is missing: ``run`` is then None and ``tables`` empty)."""

    experiment: Experiment
    profile: str
    settings: Any
    run: Any
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    @property
    def notebook(self) -> str:
        return self.experiment.name

    @property
    def complete(self) -> bool:
        """Whether every result of the profile was found (or computed)."""
        return not self.missing

    def missing_line(self) -> str:
        """One line: the profile's results are not (all) stored (the first missing one named), and how to
        make them."""
        what = f"e.g. {self.missing[0]}" if self.missing else "nothing missing"
        return (f"Profile {self.profile!r}: not in the store ({what}); make it with "
                f"`{batch_command(self.notebook, self.profile)}`.")


def check_executor(executor: Any, recompute: bool) -> bool:
    """Whether ``executor`` is ``"stored"``; recomputing would set stored entries aside, so it is refused."""
    stored = isinstance(executor, str) and executor == ExecutorName.STORED.value
    if stored and recompute:
        raise ValueError("executor='stored' reads the store only: it cannot be combined with recompute=True")
    return stored


def grid_missing(grid: ChainGrid) -> list[str]:
    """One line per chain of ``grid`` that ``executor="stored"`` did not find."""
    return [f"{o.task.label}: chain {Status.NOT_STORED}" for o in grid.outcomes if o.status == Status.NOT_STORED]


def derived_missing(outcomes: Iterable[DerivedOutcome], kind: str) -> list[str]:
    """One line per derived entry (of ``kind``) that ``executor="stored"`` did not find."""
    return [f"{o.chain.task.label}: {kind} {Status.NOT_STORED}" for o in outcomes if o.status == Status.NOT_STORED]


def first_chain_missing(tasks: Sequence[Any], store: ResultsStore) -> list[str]:
    """The first task's chain read alone from the store: its line when it is not stored (a profile never
    run is then reported after one read instead of one per chain), else nothing."""
    return grid_missing(run_chains(list(tasks[:1]), store, executor=ExecutorName.STORED.value, progress=False))


def read_chains(tasks: Sequence[Any], store: ResultsStore, executor: str, recompute: bool, progress: bool,
                chains_per_batch: int | str = 1) -> tuple[ChainGrid | None, list[str]]:
    """The tasks' chains run, resumed or reused (:func:`~gped_kit.experiments.chains.run_chains`), or with
    ``executor="stored"`` read back, and the lines of those not stored (no grid when the first is not)."""
    if check_executor(executor, recompute) and (missing := first_chain_missing(tasks, store)):
        return None, missing
    grid = run_chains(tasks, store, recompute=recompute, chains_per_batch=chains_per_batch, executor=executor,
                      progress=progress)
    return grid, grid_missing(grid)


def chain_seconds(grid: ChainGrid) -> pd.DataFrame:
    """Per model, the chains found and their measured computing time in seconds, as their entries
    record it (``entry.json``: the batch's time, shared equally among the chains batched together)."""
    rows = []
    for o in grid.outcomes:
        meta = o.entry.meta if o.entry is not None else {}
        if not meta.get("complete"):
            continue
        seconds = meta.get("seconds")
        share = float(seconds) / max(int(meta.get("batched_with") or 1), 1) if seconds is not None else float("nan")
        rows.append({"model": o.task.config.model_name, "seconds": share})
    if not rows:
        return pd.DataFrame(columns=["model", "chains", "seconds"])
    df = pd.DataFrame(rows)
    return (df.groupby("model", sort=False).agg(chains=("seconds", "size"), seconds=("seconds", "sum"))
            .reset_index())


def failed_lines(summary: Summary) -> list[str]:
    """One line per chain of ``summary``'s grid that failed (e.g. a stored pooled teacher with a collapsed
    chain, :mod:`~gped_kit.experiments.collapse`): the profile, the cell and the error's first sentence;
    the profile's tables leave such a chain out."""
    failed = getattr(summary.run, "failed", None)
    if failed is None or not len(failed):
        return []
    return [f"Profile {summary.profile!r}: {row.cell} failed and is left out of its tables: "
            f"{str(row.error).split('. ')[0].split(': ', 1)[-1]}." for row in failed.itertuples()]


# ----------------------------------------------------------------------------- profiles side by side
#: The columns of a claims table that are the paper's (equal in every profile that runs the same cells).
PAPER_COLUMNS = ("paper", "paper_statement")


def side_by_side(tables: Mapping[str, pd.DataFrame], keys: Sequence[str] | None = None,
                 same: Sequence[str] = (), column: str = "profile") -> pd.DataFrame:
    """One table from one table per profile (``tables``, in its order).

    Without ``keys``: the tables stacked, with a first column ``column`` naming each row's profile.
    With ``keys``: one row per key (in the order first seen), every other column once per profile,
    named ``"<name> (<profile>)"``, grouped by column; a column of ``same`` (e.g. the paper's count)
    is kept once under its own name when every profile that has a row gives it the same value there,
    else split like the others. A key a profile lacks is missing (NaN) in its columns; the key columns
    must have no missing values."""
    if not isinstance(tables, Mapping):
        raise TypeError(f"tables must map a profile name to a DataFrame, got {type(tables).__name__}")
    for name, table in tables.items():
        if not isinstance(table, pd.DataFrame):
            raise TypeError(f"tables[{name!r}] must be a DataFrame, got {type(table).__name__}")
        absent = [k for k in (keys or ()) if k not in table.columns]
        if absent:
            raise ValueError(f"tables[{name!r}] lacks the key column(s) {absent}; it has {list(table.columns)}")
        if keys and table[list(keys)].isna().any().any():
            raise ValueError(f"tables[{name!r}]: the key columns {list(keys)} have missing values; a key must name "
                             "each row")
    if keys is None:
        frames = [t.assign(**{column: name})[[column, *[c for c in t.columns if c != column]]]
                  for name, t in tables.items()]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[column])
    keys = list(keys)
    order: list[tuple] = []
    for t in tables.values():
        order += [k for k in map(tuple, t[keys].astype(object).to_numpy().tolist()) if k not in order]
    out = pd.DataFrame(order, columns=keys)
    values: list[str] = []
    for t in tables.values():
        values += [c for c in t.columns if c not in keys and c not in values]
    per_profile = {name: t.drop_duplicates(keys).set_index(keys) for name, t in tables.items()}
    index = pd.MultiIndex.from_tuples(order, names=keys) if len(keys) > 1 else pd.Index([k[0] for k in order],
                                                                                         name=keys[0])
    for value in values:
        aligned = {name: (t[value].reindex(index) if value in t else pd.Series(float("nan"), index=index))
                   for name, t in per_profile.items()}
        if value in same and _equal_where_present(list(aligned.values())):
            merged = pd.Series([next((s.iloc[i] for s in aligned.values() if _present(s.iloc[i])), float("nan"))
                                for i in range(len(index))], dtype=object)
            out[value] = merged.infer_objects().to_numpy()
            continue
        for name, series in aligned.items():
            out[f"{value} ({name})"] = series.to_numpy()
    return out


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and value != value)


def _equal_where_present(series: list[pd.Series]) -> bool:
    for i in range(len(series[0]) if series else 0):
        found = {repr(s.iloc[i]) for s in series if _present(s.iloc[i])}
        if len(found) > 1:
            return False
    return True


@dataclass
class ProfilesBeside:
    """A notebook's profiles the store holds (``summaries``, in the order shown) and one line for each
    other profile it lacks (``lines``: :meth:`Summary.missing_line`, or why the profile's settings could
    not be built with this run's overrides)."""

    summaries: dict[str, Summary]
    lines: list[str]

    @property
    def others(self) -> bool:
        """Whether a profile besides this run's is there to show."""
        return len(self.summaries) > 1

    def table(self, name: str, keys: Sequence[str] | None = None, same: Sequence[str] = PAPER_COLUMNS,
              columns: Sequence[str] | None = None) -> pd.DataFrame:
        """Table ``name`` of every shown profile in one (:func:`side_by_side`), with only ``keys`` and
        ``columns`` (None: every column) of each."""
        tables = {p: s.tables[name] for p, s in self.summaries.items()}
        if columns is not None:
            tables = {p: t[[*(keys or ()), *[c for c in columns if c in t]]] for p, t in tables.items()}
        return side_by_side(tables, keys, same)


# ----------------------------------------------------------------------------- what a run stores
#: The data sets the experiments' chains train on.
CHAIN_DATASETS = ("mnist", "cifar10")


def absent_datasets(root: str | Path | None = None) -> frozenset[str]:
    """The data sets of :data:`CHAIN_DATASETS` that cannot be loaded here (under ``root``, default the
    data root), e.g. CIFAR-10 on an offline machine: the ``absent`` of :meth:`Experiment.missing`."""
    absent = set()
    for name in CHAIN_DATASETS:
        try:
            load_split(name, "test", root)
        except DatasetNotFoundError:
            absent.add(name)
    return frozenset(absent)


def dataset_of(task: ChainTask) -> str:
    """The name of the data set a task's chain trains on, as its summary names it: a data configuration's
    ``dataset``, or the ``"dataset"`` of tensors' ``info`` ("" when they name none)."""
    if isinstance(task.data, GPEDData):
        return str(task.data.info.get("dataset", ""))
    return str(getattr(task.data, "dataset", ""))


def _signature(task: ChainTask) -> dict[str, Any]:
    """The summary columns that tell a task's chain from the others (None: the column is absent or empty,
    as a summary writes ``lr_warmup`` only for students that warm up, ``num_chains`` only for a pooled teacher
    and ``cycles`` only for a cyclical schedule): a constant and a cyclical chain of one seed and length, or one
    chain and four pooled, are different chains, and so are chains of another burn-in, evaluation thinning,
    prior precision, minibatch size or matmul precision (``matmul_precision`` is written only when it is not
    ``"highest"``)."""
    sampler = task.config.sampler
    out = {"dataset": dataset_of(task), "model": task.config.model_name, "seed": task.config.seed,
           "num_iterations": task.config.num_iterations, "burn_in": task.config.burn_in,
           "eval_thinning": task.config.eval_thinning, "sampler": str(sampler.name),
           "schedule": str(sampler.schedule), "step_size": sampler.step_size,
           "prior_precision": sampler.prior_precision, "batch_size": sampler.batch_size,
           "num_chains": task.config.num_chains if task.config.num_chains > 1 else None,
           "cycles": sampler.cycles if sampler.schedule is StepSchedule.CYCLICAL else None,
           "lr_warmup": max((s.lr_warmup for s in task.students), default=0) or None,
           "matmul_precision": task.config.matmul_precision if task.config.matmul_precision != "highest" else None}
    for name in ("labelled_size", "mask_size"):
        value = getattr(task.data, name, None)
        if value is not None:
            out[name] = value
    return out


def _student_signature(student: StudentConfig) -> tuple[tuple[str, Any], ...]:
    """The columns of a student's summary row that tell it from another student of its label
    (:func:`~gped_kit.engine.evaluate.config_columns`; None: the column is empty): a student of another
    learning rate, halving period, thinning H, minibatch size M', regulariser weight, input generator,
    derivative weight or (for an architecture of the search space) width or dropout is another student."""
    out: dict[str, Any] = {
        "student": student.label, "target": student.resolved_target.name, "estimator": student.estimator.value,
        "thinning": student.thinning, "student_batch_size": student.batch_size, "lr": student.lr,
        "lr_halving_epochs": student.lr_halving_epochs, "reg_weight": student.reg_weight,
        "input_generator": student.input_generator.value, "derivative_weight": student.derivative_weight}
    if isinstance(student.arch, ArchSpec):
        out.update(student_arch=student.arch.family, k1=student.arch.k1, k2=student.arch.k2,
                   dropout=student.arch.dropout)
    return tuple(sorted(out.items()))


def _same_value(stored: Any, wanted: Any) -> bool:
    """A summary cell read back from CSV against a configuration value (None: an empty cell; floats to
    the digits a CSV keeps)."""
    if wanted is None:
        return pd.isna(stored)
    if pd.isna(stored):
        return False
    if isinstance(wanted, (int, float)) and not isinstance(wanted, bool):
        return math.isclose(float(stored), float(wanted), rel_tol=1e-12, abs_tol=0.0)
    return str(stored) == str(wanted)


def _students_match(chain: pd.DataFrame, students: frozenset[tuple]) -> bool:
    """Whether a chain's summary rows are exactly ``students`` (:func:`_student_signature` each), one row each."""
    if len(chain) != len(students):
        return False
    by_label = {row["student"]: row for row in chain.to_dict("records")}
    for student in students:
        row = by_label.get(dict(student)["student"])
        if row is None or not all(column in row and _same_value(row[column], value) for column, value in student):
            return False
    return True


def _chains_found(summaries: pd.DataFrame, signature: tuple, students: frozenset[tuple]) -> list[str]:
    """The keys of the complete chain entries among ``summaries`` (this numerics' chain summaries) with
    ``signature``'s summary columns and exactly ``students`` (:func:`_student_signature` each)."""
    rows = summaries
    for column, value in signature:
        if value is None:
            rows = rows[rows[column].isna()] if column in rows else rows
        else:
            rows = rows[rows[column] == value] if column in rows else rows.iloc[:0]
    return [key for key, chain in (rows.groupby("entry") if len(rows) else [])
            if _students_match(chain, students) and (chain["steps_done"] == dict(signature)["num_iterations"]).all()]


def _group(task: ChainTask) -> tuple[tuple, frozenset[tuple]]:
    return tuple(sorted(_signature(task).items())), frozenset(_student_signature(s) for s in task.students)


def chain_summaries(store: ResultsStore) -> pd.DataFrame:
    """The summary tables of the complete chain entries under this checkout's numerics (their keys in
    column ``entry``)."""
    return store.load("summary", "chain", code=numerics_code("chain"))


def task_chains(summaries: pd.DataFrame, tasks: Sequence[ChainTask]) -> set[str]:
    """The keys of the complete chain entries of ``tasks`` among ``summaries`` (:func:`chain_summaries`)."""
    return {key for task in tasks for key in _chains_found(summaries, *_group(task))}


def derived_rows(store: ResultsStore, kind: str, table: str, chains: set[str],
                 settings: Mapping | None = None) -> pd.DataFrame:
    """Table ``table`` of the complete ``kind`` entries under this checkout's numerics derived from one of
    the chain entries ``chains`` (a derived entry's record holds its chain's record under ``"chain"``) and,
    where ``settings`` is given, with that record of the derived step's settings (one chain may feed
    several, e.g. Experiment 3's search and its fair comparison)."""
    return store.load(table, kind, code=numerics_code(kind),
                      where=lambda e: isinstance(e.record, Mapping) and "chain" in e.record
                      and store.entry("chain", e.record["chain"]).key in chains
                      and (settings is None or e.record.get("settings") == settings))


def chain_gaps(store: ResultsStore, tasks: Sequence[ChainTask], absent: Collection[str] = ()) -> list[str]:
    """The chain tasks without a complete chain entry in ``store`` (one that ran every iteration with
    exactly the task's students) under this checkout's numerics, those whose entry was stored before its
    students reported skill (:func:`~gped_kit.experiments.chains.skill_not_stored`: a run computes it again),
    and those of data sets in ``absent`` that have one; one line each. Entries of other numerics versions (superseded,
    :mod:`~gped_kit.experiments.numerics`) count for nothing: the notebook would not read them.
    Tasks that only differ in what the summaries do not show (e.g. two SGLD samplers) need as many
    entries as there are such tasks."""
    summaries = chain_summaries(store)
    groups: dict[tuple, list[ChainTask]] = {}
    for task in tasks:
        groups.setdefault(_group(task), []).append(task)
    gaps = []
    for (signature, students), same in groups.items():
        keys = _chains_found(summaries, signature, students)
        found = len(keys)
        label = ", ".join(t.label for t in same)
        if dataset_of(same[0]) in absent:
            if found:
                gaps.append(f"{label}: its data set {dataset_of(same[0])!r} is absent here, yet a chain is stored")
            continue
        if found < len(same):
            gaps.append(f"{label}: {found} complete chain entries with its {len(students)} students, expected "
                        f"{len(same)}")
        for key in keys:
            lacking = skill_not_stored(same[0], store.by_key("chain", key))
            if lacking:
                gaps.append(f"{label}: chain {key} was stored before its students reported skill "
                            f"({', '.join(lacking)}); a run computes it again and sets the stored one aside")
    return gaps


__all__ = [
    "AfterChains", "SCALED_CHAIN", "PAPER_COLUMNS", "CHAIN_DATASETS", "Experiment", "Summary", "ProfilesBeside",
    "batch_command", "check_executor", "grid_missing", "derived_missing", "first_chain_missing", "read_chains",
    "chain_seconds", "failed_lines", "side_by_side", "absent_datasets", "dataset_of", "chain_summaries",
    "task_chains", "derived_rows", "chain_gaps",
]
