"""Each notebook's summary tables for any profile, through one code path, and other profiles beside them.

A notebook's main section calls its summary function (:func:`experiment1_summary` for notebook 01,
:func:`experiment2_summary` for 02, :func:`experiment3_summary` for 05, :func:`experiment4_summary`
for 06, :func:`comparison_summary` for 07, :func:`sampler_summary` for 10) with its own profile's
settings; its section "Other profiles in the store" calls the same function for the profiles of
:data:`SHOWN_PROFILES` with ``executor="stored"``
(:class:`~gped_kit.experiments.executors.StoredOnly`), which reads back what the results store
holds and computes nothing: a notebook run with one profile never starts another profile's chains.

A :class:`Summary` holds the run (what the main section reads further: a chain grid, the searches,
the Experiment 4 evaluations, ...), its named tables, and the results the store lacks
(``missing``, one line each; empty for a run that computed). :func:`stored_profiles` reads the other
profiles of a notebook with the overrides of its run (what its settings change in its own profile,
so a scratch run with tiny chains reads the other profile's tiny chains), and :class:`ProfilesBeside`
puts every profile the store holds into one table (:func:`side_by_side`), with one line per profile
it lacks saying how to make it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from . import comparison as C
from . import experiment3, experiment4, experiment12, paper_tables, samplers
from .chains import ChainGrid, DerivedOutcome, run_chains
from .executors import ExecutorName
from .registry import notebook as registry_notebook
from .settings import changed_settings
from .store import ResultsStore

#: The status of a result that ``executor="stored"`` did not find in the store.
NOT_STORED = "not stored"

#: Per notebook, the profiles its section "Other profiles in the store" shows, in the order shown
#: (the notebook's own profile takes its place among them, or comes first when not listed). The
#: ``seeds`` profiles give every claim count over three seeds (issue 27 item 5), ``long`` the strong
#: teachers (issue 28), ``pooling`` the pooled and cyclical teachers (issue 33 item 3), ``cpu30``
#: Table 1 on a CPU in 30 minutes (issue 33 item 4).
SHOWN_PROFILES: dict[str, tuple[str, ...]] = {
    "01_experiment1": ("default", "cpu30"),
    "02_experiment2_mnist": ("default", "seeds"),
    "05_experiment3_search": ("default", "long"),
    "06_experiment4_uncertainty": ("default", "long", "seeds"),
    "07_hydra_comparison": ("default", "long"),
    "10_samplers": ("default", "pooling"),
}


def batch_command(notebook: str, profile: str) -> str:
    """The command that runs ``notebook`` with ``profile`` into the results store."""
    return f"python -m gped_kit.cli.batch --profile {profile} {notebook}"


# ----------------------------------------------------------------------------- a profile's summary
@dataclass
class Summary:
    """One notebook's results under one profile: ``run`` (what the notebook reads further), the named
    ``tables`` and the results the store lacks (``missing``, one line each; only with
    ``executor="stored"``, which stops at the first chain when that one is missing: ``run`` is then
    None and ``tables`` empty)."""

    notebook: str
    profile: str
    settings: Any
    run: Any
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

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


def _check_executor(executor: Any, recompute: bool) -> bool:
    """Whether ``executor`` is ``"stored"``; recomputing would set stored entries aside, so it is refused."""
    stored = isinstance(executor, str) and executor == ExecutorName.STORED.value
    if stored and recompute:
        raise ValueError("executor='stored' reads the store only: it cannot be combined with recompute=True")
    return stored


def _grid_missing(grid: ChainGrid) -> list[str]:
    return [f"{o.task.label}: chain {NOT_STORED}" for o in grid.outcomes if o.status == NOT_STORED]


def _derived_missing(outcomes: Iterable[DerivedOutcome], kind: str) -> list[str]:
    return [f"{o.chain.task.label}: {kind} {NOT_STORED}" for o in outcomes if o.status == NOT_STORED]


def _first_chain_missing(tasks: Sequence[Any], store: ResultsStore) -> list[str]:
    """The first task's chain read alone from the store: its line when it is not stored (a profile never
    run is then reported after one read instead of one per chain), else nothing."""
    return _grid_missing(run_chains(list(tasks[:1]), store, executor=ExecutorName.STORED.value, progress=False))


def _read_chains(tasks: Sequence[Any], store: ResultsStore, executor: str, recompute: bool, progress: bool,
                 chains_per_batch: int = 1) -> tuple[ChainGrid | None, list[str]]:
    """The tasks' chains run, resumed or reused (:func:`~gped_kit.experiments.chains.run_chains`), or with
    ``executor="stored"`` read back, and the lines of those not stored (no grid when the first is not)."""
    if _check_executor(executor, recompute) and (missing := _first_chain_missing(tasks, store)):
        return None, missing
    grid = run_chains(tasks, store, recompute=recompute, chains_per_batch=chains_per_batch, executor=executor,
                      progress=progress)
    return grid, _grid_missing(grid)


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


# ----------------------------------------------------------------------------- notebook 01: Table 1
def experiment1_summary(store: ResultsStore, settings: experiment12.Experiment2Settings, models: Sequence[str], *,
                        profile: str = "default", seed: int = 0, device: str = "auto", data_root: str | None = None,
                        executor: str = "local", recompute: bool = False, progress: bool = True) -> Summary:
    """Notebook 01 (Table 1, paper Section 4.2): Experiment 1's chains
    (:func:`~gped_kit.experiments.experiment12.experiment1_tasks`) run, reused or (``executor="stored"``)
    read back; ``run`` is the :class:`~gped_kit.experiments.chains.ChainGrid`. Tables: ``table1``
    (:func:`~gped_kit.experiments.experiment12.experiment1_table` for ``models``) and ``run_time``
    (:func:`chain_seconds`)."""
    tasks = experiment12.experiment1_tasks(models, settings, seed=seed, device=device, data_root=data_root)
    grid, missing = _read_chains(tasks, store, executor, recompute, progress, settings.chains_per_batch)
    if grid is None:
        return Summary("01_experiment1", profile, settings, None, {}, missing)
    table1 = experiment12.experiment1_table(grid.table)
    table1 = table1[table1["model"].isin(models)]
    return Summary("01_experiment1", profile, settings, grid, {"table1": table1, "run_time": chain_seconds(grid)},
                   missing)


#: Label of the paper's rows in :func:`table1_by_profile`.
PAPER_TABLE1 = "paper (T = 10^6)"


def table1_by_profile(summaries: Mapping[str, Summary]) -> pd.DataFrame:
    """Table 1 of every profile stacked (column ``profile``), then the paper's (``profile`` =
    :data:`PAPER_TABLE1`): per model with a run, the seeds, each quantity's mean and standard deviation
    over seeds and its ratio to the paper's (``<quantity> / paper``), and the chains' measured
    computing time (``seconds``, all seeds together)."""
    metrics = list(experiment12.TABLE1_METRICS)
    parts: dict[str, pd.DataFrame] = {}
    models: list[str] = []
    for profile, s in summaries.items():
        t = s.tables["table1"]
        t = t.dropna(subset=["teacher_nll"]) if "teacher_nll" in t else t.iloc[:0].reindex(columns=["model", "seeds"])
        rows = t[["model", "seeds"]].copy()
        for m in metrics:
            rows[m] = t.get(m)
            rows[f"{m}_std"] = t.get(f"{m}_std")
            rows[f"{m} / paper"] = t[m] / t[f"{m}_paper"] if m in t else None
        run_time = s.tables["run_time"].set_index("model")["seconds"] if len(s.tables["run_time"]) else \
            pd.Series(dtype=float)
        rows["seconds"] = rows["model"].map(run_time)
        parts[profile] = rows.reset_index(drop=True)
        models += [m for m in rows["model"] if m not in models]
    paper = paper_tables.table1().set_index("model").reindex(models)[metrics].reset_index()
    parts[PAPER_TABLE1] = paper
    return side_by_side(parts)


def run_time_line(summaries: Mapping[str, Summary]) -> str:
    """One line: every profile's chains' measured computing time, all models and seeds together
    (:func:`chain_seconds`; issue 33 asks Table 1's CPU profile to take at most 30 minutes)."""
    parts = []
    for profile, s in summaries.items():
        seconds = float(s.tables["run_time"]["seconds"].sum()) if len(s.tables["run_time"]) else float("nan")
        chains = int(s.tables["run_time"]["chains"].sum()) if len(s.tables["run_time"]) else 0
        parts.append(f"{profile} {seconds / 60:.1f} min ({chains} chain{'s' if chains != 1 else ''})")
    return ("The chains' measured computing time, every model and seed together, as their store entries record it: "
            + "; ".join(parts) + ".")


# ----------------------------------------------------------------------------- notebook 02: Experiment 2
def experiment2_summary(store: ResultsStore, settings: experiment12.Experiment2Settings, models: Sequence[str], *,
                        profile: str = "default", seed: int = 0, device: str = "auto", data_root: str | None = None,
                        executor: str = "local", recompute: bool = False, progress: bool = True) -> Summary:
    """Notebook 02 (Experiment 2 on MNIST, paper Section 4.2 and Appendix B.1): the grid's chains
    (:func:`~gped_kit.experiments.experiment12.experiment2_tasks`, one per seed of the profile); ``run``
    is the grid. Tables: ``cells`` (:func:`~gped_kit.experiments.experiment12.experiment2_cells`, the mean
    over seeds), ``trends`` (each trend counted on ours and on the paper's cells, with the count per
    seed: :func:`~gped_kit.experiments.experiment12.experiment2_trend_comparison`) and ``trend_cells``
    (every comparison: :func:`~gped_kit.experiments.experiment12.experiment2_trend_cells_compared`)."""
    tasks = experiment12.experiment2_tasks(models, settings, seed=seed, device=device, data_root=data_root)
    grid, missing = _read_chains(tasks, store, executor, recompute, progress, settings.chains_per_batch)
    if grid is None:
        return Summary("02_experiment2_mnist", profile, settings, None, {}, missing)
    table = grid.table
    tables = {"cells": experiment12.experiment2_cells(table)}
    if not missing:
        tables["trends"] = experiment12.experiment2_trend_comparison(table)
        tables["trend_cells"] = experiment12.experiment2_trend_cells_compared(table)
    return Summary("02_experiment2_mnist", profile, settings, grid, tables, missing)


#: The columns of a claims table that are the paper's (equal in every profile that runs the same cells).
PAPER_COLUMNS = ("paper", "paper_statement")


# ----------------------------------------------------------------------------- notebook 05: Experiment 3
@dataclass
class SearchRun:
    """Notebook 05's searches: the :class:`~gped_kit.experiments.experiment3.SearchResult` of each model
    (by model) and our search beside the paper's statements per (model, metric)
    (:func:`~gped_kit.experiments.experiment3.experiment3_comparison`)."""

    results: dict[str, experiment3.SearchResult]
    comparisons: dict[tuple[str, str], pd.DataFrame]

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        """The search table of every model with results."""
        return {model: res.table for model, res in self.results.items() if len(res.table)}


def experiment3_comparisons(tables: Mapping[str, pd.DataFrame]) -> dict[tuple[str, str], pd.DataFrame]:
    """:func:`~gped_kit.experiments.experiment3.experiment3_comparison` for every model's search table
    and every metric of :data:`~gped_kit.experiments.experiment3.METRICS` that a searched student of
    its target has (Figures 2, 6-13), by (model, metric)."""
    out = {}
    for model, table in tables.items():
        for metric in experiment3.METRICS:
            cands = experiment3.search_candidates(table)
            if metric not in cands or cands[cands["target"] == experiment3.METRIC_TARGET[metric]][metric].isna().all():
                continue
            out[(model, metric)] = experiment3.experiment3_comparison(table, model, metric)
    return out


def experiment3_summary(store: ResultsStore, settings: experiment3.Experiment3Settings, *, profile: str = "default",
                        seed: int = 0, device: str = "auto", data_root: str | None = None, executor: str = "local",
                        recompute: bool = False, progress: bool = True) -> Summary:
    """Notebook 05 (Experiment 3, paper Section 3.3; Figures 2, 6-13): every model's chain and search
    (:func:`~gped_kit.experiments.experiment3.run_searches`); ``run`` is a :class:`SearchRun`.
    Table ``comparison``: every (model, metric) of :func:`experiment3_comparisons`, stacked."""
    stored = _check_executor(executor, recompute)
    tasks = {model: experiment3.experiment3_task(model, settings, seed=seed, device=device, data_root=data_root)
             for model in settings.models}
    if stored and (missing := _first_chain_missing(list(tasks.values()), store)):
        return Summary("05_experiment3_search", profile, settings, None, {}, missing)
    found = experiment3.run_searches(list(tasks.values()), settings.search_settings(seed), store, recompute=recompute,
                                     progress=progress, executor=executor)
    results = dict(zip(tasks, found))
    missing = [f"{tasks[m].label}: search {NOT_STORED}" for m, r in results.items() if r.status == NOT_STORED]
    run = SearchRun(results, experiment3_comparisons({m: r.table for m, r in results.items() if len(r.table)}))
    frames = list(run.comparisons.values())
    tables = {"comparison": pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["figure", "model", "metric", "quantity", "ours", "paper", "note"])}
    return Summary("05_experiment3_search", profile, settings, run, tables, missing)


# ----------------------------------------------------------------------------- notebook 06: Experiment 4
def teacher_summary(downstream: pd.DataFrame) -> pd.DataFrame:
    """Notebook 06's teacher lines per (metric, model, uncertainty, OOD inputs, method) for the test NLL
    and the OOD AUROC (:func:`~gped_kit.experiments.experiment4.experiment4_teacher_lines`): the
    ensemble's value (mean over seeds and sets), how many student values, the lowest and highest, and
    the range of student minus teacher."""
    teacher = experiment4.experiment4_teacher_lines(downstream)
    keys = ["metric", "model", "uncertainty", "ood_inputs", "method"]
    return (teacher[teacher["metric"].isin(["nll", "auroc"])].fillna({"uncertainty": "—", "ood_inputs": "—"})
            .groupby(keys, sort=False)
            .agg(teacher=("teacher", "mean"), students=("value", "size"), lowest=("value", "min"),
                 highest=("value", "max"), minus_teacher_min=("minus_teacher", "min"),
                 minus_teacher_max=("minus_teacher", "max"))
            .reset_index())


def teacher_quality(downstream: pd.DataFrame) -> pd.DataFrame:
    """The teacher ensemble's own test NLL and accuracy per model (mean over seeds, with the seeds'
    range), beside the paper's ensemble NLL (Table 2, same setting) and their ratio."""
    columns = ["model", "metric", "teacher", "lowest", "highest", "seeds", "paper", "teacher / paper"]
    if downstream.empty or "metric" not in downstream:
        return pd.DataFrame(columns=columns)
    rows = downstream[(downstream["method"] == "Ensemble") & downstream["metric"].isin(["nll", "accuracy"])]
    if "seed" not in rows:
        rows = rows.assign(seed=0)
    per_seed = rows.groupby(["model", "metric", "seed"], sort=False)["value"].mean().reset_index()
    out = (per_seed.groupby(["model", "metric"], sort=False)
           .agg(teacher=("value", "mean"), lowest=("value", "min"), highest=("value", "max"), seeds=("seed", "size"))
           .reset_index())
    paper = paper_tables.experiment4_in_distribution()
    paper = paper[paper["method"] == "Ensemble"].groupby(["model", "metric"])["value"].first()
    out["paper"] = [paper.get((m, k), float("nan")) for m, k in zip(out["model"], out["metric"])]
    out["teacher / paper"] = out["teacher"] / out["paper"]
    return out[columns]


def experiment4_summary(store: ResultsStore, settings: experiment4.Experiment4Settings, models: Sequence[str], *,
                        profile: str = "default", seed: int = 0, device: str = "auto", data_root: str | None = None,
                        executor: str = "local", recompute: bool = False, progress: bool = True) -> Summary:
    """Notebook 06 (Experiment 4, paper Section 4; Appendices A.3, A.4, B.3): every chain's evaluation
    (:func:`~gped_kit.experiments.experiment4.run_experiment4`, one chain per seed and model); ``run`` is
    the :class:`~gped_kit.experiments.experiment4.Experiment4Run`. Tables: ``claims``
    (:func:`~gped_kit.experiments.experiment4.experiment4_claims`: ours, the paper's, agreement per cell,
    the count per seed), ``teacher`` (:func:`teacher_summary`) and ``teacher_quality``
    (:func:`teacher_quality`)."""
    stored = _check_executor(executor, recompute)
    tasks = experiment4.experiment4_tasks(models, settings, seed=seed, device=device, data_root=data_root)
    if stored and (missing := _first_chain_missing(tasks, store)):
        return Summary("06_experiment4_uncertainty", profile, settings, None, {}, missing)
    run = experiment4.run_experiment4(tasks, store, settings, seed=seed, recompute=recompute, progress=progress,
                                      executor=executor)
    missing = _derived_missing(run.evaluations, "evaluation")
    downstream = run.downstream
    tables = {"claims": experiment4.experiment4_claims(downstream), "teacher": teacher_summary(downstream),
              "teacher_quality": teacher_quality(downstream)}
    return Summary("06_experiment4_uncertainty", profile, settings, run, tables, missing)


# ----------------------------------------------------------------------------- notebook 07: the comparison
@dataclass
class ComparisonRuns:
    """Notebook 07's two stored runs: the MNIST comparison and the spiral (None when not stored)."""

    mnist: C.ComparisonRun | None
    spiral: C.SpiralRun | None


def mu_mae(table: pd.DataFrame, method: str, eval_set: str, ref: str) -> float:
    """A method's mean |MU - MU_ref| on ``eval_set`` against ``ref`` (``"snapshots"`` or ``"teacher"``)
    from a comparison table (:func:`~gped_kit.experiments.comparison.comparison_table`); NaN without the row."""
    row = table[(table["method"] == method) & (table["eval_set"] == eval_set)]
    return float(row[f"mu_mae_{ref}"].iloc[0]) if len(row) else float("nan")


#: Notebook 07's claims, in the order its checks print them, with what the papers report.
COMPARISON_CLAIMS = (
    ("Hydra's MU is the closest to its snapshot ensemble's", "on MNIST test, shifted and rotated; Prior Networks "
     "closest on Fashion-MNIST (Hydra paper, Table 1)"),
    ("GPED's MU is the closest to the long-chain teacher's", "not reported"),
    ("Hydra within 1 point of its snapshot ensemble's test accuracy", "True (Hydra paper, Table 2)"),
    ("Hydra's MU closer to the snapshot ensemble than EnD2's on the MNIST test set", "True (Hydra paper, Table 1)"),
    ("pure-noise distillation inputs give a worse student than resampled D'", "True (the thesis)"),
    ("spiral: Hydra's MU map closer to its snapshots than GPED's and EnD2's", "not reported"),
    ("GPED's MU closer to the teacher's than predicting zero on the MNIST test set", "not reported"),
)


def comparison_claims(table: pd.DataFrame, kd: pd.DataFrame, spiral: pd.DataFrame) -> pd.DataFrame:
    """Notebook 07's claims on the MNIST comparison ``table``, its KD students ``kd``
    (:func:`~gped_kit.experiments.comparison.kd_variants`) and the spiral's table: one row per claim of
    :data:`COMPARISON_CLAIMS` with ``ours`` (``"k of n"`` for the evaluation sets where a method's MU
    is the closest, with ``sets`` naming them; True/False for the others) and ``paper`` (what the Hydra
    paper or the thesis reports)."""
    sets = list(dict.fromkeys(table["eval_set"]))
    hydra_best = [s for s in sets if mu_mae(table, "Hydra", s, "snapshots") < min(
        mu_mae(table, "GPED", s, "snapshots"), mu_mae(table, "EnD2", s, "snapshots"))]
    gped_best = [s for s in sets if mu_mae(table, "GPED", s, "teacher") < min(
        mu_mae(table, "Hydra", s, "teacher"), mu_mae(table, "EnD2", s, "teacher"))]
    acc = table[table["eval_set"] == "test"].set_index("method")["accuracy"]
    kd_nll = kd.set_index("student")["student_nll"]
    gped_test = table[(table["eval_set"] == "test") & (table["method"] == "GPED")]["mu_mae_teacher"]
    ours = [
        (f"{len(hydra_best)} of {len(sets)}", str(hydra_best)),
        (f"{len(gped_best)} of {len(sets)}", str(gped_best)),
        (bool(abs(acc["Hydra"] - acc["Snapshot ensemble"]) < 0.01), ""),
        (bool(mu_mae(table, "Hydra", "test", "snapshots") < mu_mae(table, "EnD2", "test", "snapshots")), ""),
        (bool(kd_nll["KD (noise inputs)"] > kd_nll["KD"]), ""),
        (bool(mu_mae(spiral, "Hydra", "grid", "snapshots") < min(mu_mae(spiral, "GPED", "grid", "snapshots"),
                                                                 mu_mae(spiral, "EnD2", "grid", "snapshots"))), ""),
        (bool(len(gped_test) and gped_test.iloc[0] < mu_mae(table, C.ZERO_MU, "test", "teacher")), ""),
    ]
    return pd.DataFrame([{"claim": claim, "ours": value, "sets": where, "paper": paper}
                         for (claim, paper), (value, where) in zip(COMPARISON_CLAIMS, ours)])


#: The test-set columns of every method that notebook 07's profiles are compared on.
COMPARISON_TEST_COLUMNS = ("method", "accuracy", "nll", "brier", "mu_mean", "mu_mae_snapshots", "mu_mae_teacher")


def comparison_summary(store: ResultsStore, settings: C.ComparisonSettings, *, profile: str = "default", seed: int = 0,
                       device: str = "auto", data_root: str | None = None, executor: str = "local",
                       recompute: bool = False, progress: bool = True, task: Any = None) -> Summary:
    """Notebook 07 (the Hydra paper's Tables 1, 2 and 5 on one posterior): the MNIST comparison
    (:func:`~gped_kit.experiments.comparison.run_comparison`, ``task`` as there) and the spiral
    (:func:`~gped_kit.experiments.comparison.spiral_run`); ``run`` is a :class:`ComparisonRuns`. With
    ``executor="stored"`` a run the store lacks is None and listed in ``missing``; otherwise a failure
    raises as those functions do. Tables (when both are there): ``test`` (every method on the MNIST
    test set: :data:`COMPARISON_TEST_COLUMNS`) and ``claims`` (:func:`comparison_claims`)."""
    stored = _check_executor(executor, recompute)
    kwargs = {"seed": seed, "device": device, "recompute": recompute, "progress": progress, "executor": executor}
    runs: dict[str, Any] = {}
    missing = []
    for name, run in (("comparison", lambda: C.run_comparison(settings, store, data_root=data_root, task=task,
                                                              **kwargs)),
                      ("spiral", lambda: C.spiral_run(settings, store, **kwargs))):
        try:
            runs[name] = run()
        except RuntimeError as exc:  # run_comparison / spiral_run raise unless their entry is there
            if not (stored and f": {NOT_STORED}:" in str(exc)):
                raise
            runs[name] = None
            missing.append(f"{str(exc).split(': ')[0]}: {NOT_STORED}")
    out, spiral = runs["comparison"], runs["spiral"]
    tables = {}
    if out is not None and spiral is not None:
        table = out.table
        tables["test"] = table[table["eval_set"] == "test"][list(COMPARISON_TEST_COLUMNS)].reset_index(drop=True)
        tables["claims"] = comparison_claims(table, out.kd_variants, spiral.table)
    return Summary("07_hydra_comparison", profile, settings, ComparisonRuns(out, spiral), tables, missing)


# ----------------------------------------------------------------------------- notebook 10: samplers
def sampler_summary(store: ResultsStore, settings: samplers.SamplerStudySettings, *, profile: str = "default",
                    device: str = "auto", data_root: str | None = None, executor: str = "local",
                    recompute: bool = False, progress: bool = True) -> Summary:
    """Notebook 10 (which teacher sampler gets closest to Table 1 at equal work): one chain per
    (seed, candidate) (:func:`~gped_kit.experiments.samplers.sampler_study_tasks`); ``run`` is the grid.
    Tables, when every chain finished: ``history`` (:func:`~gped_kit.experiments.samplers.study_history`),
    ``table`` (:func:`~gped_kit.experiments.samplers.study_table`: each candidate's last values, mean over
    seeds, beside the paper's) and ``winners`` (:func:`~gped_kit.experiments.samplers.study_winners`:
    the lowest candidate per quantity and whether the seeds separate it)."""
    tasks = samplers.sampler_study_tasks(settings, device=device, data_root=data_root)
    grid, missing = _read_chains(tasks, store, executor, recompute, progress)
    tables = {}
    if grid is not None and not missing and not len(grid.failed):
        history = samplers.study_history(grid.results, tasks)
        tables = {"history": history, "table": samplers.study_table(history, settings.model),
                  "winners": samplers.study_winners(history)}
    return Summary("10_samplers", profile, settings, grid, tables, missing)


#: Label of the paper's row in :func:`sampler_table_by_profile`.
PAPER_SAMPLER = "paper, T = 10^6 (Table 1)"


def sampler_table_by_profile(summaries: Mapping[str, Summary]) -> pd.DataFrame:
    """Every profile's candidates (:func:`~gped_kit.experiments.samplers.study_table`) stacked, with a
    column ``profile``, then the paper's Table 1 row."""
    parts = {profile: s.tables["table"] for profile, s in summaries.items()}
    model = next(iter(summaries.values())).settings.model if summaries else "fcnn"
    parts[PAPER_SAMPLER] = pd.DataFrame([{"candidate": PAPER_SAMPLER, **samplers.paper_row(model)}])
    return side_by_side(parts)


# ----------------------------------------------------------------------------- profiles side by side
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


def stored_profiles(summarise: Callable[..., Summary], current: Summary, profiles: Sequence[str] | None = None,
                    **parameters: Any) -> ProfilesBeside:
    """The other profiles of ``current.notebook`` (``profiles``, default :data:`SHOWN_PROFILES`), read
    from the store beside ``current`` (this run's summary).

    Each profile's settings are the notebook's (:meth:`~gped_kit.experiments.registry.Notebook.settings`)
    with this run's overrides, i.e. what this run's settings change in its own profile
    (:func:`~gped_kit.experiments.settings.changed_settings`: a run with tiny chains reads the other
    profile's tiny chains; a run without overrides reads the profile as it is; a setting this run
    gives its own profile's value is no override, so it is not carried over).
    ``summarise(settings=..., profile=..., executor="stored", progress=False, **parameters)`` reads its
    results without computing anything. A profile whose results are all stored joins ``summaries``;
    the others give one line each (also a profile whose settings or chains this run's overrides make
    invalid, e.g. a warm-up longer than the burn-in they set)."""
    order = list(profiles if profiles is not None else SHOWN_PROFILES.get(current.notebook, ()))
    if current.profile not in order:
        order.insert(0, current.profile)
    entry = registry_notebook(current.notebook)
    overrides = changed_settings(current.settings, entry.settings(current.profile))
    summaries: dict[str, Summary] = {}
    lines: list[str] = []
    for name in order:
        if name == current.profile:
            summaries[name] = current
            continue
        try:
            settings = entry.settings(name, overrides)
            entry.chain_tasks(settings)  # the chains' configurations are checked before anything is read
        except (TypeError, ValueError) as exc:
            lines.append(f"Profile {name!r}: its settings do not take this run's overrides ({exc}).")
            continue
        summary = summarise(settings=settings, profile=name, executor=ExecutorName.STORED.value, progress=False,
                            **parameters)
        if summary.complete:
            summaries[name] = summary
            lines += failed_lines(summary)
        else:
            lines.append(summary.missing_line())
    return ProfilesBeside(summaries, lines)


def failed_lines(summary: Summary) -> list[str]:
    """One line per chain of ``summary``'s grid that failed (e.g. a stored pooled teacher with a collapsed
    chain, :mod:`~gped_kit.experiments.collapse`): the profile, the cell and the error's first sentence;
    the profile's tables leave such a chain out."""
    failed = getattr(summary.run, "failed", None)
    if failed is None or not len(failed):
        return []
    return [f"Profile {summary.profile!r}: {row.cell} failed and is left out of its tables: "
            f"{str(row.error).split('. ')[0].split(': ', 1)[-1]}." for row in failed.itertuples()]


__all__ = [
    "NOT_STORED", "SHOWN_PROFILES", "PAPER_COLUMNS", "PAPER_TABLE1", "PAPER_SAMPLER", "COMPARISON_CLAIMS",
    "COMPARISON_TEST_COLUMNS", "Summary", "SearchRun", "ComparisonRuns", "ProfilesBeside", "batch_command",
    "chain_seconds", "experiment1_summary", "table1_by_profile", "run_time_line", "experiment2_summary",
    "experiment3_comparisons",
    "experiment3_summary", "teacher_summary", "teacher_quality", "experiment4_summary", "mu_mae",
    "comparison_claims", "comparison_summary", "sampler_summary", "sampler_table_by_profile", "side_by_side",
    "stored_profiles", "failed_lines",
]
