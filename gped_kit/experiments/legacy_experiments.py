"""Experiment plumbing shared by the notebooks: profiles, and a results store keyed by configuration.

**Profiles.** Each notebook has a ``profile`` parameter (``"default"``: CPU-sized settings that
run in minutes; ``"paper"``: the paper's Appendix A.2 settings, for a GPU) and one parameter per
setting whose stored value is ``None``, meaning "take it from the profile". Any of them can be
overridden one by one (papermill ``-p``, the batch runner, or by editing the cell):
:func:`resolve_parameters` merges the two.

**Results store.** :func:`run_stored` runs one chain with its students in
``results_dir/<key>/``, where ``key`` is a hash of the run's full configuration
(:meth:`GPEDRun.fingerprint`). The directory holds the checkpoint, ``config.json``,
``summary.csv`` (one tidy row per student) and ``history.csv``. Running the same configuration
again resumes an interrupted run from its checkpoint, or returns the finished result without
recomputing; ``recompute=True`` moves the old directory aside (timestamped) and starts afresh,
so nothing is lost.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from . import metrics, uncertainty
from .data import OOD_SETS, DataConfig, DatasetNotFoundError, ExperimentData, ood_available, prepare_data
from .distill import GPEDConfig, GPEDResult, GPEDRun, StudentConfig, resolve_device
from .models import ArchSpec
from .samplers import SGLDConfig

QUICKSTART_PROFILES: dict[str, dict[str, Any]] = {
    # CPU, a few minutes: short chain, students updated every 2 teacher steps so they see
    # enough minibatches in 5,000 iterations.
    "default": dict(num_iterations=5_000, burn_in=1_000, predictive_thinning=2, entropy_thinning=2,
                    eval_thinning=100, log_every=500, checkpoint_every=1_000),
    # Appendix A.2: T = 10^6, B = 1,000, H = 100 (predictive) / 10 (entropy).
    "paper": dict(num_iterations=1_000_000, burn_in=1_000, predictive_thinning=100, entropy_thinning=10,
                  eval_thinning=100, log_every=10_000, checkpoint_every=50_000),
}


def resolve_parameters(profiles: Mapping[str, Mapping[str, Any]], profile: str,
                       overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The profile's settings with every non-None override applied; unknown names are errors."""
    if profile not in profiles:
        raise ValueError(f"profile={profile!r} is not known; allowed: {sorted(profiles)}")
    params = dict(profiles[profile])
    unknown = sorted(set(overrides) - set(params))
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for these profiles; allowed: {sorted(params)}")
    params.update({k: v for k, v in overrides.items() if v is not None})
    return params


# Appendix A.2, per teacher family: data set, SGLD step eta, burn-in B, student dropout, and
# the number of teacher epochs after which the student's Adam learning rate is halved.
PAPER_SETTINGS: dict[str, dict[str, Any]] = {
    "fcnn": dict(dataset="mnist", step_size=4e-6, burn_in=1_000, student_dropout=0.5, lr_halving_epochs=200),
    "cnn_mnist": dict(dataset="mnist", step_size=4e-6, burn_in=1_000, student_dropout=0.0, lr_halving_epochs=200),
    "cnn_cifar10": dict(dataset="cifar10", step_size=2e-6, burn_in=10_000, student_dropout=0.0, lr_halving_epochs=400),
}
PRIOR_PRECISION = 10.0  # tau, Appendix A.2
FULL_TRAINING_SIZE = {"mnist": 60_000, "cifar10": 50_000}

# Experiments 1 and 2. "default": a reduced grid and short chains for a 2-core CPU: a longer
# burn-in (B = 3,000 of T = 5,000), students updated every 2 iterations so they see enough
# minibatches, and the step size scaled as eta = eta_paper * N_full / N so that eta * N (the
# SGD-like part of Eq. 7) is the paper's at every |D| and short chains on small D converge
# (the posterior does not depend on eta; only mixing speed and discretisation bias do).
# "paper": Appendix A.2 and the full grids of Section 4 (T = 10^6; fixed eta; H = 100
# predictive, 10 entropy), for a GPU, with the grid's chains run 24 at a time as one batched
# computation (gped_kit.batched; on the 2-core CPU batching gains nothing, so "default" runs
# them one by one).
EXPERIMENT2_PROFILES: dict[str, dict[str, Any]] = {
    "default": dict(num_iterations=5_000, burn_in=3_000, predictive_thinning=2, entropy_thinning=2,
                    eval_thinning=50, log_every=500, checkpoint_every=1_000, scale_step_size=True,
                    labelled_sizes=[10_000, 60_000], mask_sizes=[0, 15, 20, 25],
                    cifar_labelled_sizes=[10_000, 50_000], lr_check_masks=[15], chains_per_batch=1),
    "paper": dict(num_iterations=1_000_000, burn_in=None, predictive_thinning=100, entropy_thinning=10,
                  eval_thinning=100, log_every=10_000, checkpoint_every=50_000, scale_step_size=False,
                  labelled_sizes=[10_000, 20_000, 30_000, 60_000], mask_sizes=[0, 5, 10, 15, 20, 25],
                  cifar_labelled_sizes=[10_000, 20_000, 50_000], lr_check_masks=[], chains_per_batch=24),
}
#: T of the paper's chains (Appendix A.2).
PAPER_NUM_ITERATIONS = 1_000_000


@dataclass(frozen=True)
class GridCell:
    """One chain of an experiment grid and the students it feeds."""

    data: DataConfig
    config: GPEDConfig
    students: tuple[StudentConfig, ...]

    @property
    def label(self) -> str:
        return (f"{self.config.model} N={self.data.labelled_size} m={self.data.mask_size} "
                f"seed={self.config.seed}")


def distillation_cell(model: str, labelled_size: int, mask_size: int, params: Mapping[str, Any],
                      seed: int = 0, device: str = "auto", data_root: str | None = None,
                      targets: Sequence[str] = ("predictive", "entropy"),
                      estimators: Sequence[str] = ("U_s", "U_o"), verify_checksums: bool = True,
                      lr_halving_scale: float = 1.0) -> GridCell:
    """The Experiment 1/2 cell for ``model`` on (|D|, m): one SGLD chain with the paper's settings
    for that model, feeding one student per (target, estimator), all with the teacher's
    architecture. ``params`` supplies the profile's chain length and thinning (see
    :data:`EXPERIMENT2_PROFILES`); a ``burn_in`` of None takes the paper's B for the model.
    ``lr_halving_scale`` multiplies the paper's student lr-halving period (200 or 400 teacher
    epochs; see :func:`paper_shaped_lr_scale`). Experiments 1 and 2 build cells with this
    function, so they share stored runs."""
    if not (lr_halving_scale > 0 and math.isfinite(lr_halving_scale)):
        raise ValueError(f"lr_halving_scale={lr_halving_scale!r}: must be finite and > 0")
    if model not in PAPER_SETTINGS:
        raise ValueError(f"model={model!r} is not known; allowed: {sorted(PAPER_SETTINGS)}")
    paper = PAPER_SETTINGS[model]
    data = DataConfig(paper["dataset"], labelled_size=labelled_size, mask_size=mask_size, seed=seed,
                      root=data_root, verify_checksums=verify_checksums)
    config = teacher_config(model, labelled_size, params, seed, device)
    thinning = {"predictive": params["predictive_thinning"], "entropy": params["entropy_thinning"]}
    students = tuple(
        StudentConfig(target=target, estimator=estimator, thinning=thinning.get(target, params["predictive_thinning"]),
                      arch=ArchSpec(model, dropout=paper["student_dropout"]),
                      lr_halving_epochs=paper["lr_halving_epochs"] * lr_halving_scale)
        for target in targets for estimator in estimators)
    return GridCell(data, config, students)


def paper_shaped_lr_scale(model: str, params: Mapping[str, Any]) -> float:
    """The factor that gives a shortened chain the paper's student learning-rate schedule *shape*:
    as many halvings over its T - B distillation steps as the paper's schedule makes over its
    T - B = 10^6 - B (8.3 at N = 60k, 50 at N = 10k for MNIST), i.e.
    ``(T - B) / (T_paper - B_paper)``.

    Why it matters: the paper halves the student's rate every 200 teacher epochs of the
    *labelled* set, so a student distilled from a chain on N = 10k decays six times faster
    (in teacher steps) than one on N = 60k and stops learning after a fraction of the chain.
    """
    paper = PAPER_SETTINGS[model]
    burn_in = params.get("burn_in") or paper["burn_in"]
    return (params["num_iterations"] - burn_in) / (PAPER_NUM_ITERATIONS - paper["burn_in"])


def lr_schedule_cells(model: str, params: Mapping[str, Any], seed: int = 0, device: str = "auto",
                      data_root: str | None = None) -> list[GridCell]:
    """Experiment 2 cells (|D| in ``labelled_sizes`` x m in ``lr_check_masks``) whose predictive
    students follow the paper-shaped schedule (:func:`paper_shaped_lr_scale`): the check of
    whether the paper's "gap falls with more labelled data" comes from its student schedule."""
    scale = paper_shaped_lr_scale(model, params)
    return [distillation_cell(model, n, m, params, seed=seed, device=device, data_root=data_root,
                              targets=("predictive",), lr_halving_scale=scale)
            for n in params["labelled_sizes"] for m in params["lr_check_masks"]]


def gap_by_schedule(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Student - teacher NLL gap per (schedule, model, m, estimator) at every |D|, and whether it
    falls from the smallest to the largest |D|. ``tables`` maps a schedule name to per-student
    Experiment 2 rows (``GridResult.table``); only the (model, m) cells present in *every* table
    are compared. ``halvings_at_<N>`` is the number of lr halvings the schedule makes over the
    chain's distillation steps at that |D| (0 for a constant rate; the paper's: 49 at N = 10k and
    8 at N = 60k)."""
    cells = {name: experiment2_cells(table) for name, table in tables.items()}
    common = set.intersection(*(set(zip(c["model"], c["mask_size"])) for c in cells.values()))

    def in_common(df: pd.DataFrame) -> pd.Series:
        return pd.Series([(mo, m) in common for mo, m in zip(df["model"], df["mask_size"])], index=df.index)

    frames = []
    for name, table in tables.items():
        c = cells[name]
        c = c[in_common(c)]
        wide = c.pivot_table(index=["model", "mask_size", "estimator"], columns="labelled_size", values="nll_gap")
        sizes = sorted(wide.columns)
        wide.columns = [f"gap_at_{n}" for n in sizes]
        wide["gap_falls_with_more_data"] = wide[f"gap_at_{sizes[-1]}"] < wide[f"gap_at_{sizes[0]}"]
        pred = table[(table["target"] == "predictive") & in_common(table)]
        for n in sizes:
            row = pred[pred["labelled_size"] == n].iloc[0]
            epochs = row["lr_halving_epochs"]
            span = row["num_iterations"] - row["burn_in"]
            wide[f"halvings_at_{n}"] = 0 if pd.isna(epochs) else math.floor(span / (epochs * n / row["batch_size"]))
        frames.append(wide.reset_index().assign(schedule=name))
    out = pd.concat(frames, ignore_index=True)
    return out[["schedule", *[c for c in out.columns if c != "schedule"]]]


def teacher_config(model: str, labelled_size: int, params: Mapping[str, Any], seed: int = 0,
                   device: str = "auto") -> GPEDConfig:
    """The teacher chain of ``model`` with Appendix A.2's settings (eta, tau = 10, M = 100, B)
    and the profile's chain length, evaluation and logging (``params``); a ``burn_in`` of None
    takes the paper's B; ``scale_step_size`` keeps eta * N at the full-data value."""
    if model not in PAPER_SETTINGS:
        raise ValueError(f"model={model!r} is not known; allowed: {sorted(PAPER_SETTINGS)}")
    paper = PAPER_SETTINGS[model]
    step_size = params.get("step_size") or paper["step_size"]
    if params.get("scale_step_size"):
        # keep eta * N (the SGD-like step on the mean NLL, Eq. 7) at its value for the full set
        step_size *= FULL_TRAINING_SIZE[paper["dataset"]] / labelled_size
    return GPEDConfig(
        model=model, sgld=SGLDConfig(step_size=step_size, prior_precision=PRIOR_PRECISION, batch_size=100),
        num_iterations=params["num_iterations"], burn_in=params.get("burn_in") or paper["burn_in"],
        eval_thinning=params["eval_thinning"], log_every=params["log_every"],
        checkpoint_every=params["checkpoint_every"], seed=seed, device=device)


@dataclass
class GridResult:
    """All students' summary rows of a grid (config + metric columns, ``cell`` and ``status``)
    and one status row per cell (``ran``/``resumed``/``reused``/``failed``/``missing data``).
    ``extras`` holds what a grid's ``evaluate`` callback returned, concatenated over cells by name."""

    table: pd.DataFrame
    cells: pd.DataFrame
    extras: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def failed(self) -> pd.DataFrame:
        return self.cells[self.cells["status"] == "failed"]

    def raise_if_failed(self) -> None:
        if len(self.failed):
            raise RuntimeError(f"{len(self.failed)} grid cell(s) failed:\n"
                               + self.failed[["cell", "error"]].to_string(index=False))


Evaluate = Callable[[GridCell, GPEDResult], Mapping[str, pd.DataFrame]]


def run_grid(cells: Sequence[GridCell], results_dir: str | Path, recompute: bool = False,
             progress: bool = True, evaluate: Evaluate | None = None, chains_per_batch: int = 1) -> GridResult:
    """Run every cell (one chain each) through the results store, in order.

    Finished cells are reloaded, interrupted ones resume from their checkpoints. A cell that
    fails (e.g. a diverging chain) is recorded and the grid goes on; one whose data set is
    absent is recorded as ``missing data`` with the loader's message. ``evaluate(cell,
    result)``, if given, turns a finished cell's result (with its test and OOD tensors) into
    named tables; each is written as ``<name>.csv`` beside the cell's ``summary.csv`` and
    collected in :attr:`GridResult.extras`.

    ``chains_per_batch`` K > 1 runs up to K consecutive unfinished cells that can share one
    computation (:func:`gped_kit.batched.check_batchable`: same model, T, students, ...; at the
    same step) as one batched computation (:class:`gped_kit.batched.BatchedGPED`), for a GPU;
    the others run one by one. It changes how the chains are computed, not what: a cell's key,
    store and checkpoints are the same either way (results agree up to round-off, and dropout
    masks differ). A batch that fails marks each of its cells failed.
    """
    if not (isinstance(chains_per_batch, int) and chains_per_batch >= 1):
        raise ValueError(f"chains_per_batch={chains_per_batch!r}: must be an integer >= 1")
    outcomes: dict[int, tuple[str, object, float, str]] = {}  # index -> (status, result | error, seconds, how)

    def stored_run(cell: GridCell) -> tuple[GPEDRun, Path]:
        data = prepare_data(cell.data, device=resolve_device(cell.config.device))
        config = cell.config if progress else dataclasses.replace(cell.config, progress=False)
        run = GPEDRun(data, config, cell.students)
        return run, _open_store(run, results_dir, recompute)

    def record(i: int, started: float, result: object = None, error: BaseException | None = None,
               how: str = "") -> None:
        seconds = round(time.perf_counter() - started, 1)
        if isinstance(error, DatasetNotFoundError):
            outcomes[i] = ("missing data", str(error), seconds, how)
        elif error is not None:
            outcomes[i] = ("failed", f"{type(error).__name__}: {error}", seconds, how)
        else:
            outcomes[i] = (result.summary["store_status"].iloc[0], result, seconds, how)
        status, detail, _, _ = outcomes[i]
        if progress:
            print(f"[{i + 1}/{len(cells)}] {cells[i].label}: {status} ({seconds} s{how})"
                  + (f" -- {detail.splitlines()[0]}" if isinstance(detail, str) else ""), flush=True)

    def run_alone(i: int, run: GPEDRun | None = None, checkpoint: Path | None = None) -> None:
        started = time.perf_counter()
        try:
            if run is None:
                run, checkpoint = stored_run(cells[i])
            record(i, started, _close_store(run, run.run(checkpoint=checkpoint), checkpoint.parent))
        except Exception as exc:  # noqa: BLE001 -- recorded, the grid goes on
            record(i, started, error=exc)

    def run_together(batch: list[tuple[int, GPEDRun, Path]]) -> None:
        from .batched import BatchedGPED

        if len(batch) == 1:
            run_alone(*batch[0])
            return
        started = time.perf_counter()
        how = f", one of {len(batch)} chains batched"
        try:
            runs, paths = [b[1] for b in batch], [b[2] for b in batch]
            results = BatchedGPED(runs).run(checkpoints=paths)
            for (i, run, path), result in zip(batch, results):
                record(i, started, _close_store(run, result, path.parent), how=how)
        except Exception as exc:  # noqa: BLE001 -- recorded, the grid goes on
            for i, _, _ in batch:
                record(i, started, error=exc, how=how)

    if chains_per_batch == 1:
        for i in range(len(cells)):
            run_alone(i)
    else:
        from .batched import check_batchable

        batch: list[tuple[int, GPEDRun, Path]] = []
        for i, cell in enumerate(cells):
            started = time.perf_counter()
            try:
                run, checkpoint = stored_run(cell)
                if checkpoint.exists():
                    run.load_checkpoint(checkpoint)  # its step decides which chains it can join
            except Exception as exc:  # noqa: BLE001
                record(i, started, error=exc)
                continue
            if run.t >= run.config.num_iterations:  # finished: reload it alone
                run_alone(i, run, checkpoint)
                continue
            candidate = batch + [(i, run, checkpoint)]
            try:
                check_batchable([b[1] for b in candidate])
                fits = len(candidate) <= chains_per_batch
            except ValueError:
                fits = False
            if fits:
                batch = candidate
            else:
                if batch:
                    run_together(batch)
                batch = [(i, run, checkpoint)]
        if batch:
            run_together(batch)

    rows, status_rows, extras = [], [], {}
    for i, cell in enumerate(cells):
        status, detail, seconds, how = outcomes[i]
        entry = {"cell": cell.label, "model": cell.config.model, "labelled_size": cell.data.labelled_size,
                 "mask_size": cell.data.mask_size, "status": status, "error": "", "seconds": seconds,
                 "batched": bool(how)}
        if isinstance(detail, str):
            entry["error"] = detail
        else:
            result = detail
            rows.append(result.summary.assign(cell=cell.label))
            if evaluate is not None:
                run_dir = Path(results_dir) / result.summary["run_key"].iloc[0]
                try:
                    for name, frame in evaluate(cell, result).items():
                        frame = frame.assign(cell=cell.label, run_key=run_dir.name)
                        frame.to_csv(run_dir / f"{name}.csv", index=False)
                        extras.setdefault(name, []).append(frame)
                except Exception as exc:  # noqa: BLE001 -- recorded, the grid goes on
                    entry.update(status="failed", error=f"evaluate: {type(exc).__name__}: {exc}")
        status_rows.append(entry)
    table = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    return GridResult(table, pd.DataFrame(status_rows),
                      {name: pd.concat(frames, ignore_index=True) for name, frames in extras.items()})


def experiment2_wide(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, |D|, m) with the Tables 5-7 columns: teacher NLL, student NLL and
    entropy MAE for U_o and U_s (predictive students give the NLLs, entropy students the MAEs)."""
    if table.empty:
        return table
    keys = ["model", "labelled_size", "mask_size", "masking_rate"]
    pred = table[table["target"] == "predictive"].pivot_table(index=keys, columns="estimator", values="student_nll")
    ent = table[table["target"] == "entropy"].pivot_table(index=keys, columns="estimator", values="entropy_mae")
    teacher = table.groupby(keys)["teacher_nll"].first()
    wide = pd.concat([teacher, pred.add_prefix("student_nll_"), ent.add_prefix("entropy_mae_")], axis=1)
    return wide.reset_index()


#: One row of :func:`experiment2_cells` per combination of these columns.
CELL_COLUMNS = ("model", "labelled_size", "mask_size", "masking_rate", "estimator")
#: Columns the per-student results table must have (besides at least one metric column).
REQUIRED_COLUMNS = (*CELL_COLUMNS, "target", "teacher_nll")
#: Metric columns; a missing one is read as all-NaN, but at least one must be present.
METRIC_COLUMNS = ("nll_gap", "entropy_mae")
def experiment2_cells(results: pd.DataFrame, dataset: str | None = None) -> pd.DataFrame:
    """Collapse per-student Experiment 2 rows to one row per (model, N, m, r, estimator).

    ``results`` is what :func:`gped_kit.experiments.load_results` returns: one row per
    (chain, student) with the columns of :data:`REQUIRED_COLUMNS` and ``nll_gap`` and/or
    ``entropy_mae`` (``student_nll`` optional). Within one chain (``run_key``; without that
    column every cell counts as one chain), ``nll_gap`` and ``student_nll`` are taken from the
    ``target == "predictive"`` student of the estimator and ``entropy_mae`` from its
    ``target == "entropy"`` student; ``teacher_nll`` is the chain's. Several students of the same target and estimator in one chain, and several chains of one
    cell (e.g. seeds), are averaged; ``n_runs`` counts the chains. A metric whose student is
    absent is NaN. Rows of other targets are ignored.

    Args:
        results: per-student rows; an empty frame (no stored runs) gives an empty table.
        dataset: if given and ``results`` has a ``dataset`` column, keep only that data set.

    Returns:
        Columns ``model, labelled_size, mask_size, masking_rate, estimator, teacher_nll,
        student_nll, nll_gap, entropy_mae, n_runs``, sorted by model, estimator, N and m.

    Raises:
        TypeError: ``results`` is not a DataFrame.
        ValueError: required columns are missing (named in the message).
    """
    out_cols = [*CELL_COLUMNS, "teacher_nll", "student_nll", *METRIC_COLUMNS, "n_runs"]
    if not isinstance(results, pd.DataFrame):
        raise TypeError(f"results must be a pandas DataFrame, got {type(results).__name__}")
    if results.empty and len(results.columns) == 0:
        return pd.DataFrame(columns=out_cols)
    missing = [c for c in REQUIRED_COLUMNS if c not in results.columns]
    if not any(c in results.columns for c in METRIC_COLUMNS):
        missing.append(" or ".join(METRIC_COLUMNS))
    if missing:
        raise ValueError(f"results lack the required column(s) {missing}; Experiment 2 results need "
                         f"{list(REQUIRED_COLUMNS)} and at least one of {list(METRIC_COLUMNS)} "
                         f"(one row per student, as written by gped_kit.experiments.run_stored)")
    df = results.copy()
    for col in ("student_nll", *METRIC_COLUMNS):
        if col not in df.columns:
            df[col] = math.nan
    if dataset is not None and "dataset" in df.columns:
        df = df[df["dataset"].astype(str).str.lower() == str(dataset).lower()]
    if "run_key" not in df.columns:
        df["run_key"] = "_cell"
    df = df[df["target"].isin(("predictive", "entropy"))]
    if df.empty:
        return pd.DataFrame(columns=out_cols)
    chain_keys = [*CELL_COLUMNS, "run_key"]
    teacher = df.groupby(chain_keys, dropna=False)["teacher_nll"].mean()
    pred = df[df["target"] == "predictive"].groupby(chain_keys, dropna=False)[["student_nll", "nll_gap"]].mean()
    mae = df[df["target"] == "entropy"].groupby(chain_keys, dropna=False)["entropy_mae"].mean()
    per_chain = pd.concat([teacher, pred, mae], axis=1).reset_index()
    table = (per_chain.groupby(list(CELL_COLUMNS), dropna=False)
             .agg(teacher_nll=("teacher_nll", "mean"), student_nll=("student_nll", "mean"),
                  nll_gap=("nll_gap", "mean"),
                  entropy_mae=("entropy_mae", "mean"), n_runs=("run_key", "nunique"))
             .reset_index())
    table["labelled_size"] = table["labelled_size"].astype(int)
    table["mask_size"] = table["mask_size"].astype(int)
    return table.sort_values(["model", "estimator", "labelled_size", "mask_size"]).reset_index(drop=True)[out_cols]


def experiment2_trends(cells: pd.DataFrame) -> pd.DataFrame:
    """Check the trends the paper reports for Experiment 2 (Section 4.2) on a table from
    :func:`experiment2_cells` (one row per model, |D|, m, estimator).

    Returns one row per (model, trend) with ``holds`` (in a majority of the comparisons),
    ``count`` ("k of n" comparisons that agree) and the paper's statement. Trends:
    teacher NLL falls with more data (per m) and rises with masking (per |D|); the
    student-teacher NLL gap falls with more data (per m) and peaks at a moderate masking rate
    (per |D| and estimator: the largest gap is at neither the smallest nor the largest m);
    the same peak for the entropy MAE; U_o at least as good as U_s (per cell, NLL and MAE).
    Comparisons need at least two sizes / three mask sizes; otherwise the trend is NaN.
    """
    rows = []
    for model, df in cells.groupby("model"):
        teacher = df.groupby(["labelled_size", "mask_size"])["teacher_nll"].first().unstack()  # N x m
        gap = df.pivot_table(index=["estimator", "labelled_size"], columns="mask_size", values="nll_gap")
        mae = df.pivot_table(index=["estimator", "labelled_size"], columns="mask_size", values="entropy_mae")
        sizes, masks = list(teacher.index), list(teacher.columns)

        def record(trend: str, paper: str, outcomes: list[bool]) -> None:
            k, n = sum(outcomes), len(outcomes)
            rows.append({"model": model, "trend": trend, "holds": (k > n / 2) if n else math.nan,
                         "count": f"{k} of {n}", "paper": paper})

        more_data = len(sizes) > 1
        record("teacher NLL falls with more labelled data", "yes, for every masking rate",
               [teacher.loc[sizes[-1], m] < teacher.loc[sizes[0], m] for m in masks] if more_data else [])
        record("teacher NLL rises with masking", "yes, steeply",
               [bool(teacher.loc[n].is_monotonic_increasing) for n in sizes] if len(masks) > 1 else [])
        record("NLL gap falls with more labelled data", "yes, for every masking rate",
               [gap.loc[(e, sizes[-1]), m] < gap.loc[(e, sizes[0]), m] for e in gap.index.levels[0]
                for m in masks if (e, sizes[0]) in gap.index] if more_data else [])
        for name, table, paper in (("NLL gap peaks at moderate masking", gap, "yes (hardest at r = 0.29-0.51)"),
                                   ("entropy MAE peaks at moderate masking", mae, "yes, the same trend")):
            record(name, paper, [table.loc[i].idxmax() not in (masks[0], masks[-1]) for i in table.index
                                 if table.loc[i].notna().all()] if len(masks) > 2 else [])
        both = df.pivot_table(index=["labelled_size", "mask_size"], columns="estimator",
                              values=["nll_gap", "entropy_mae"])
        outcomes = []
        if {"U_o", "U_s"} <= set(df["estimator"]):
            for metric in ("nll_gap", "entropy_mae"):
                pair = both[metric].dropna()
                outcomes += list(pair["U_o"] <= pair["U_s"])
        record("U_o at least as good as U_s", "almost always", outcomes)
    return pd.DataFrame(rows)


def experiment1_table(table: pd.DataFrame) -> pd.DataFrame:
    """Table 1 from a grid's student rows: per model, the teacher NLL, the predictive student's
    NLL (U_s, as in the paper's Table 1) and the entropy student's MAE (U_o), beside the
    paper's numbers (columns ending in ``_paper``)."""
    from .paper_results import table1

    paper = table1().set_index("model")[["teacher_nll", "student_nll", "entropy_mae"]].add_suffix("_paper")
    if table.empty:
        return paper.reset_index()
    pred = table[(table["target"] == "predictive") & (table["estimator"] == "U_s")].set_index("model")
    ent = table[(table["target"] == "entropy") & (table["estimator"] == "U_o")].set_index("model")
    ours = pd.DataFrame({"teacher_nll": pred["teacher_nll"], "student_nll": pred["student_nll"],
                         "teacher_accuracy": pred["teacher_accuracy"], "student_accuracy": pred["student_accuracy"],
                         "entropy_mae": ent["entropy_mae"]})
    out = ours.join(paper, how="outer")
    return out[["teacher_nll", "teacher_nll_paper", "student_nll", "student_nll_paper", "entropy_mae",
                "entropy_mae_paper", "teacher_accuracy", "student_accuracy"]].reset_index()


def experiment2_comparison(table: pd.DataFrame, model: str) -> pd.DataFrame:
    """Tables 5-7 for ``model``: our U_o/U_s numbers per (|D|, m) beside the paper's (``_paper``).
    Joined on (|D|, m); the paper prints rounded masking rates, we keep the exact m^2/(H W)."""
    from .paper_results import experiment2_table

    columns = ["teacher_nll", "student_nll_U_o", "student_nll_U_s", "entropy_mae_U_o", "entropy_mae_U_s"]
    paper = experiment2_table(model).set_index(["labelled_size", "mask_size"])[columns].add_suffix("_paper")
    cells = experiment2_cells(table)
    cells = cells[cells["model"] == model]
    wide = cells.pivot_table(index=["labelled_size", "mask_size", "masking_rate"], columns="estimator",
                             values=["student_nll", "entropy_mae"])
    wide.columns = [f"{metric}_{est}" for metric, est in wide.columns]
    wide = wide.join(cells.groupby(["labelled_size", "mask_size", "masking_rate"])["teacher_nll"].first())
    wide = wide.reset_index("masking_rate")
    out = wide.join(paper, how="left")
    ordered = ["masking_rate"] + [c for col in columns for c in (col, f"{col}_paper") if c in out]
    return out[ordered].reset_index()


def run_key(run: GPEDRun) -> str:
    """A short, stable hash of the run's full configuration."""
    return hashlib.sha256(run.fingerprint().encode()).hexdigest()[:12]


def run_stored(data: ExperimentData, config: GPEDConfig, students: Sequence[StudentConfig],
               results_dir: str | Path, recompute: bool = False) -> GPEDResult:
    """Run (or resume, or reload) one chain and its students in the results store."""
    run = GPEDRun(data, config, students)
    checkpoint = _open_store(run, results_dir, recompute)
    return _close_store(run, run.run(checkpoint=checkpoint), checkpoint.parent)


def _open_store(run: GPEDRun, results_dir: str | Path, recompute: bool) -> Path:
    """The run's store directory ``results_dir/<key>/`` (an old one set aside first when
    ``recompute``), with its ``config.json`` written; returns the checkpoint path in it."""
    key = run_key(run)
    run_dir = Path(results_dir) / key
    if recompute and run_dir.exists():
        run_dir.rename(run_dir.with_name(f"{key}.old-{time.strftime('%Y%m%d-%H%M%S')}"))
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(json.loads(run.fingerprint()), indent=2, sort_keys=True))
    return run_dir / "checkpoint.pt"


def _close_store(run: GPEDRun, result: GPEDResult, run_dir: Path) -> GPEDResult:
    """Write a finished (or stopped) run's ``summary.csv`` and ``history.csv`` with its status."""
    if run.resumed_from is None:
        status = "ran"
    else:
        status = "reused" if run.resumed_from >= run.config.num_iterations else "resumed"
    result.summary["run_key"] = run_dir.name
    result.summary["store_status"] = status
    result.summary.to_csv(run_dir / "summary.csv", index=False)
    result.history.assign(run_key=run_dir.name).to_csv(run_dir / "history.csv", index=False)
    return result


def load_results(results_dir: str | Path, table: str = "summary") -> pd.DataFrame:
    """All stored runs' ``summary`` (or ``history``, or a table an ``evaluate`` callback wrote,
    e.g. ``downstream``) rows under ``results_dir``, concatenated."""
    stored = {f.stem for f in Path(results_dir).glob("*/*.csv") if ".old-" not in f.parent.name}
    if not (isinstance(table, str) and table.isidentifier()) or table not in stored | {"summary", "history"}:
        raise ValueError(f"table={table!r}: allowed {sorted(stored | {'summary', 'history'})}")
    files = sorted(Path(results_dir).glob(f"*/{table}.csv"))
    files = [f for f in files if ".old-" not in f.parent.name]
    if not files:
        return pd.DataFrame()
    return pd.concat([pd.read_csv(f) for f in files], ignore_index=True)


# ------------------------------------------------------------------------------ Experiment 4
# Appendix A.4: the setting of Experiment 3 (MNIST: |D| = 60,000 at masking rate 0.29, m = 15;
# CIFAR-10: |D| = 20,000, no masking), a base student (the teacher's architecture) and the
# largest width-multiplier student, each as a GPED C+1 student (predictive + expected entropy;
# the entropy column always with U_o) and as an EnD2 prior network (Eq. 11), with U_s and U_o.
# EnD2's training temperature is FIXED at T = 2.5 (Appendix A.4; not annealed as Malinin et al.
# suggest: the paper found a fixed temperature gave better NLL; targets.ENDD_TEMPERATURE).
# Thinning: the paper uses H = 100 for predictive targets and H = 10 for entropy targets, but the
# C+1 student distils both through one network and one update, so every Experiment 4 student
# (GPED and EnD2 alike) uses the single profile value ``thinning`` (default 2, paper profile 10,
# the entropy value, so the entropy column gets the paper's update rate).
# "default": short chains for a 2-core CPU; "paper": T = 10^6 for a GPU. The paper
# does not state its largest multipliers; K1 = K2 = 2 is our choice in both profiles.
EXPERIMENT4_PROFILES: dict[str, dict[str, Any]] = {
    "default": dict(num_iterations=3_000, burn_in=1_000, thinning=2, eval_thinning=50, log_every=500,
                    checkpoint_every=1_000, labelled_size=60_000, mask_size=15, cifar_labelled_size=20_000,
                    largest_k=[2.0, 2.0], ood_size=None, ndcg_trials=500),
    "paper": dict(num_iterations=1_000_000, burn_in=None, thinning=10, eval_thinning=100, log_every=10_000,
                  checkpoint_every=50_000, labelled_size=60_000, mask_size=15, cifar_labelled_size=20_000,
                  largest_k=[2.0, 2.0], ood_size=None, ndcg_trials=500),
}
#: OOD test sets per in-distribution data set (Section 4, Experiment 4; Fashion-MNIST added:
#: it is the one available offline here, and Hydra's paper uses it for MNIST).
OOD_FOR = {"mnist": ("fashion_mnist", "kmnist", "notmnist"), "cifar10": ("svhn", "tinyimagenet", "lsun")}
ENDD_DROPOUT = {"fcnn": 0.5, "cnn_mnist": 0.3, "cnn_cifar10": 0.3}  # Appendix A.4
STUDENT_SIZES = ("base", "largest_width_multiplier")  # the paper's names (Tables 2-4, 8-16)


def ood_availability(dataset: str, data_root: str | None = None) -> pd.DataFrame:
    """Which of the OOD sets for ``dataset`` are present under the data root, and how to get the others."""
    return pd.DataFrame([{"ood_dataset": name, "available": ood_available(name, data_root),
                          "how to get it": OOD_SETS[name].source} for name in OOD_FOR[dataset]])


def experiment4_cell(model: str, params: Mapping[str, Any], seed: int = 0, device: str = "auto",
                     data_root: str | None = None, verify_checksums: bool = True) -> GridCell:
    """One Experiment 4 chain: ``model``'s teacher on the Experiment 3 setting, feeding 8 students
    (GPED / EnD2 x U_s / U_o x base / largest width multiplier), with every available OOD set
    of :data:`OOD_FOR` evaluated alongside the test set.

    Student names are ``<method>-<estimator>-<size>`` with the paper's labels; the GPED "U_s"
    student runs the ``U_s+U_o`` estimator (U_s on the predictive, U_o on the entropy column).
    """
    if model not in PAPER_SETTINGS:
        raise ValueError(f"model={model!r} is not known; allowed: {sorted(PAPER_SETTINGS)}")
    paper = PAPER_SETTINGS[model]
    mnist = paper["dataset"] == "mnist"
    n = params["labelled_size"] if mnist else params["cifar_labelled_size"]
    k1, k2 = params["largest_k"]
    ood = tuple(name for name in OOD_FOR[paper["dataset"]] if ood_available(name, data_root))
    data = DataConfig(paper["dataset"], labelled_size=n, mask_size=params["mask_size"] if mnist else 0, seed=seed,
                      root=data_root, verify_checksums=verify_checksums, ood_datasets=ood,
                      ood_size=params["ood_size"])
    students = []
    for size, (a, b) in zip(STUDENT_SIZES, ((1.0, 1.0), (k1, k2))):
        for estimator, engine_estimator in (("U_s", "U_s+U_o"), ("U_o", "U_o")):
            students.append(StudentConfig(
                "predictive+entropy", engine_estimator, arch=ArchSpec(model, a, b, dropout=paper["student_dropout"]),
                thinning=params["thinning"], lr_halving_epochs=paper["lr_halving_epochs"],
                name=f"GPED-{estimator}-{size}"))
            students.append(StudentConfig(
                "endd", estimator, arch=ArchSpec(model, a, b, dropout=ENDD_DROPOUT[model]),
                thinning=params["thinning"], lr_halving_epochs=paper["lr_halving_epochs"],
                name=f"EnD2-{estimator}-{size}"))
    return GridCell(data, teacher_config(model, n, params, seed, device), tuple(students))


def _student_keys(label: str) -> dict[str, str]:
    method, estimator, size = label.split("-", 2)
    return {"method": method, "estimator": estimator, "student": size}


def experiment4_uncertainties(result: GPEDResult, num_classes: int, eval_set: str = "test"
                              ) -> dict[str, uncertainty.Uncertainties]:
    """Per-input uncertainties on the test set (or an OOD set) of the teacher ensemble
    (``"Ensemble"``) and of every GPED/EnD2 student (by label), from a run's tensors."""
    teacher = result.teacher_test if eval_set == "test" else result.teacher_ood[eval_set]
    students = result.student_test if eval_set == "test" else result.student_ood[eval_set]
    t = teacher["predictive+entropy"]
    out = {"Ensemble": uncertainty.from_moments(t[:, :num_classes], t[:, num_classes])}
    for label, output in students.items():
        target = "endd" if label.startswith("EnD2") else "predictive+entropy"
        out[label] = uncertainty.from_student_output(target, output, num_classes)
    return out


def experiment4_evaluate(cell: GridCell, result: GPEDResult, ndcg_trials: int = 500,
                         seed: int = 0) -> dict[str, pd.DataFrame]:
    """The downstream metrics of one Experiment 4 chain, as one tidy table ``downstream``.

    Rows: in-distribution ``nll`` and ``accuracy`` (Ensemble and students; from the run's
    summary) and ``entropy_mae`` (students: mean |E[H] student - E[H] ensemble|); per OOD set
    and uncertainty (total, knowledge) the ``auroc`` (:func:`gped_kit.metrics.ood_auroc`, OOD
    = positives); per uncertainty the ``ndcg@20`` of each student's ranking against the
    ensemble's (:func:`gped_kit.metrics.ndcg_trials`, mean and ``std`` over trials). A second
    table ``data_uncertainty`` has one row per test input with the expected data uncertainty
    E[H] of the ensemble and of each largest-width student (Figure 15).
    """
    summary = result.summary.set_index("student")
    c = int(next(iter(result.student_test.values())).shape[1]) - 1
    base = {"model": cell.config.model, "dataset": cell.data.dataset, "labelled_size": cell.data.labelled_size,
            "mask_size": cell.data.mask_size, "masking_rate": float(summary["masking_rate"].iloc[0])}
    rows = []

    def add(who: str, metric: str, value: float, **extra) -> None:
        keys = ({"method": "Ensemble", "estimator": None, "student": None} if who == "Ensemble"
                else _student_keys(who))
        rows.append({**base, **keys, "metric": metric, "value": float(value), **extra})

    first = summary.iloc[0]
    add("Ensemble", "nll", first["teacher_nll"])
    add("Ensemble", "accuracy", first["teacher_accuracy"])
    test = experiment4_uncertainties(result, c)
    for label in result.student_test:
        add(label, "nll", summary.loc[label, "student_nll"])
        add(label, "accuracy", summary.loc[label, "student_accuracy"])
        add(label, "entropy_mae", metrics.mae(test[label].data, test["Ensemble"].data))
        for kind in ("total", "knowledge"):
            scores = metrics.ndcg_trials(test["Ensemble"].get(kind), test[label].get(kind), k=20,
                                         subset_size=100, trials=ndcg_trials, seed=seed)
            add(label, "ndcg@20", scores.mean(), std=float(scores.std()), uncertainty=kind)
    for ood_name in result.teacher_ood:
        ood = experiment4_uncertainties(result, c, ood_name)
        for who, u in ood.items():
            for kind in ("total", "knowledge"):
                add(who, "auroc", metrics.ood_auroc(test[who].get(kind), u.get(kind)), uncertainty=kind,
                    ood_dataset=ood_name)
    # Figure 15's data: the expected data uncertainty per test input, largest students
    per_input = pd.DataFrame({"model": base["model"], "input": range(len(test["Ensemble"].data)),
                              **{who: u.data.numpy().round(4) for who, u in test.items()
                                 if who == "Ensemble" or who.endswith(STUDENT_SIZES[1])}})
    return {"downstream": pd.DataFrame(rows), "data_uncertainty": per_input}


_EXP4_KEYS = {"in_distribution": ["model", "method", "estimator", "student", "metric"],
              "ood": ["model", "ood_dataset", "uncertainty", "method", "estimator", "student", "metric"],
              "ndcg": ["model", "uncertainty", "method", "estimator", "student", "metric"]}


def experiment4_comparison(downstream: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Our Experiment 4 numbers beside the paper's (``value_paper``, ``std_paper``, ``table``).

    ``kind``: ``"in_distribution"`` (Tables 2, 8-10: NLL, accuracy, entropy MAE),
    ``"ood"`` (Tables 3, 11-13: AUROC) or ``"ndcg"`` (Tables 4, 14-16). Every printed cell of
    those tables is kept. Our rows come first (``source == "ours"``, sorted by the keys; the
    paper's value where the paper has that cell, else NaN, e.g. our Fashion-MNIST OOD rows and
    accuracies); then the paper's cells we have no run for (``source == "paper only"``, in the
    paper's order, with ``value``/``std`` NaN: the KMNIST, notMNIST, TinyImageNet and LSUN rows
    when those sets are absent here, and all CIFAR-10 rows while CIFAR-10 is). The Ensemble's
    in-distribution and OOD rows are repeated for each estimator and student size the paper
    prints them with. ``downstream`` may be empty: then the result is the paper's tables alone.
    """
    from . import paper_results

    if kind not in _EXP4_KEYS:
        raise ValueError(f"kind={kind!r} is not known; allowed: {sorted(_EXP4_KEYS)}")
    paper = {"in_distribution": paper_results.experiment4_in_distribution, "ood": paper_results.experiment4_ood,
             "ndcg": paper_results.experiment4_ndcg}[kind]()
    metric = {"in_distribution": ["nll", "accuracy", "entropy_mae"], "ood": ["auroc"], "ndcg": ["ndcg@20"]}[kind]
    keys = _EXP4_KEYS[kind]
    ours = downstream[downstream["metric"].isin(metric)].copy()
    if kind == "ndcg":
        ours = ours[ours["method"] != "Ensemble"]
    ens = ours["method"] == "Ensemble"
    if ens.any():  # the paper repeats the ensemble in every (estimator, student) table
        combos = ours.loc[~ens, ["estimator", "student"]].drop_duplicates()
        repeated = ours[ens].drop(columns=["estimator", "student"]).merge(combos, how="cross")
        ours = pd.concat([ours[~ens], repeated], ignore_index=True)
    cols = ["value", "std"] if kind == "ndcg" else ["value"]
    ours = ours.reindex(columns=keys + cols)  # a key absent from downstream (e.g. no OOD set ran) is NaN
    for key in keys:  # object keys, so that empty or all-NaN key columns still match the paper's strings
        ours[key] = ours[key].astype(object)
    for c in cols:
        ours[c] = pd.to_numeric(ours[c], errors="coerce").astype(float)
    paper = paper[keys + cols + ["table"]].rename(columns={c: f"{c}_paper" for c in cols})
    ours_part = ours.merge(paper, on=keys, how="left").sort_values(keys).assign(source="ours")
    ours_keys = pd.MultiIndex.from_frame(ours[keys]) if len(ours) else pd.MultiIndex.from_tuples([], names=keys)
    paper_only = paper[~pd.MultiIndex.from_frame(paper[keys]).isin(ours_keys)]
    paper_only = paper_only.assign(**{c: float("nan") for c in cols}, source="paper only")
    columns = keys + cols + [f"{c}_paper" for c in cols] + ["table", "source"]
    parts = [part[columns] for part in (ours_part, paper_only) if len(part)]
    if not parts:
        return pd.DataFrame(columns=columns)
    return pd.concat(parts, ignore_index=True)


def experiment4_claims(downstream: pd.DataFrame) -> pd.DataFrame:
    """The paper's Experiment 4 claims checked on our numbers, one row per claim: GPED beats
    EnD2 on NLL and on entropy MAE in every setting ("consistently performs better across all
    metrics"), in AUROC ("75% of cases") and in nDCG@20 ("91% of settings")."""
    rows = []
    keys = ["model", "estimator", "student"]
    for metric, extra, better, paper in (("nll", [], "lower", "GPED better in every setting (Tables 2, 8-10)"),
                                         ("entropy_mae", [], "lower", "GPED better in every setting"),
                                         ("auroc", ["ood_dataset", "uncertainty"], "higher", "GPED better in 75% of cases"),
                                         ("ndcg@20", ["uncertainty"], "higher", "GPED better in 91% of settings")):
        df = downstream[(downstream["metric"] == metric) & downstream["method"].isin(["GPED", "EnD2"])]
        if df.empty:
            continue
        wide = df.pivot_table(index=keys + extra, columns="method", values="value").dropna()
        wins = (wide["GPED"] < wide["EnD2"]) if better == "lower" else (wide["GPED"] > wide["EnD2"])
        rows.append({"claim": f"GPED {better} {metric} than EnD2", "ours": f"{int(wins.sum())} of {len(wins)}",
                     "fraction": float(wins.mean()), "paper": paper})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------ Beyond GPED (issue 6)
# One teacher chain, distilled by: plain knowledge distillation of the predictive (Bayesian
# Dark Knowledge, "KD"), GPED's C+1 student (predictive + expected entropy), EnD2, and Hydra
# (one head per kept posterior snapshot, trained after the chain from the snapshots' cached
# outputs on D'). Three more KD students show the thesis' input generator (resampled D',
# perturbed D', pure noise) and derivative matching. "default": a 2-core CPU in minutes
# (S = 20 snapshots); "paper": Hydra's MNIST setting as far as it maps onto an SGLD teacher
# (S = 50 snapshots, T = 10^6).
COMPARISON_PROFILES: dict[str, dict[str, Any]] = {
    "default": dict(model="fcnn", labelled_size=60_000, mask_size=0, num_iterations=4_000, burn_in=1_000,
                    thinning=2, eval_thinning=50, log_every=500, checkpoint_every=1_000, num_snapshots=20,
                    perturb_std=0.3, derivative_weight=1.0, hydra_head_hidden=[100, 100], hydra_temperature=2.0,
                    hydra_phase1_steps=1_000, hydra_phase2_steps=2_000, hydra_lr=1e-3,
                    spiral_size=1_000, spiral_iterations=6_000, spiral_burn_in=2_000, spiral_step_size=2e-4,
                    spiral_snapshots=10, spiral_thinning=2, spiral_hydra_phase1_steps=1_000,
                    spiral_hydra_phase2_steps=2_000),
    "paper": dict(model="fcnn", labelled_size=60_000, mask_size=0, num_iterations=1_000_000, burn_in=None,
                  thinning=10, eval_thinning=100, log_every=10_000, checkpoint_every=50_000, num_snapshots=50,
                  perturb_std=0.3, derivative_weight=1.0, hydra_head_hidden=[100, 100], hydra_temperature=2.0,
                  hydra_phase1_steps=20_000, hydra_phase2_steps=60_000, hydra_lr=1e-3,
                  spiral_size=1_000, spiral_iterations=100_000, spiral_burn_in=10_000, spiral_step_size=2e-4,
                  spiral_snapshots=10, spiral_thinning=2, spiral_hydra_phase1_steps=5_000,
                  spiral_hydra_phase2_steps=20_000),
}
#: Evaluation sets of the MNIST comparison: the MNIST test set rotated by 60 degrees (labelled; a
#: rotated set like the Hydra paper's Table 1 row "MNIST (rotated)", not its "MNIST (shifted)"
#: row of translated images) and Fashion-MNIST (OOD, when present).
COMPARISON_SHIFT_SETS = ("mnist_rotated60",)
COMPARISON_OOD_SETS = ("fashion_mnist",)
#: Methods with an uncertainty decomposition (KD students have the predictive only).
MU_METHODS = ("Long-chain teacher", "Snapshot ensemble", "GPED", "EnD2", "Hydra")


def comparison_students(model: str, params: Mapping[str, Any], variants: bool = True
                        ) -> tuple[StudentConfig, ...]:
    """KD (U_s: Bayesian Dark Knowledge), GPED (C+1, U_s on the predictive, U_o on the entropy), EnD2
    (U_s) and, with ``variants``, KD students with the thesis' input generators (``perturb`` with
    ``perturb_std``, ``noise``) and with derivative matching (``derivative_weight``)."""
    paper = PAPER_SETTINGS[model]
    arch = ArchSpec(model, dropout=paper["student_dropout"])
    common = dict(thinning=params["thinning"], lr_halving_epochs=paper["lr_halving_epochs"])
    students = [StudentConfig("predictive", "U_s", arch=arch, name="KD", **common),
                StudentConfig("predictive+entropy", "U_s+U_o", arch=arch, name="GPED", **common),
                StudentConfig("endd", "U_s", arch=ArchSpec(model, dropout=ENDD_DROPOUT[model]), name="EnD2", **common)]
    if variants:
        students += [
            StudentConfig("predictive", "U_s", arch=arch, name="KD (perturbed inputs)", input_generator="perturb",
                          input_noise_std=params["perturb_std"], **common),
            StudentConfig("predictive", "U_s", arch=arch, name="KD (noise inputs)", input_generator="noise", **common),
            StudentConfig("predictive", "U_s", arch=arch, name="KD + derivative matching",
                          derivative_weight=params["derivative_weight"], **common)]
    return tuple(students)


def comparison_cell(params: Mapping[str, Any], seed: int = 0, device: str = "auto", data_root: str | None = None,
                    verify_checksums: bool = True) -> GridCell:
    """The MNIST comparison chain: ``params['model']``'s teacher with ``num_snapshots`` kept
    samples, the students of :func:`comparison_students`, and the shift/OOD sets evaluated online."""
    model = params["model"]
    if model not in PAPER_SETTINGS or PAPER_SETTINGS[model]["dataset"] != "mnist":
        raise ValueError(f"model={model!r}: the comparison runs on MNIST; allowed: fcnn, cnn_mnist")
    ood = COMPARISON_SHIFT_SETS + tuple(n for n in COMPARISON_OOD_SETS if ood_available(n, data_root))
    data = DataConfig("mnist", labelled_size=params["labelled_size"], mask_size=params["mask_size"], seed=seed,
                      root=data_root, verify_checksums=verify_checksums, ood_datasets=ood)
    config = teacher_config(model, params["labelled_size"], params, seed, device)
    config = GPEDConfig(**{**config.__dict__, "num_snapshots": params["num_snapshots"]})
    return GridCell(data, config, comparison_students(model, params))


def _hydra_config(params: Mapping[str, Any], prefix: str = "") -> Any:
    from .hydra import HydraConfig

    return HydraConfig(head_hidden=tuple(params["hydra_head_hidden"]), temperature=params["hydra_temperature"],
                       phase1_steps=params[f"{prefix}hydra_phase1_steps"],
                       phase2_steps=params[f"{prefix}hydra_phase2_steps"], lr=params["hydra_lr"])


def stored_hydra(result: GPEDResult, data: ExperimentData, model: str, hydra_config: Any,
                 results_dir: str | Path, progress: bool = True) -> Any:
    """Hydra trained on a stored run's snapshots, kept beside the run (``hydra-<hash>.pt``) so a
    re-executed notebook reloads it; returns a :class:`gped_kit.hydra.HydraResult`."""
    from . import hydra

    if result.snapshots is None or len(result.snapshots) < 2:
        raise ValueError("Hydra needs a run with GPEDConfig.num_snapshots >= 2")
    key = hashlib.sha256(json.dumps({**hydra_config.__dict__, "snapshots": len(result.snapshots)},
                                    sort_keys=True, default=str).encode()).hexdigest()[:10]
    path = Path(results_dir) / result.summary["run_key"].iloc[0] / f"hydra-{key}.pt"
    device = data.distill_x.device
    if path.exists():
        return hydra.load_hydra(path, model, data.input_shape, data.num_classes, hydra_config, device)
    logits = hydra.snapshot_logits(result.snapshots.to(device), model, data.input_shape, data.num_classes,
                                   data.distill_x)
    trained = hydra.train_hydra(logits, data.distill_x, model, data.input_shape, hydra_config, progress=progress)
    hydra.save_hydra(trained, path)
    return trained


def comparison_methods(result: GPEDResult, data: ExperimentData, model: str, hydra_net: Any,
                       eval_set: str) -> dict[str, tuple[Any, uncertainty.Uncertainties | None]]:
    """Per method, the predictive (N, C) on ``eval_set`` ("test" or an OOD/shift set) and its
    uncertainties (None for predictive-only students)."""
    from . import hydra

    c = data.num_classes
    x = data.test_x if eval_set == "test" else data.ood_x[eval_set]
    teacher = result.teacher_test if eval_set == "test" else result.teacher_ood[eval_set]
    students = result.student_test if eval_set == "test" else result.student_ood[eval_set]
    out: dict[str, tuple[Any, uncertainty.Uncertainties | None]] = {}
    t = teacher["predictive+entropy"]
    out["Long-chain teacher"] = (t[:, :c], uncertainty.from_moments(t[:, :c], t[:, c]))
    snaps = hydra.snapshot_logits(result.snapshots.to(x.device), model, data.input_shape, c, x)
    u = uncertainty.from_samples(snaps.softmax(-1).cpu())
    out["Snapshot ensemble"] = (u.predictive, u)
    for label, output in students.items():
        if label == "GPED":
            u = uncertainty.from_student_output("predictive+entropy", output, c)
        elif label == "EnD2":
            u = uncertainty.from_student_output("endd", output, c)
        else:
            out[label] = (output[:, :c], None)
            continue
        out[label] = (u.predictive, u)
    u = hydra.hydra_uncertainties(hydra_net, x)
    out["Hydra"] = (u.predictive.cpu(), uncertainty.Uncertainties(*(v.cpu() for v in (u.predictive, u.total, u.data))))
    return out


def comparison_marginal_variance(result: GPEDResult, data: ExperimentData, model: str, hydra_net: Any,
                                 eval_set: str) -> dict[str, torch.Tensor]:
    """Per method that has it, the marginal variance E[p(y=c|x,theta) (1 - p(y=c|x,theta))], (N, C),
    on ``eval_set``: the snapshot ensemble and Hydra (mean over members / heads of
    :func:`gped_kit.targets.marginal_variance_g`), EnD2 (its Dirichlet's closed form
    alpha_c (alpha_0 - alpha_c) / (alpha_0 (alpha_0 + 1))) and the long-chain teacher only when the
    chain accumulated the ``marginal_variance`` target (a student distilling it). KD and GPED's
    C+1 student do not estimate it."""
    from . import hydra

    c = data.num_classes
    x = data.test_x if eval_set == "test" else data.ood_x[eval_set]
    teacher = result.teacher_test if eval_set == "test" else result.teacher_ood[eval_set]
    students = result.student_test if eval_set == "test" else result.student_ood[eval_set]
    out: dict[str, torch.Tensor] = {}
    if "marginal_variance" in teacher:
        out["Long-chain teacher"] = teacher["marginal_variance"]
    snaps = hydra.snapshot_logits(result.snapshots.to(x.device), model, data.input_shape, c, x)
    out["Snapshot ensemble"] = hydra.marginal_variance_from_samples(snaps.log_softmax(-1)).cpu()
    if "EnD2" in students:
        output = students["EnD2"]
        alpha = output[:, :c] * output[:, c:]
        alpha0 = alpha.sum(-1, keepdim=True)
        out["EnD2"] = alpha * (alpha0 - alpha) / (alpha0 * (alpha0 + 1))
    out["Hydra"] = hydra.hydra_marginal_variance(hydra_net, x).cpu()
    return out


def comparison_memory(result: GPEDResult, data: ExperimentData, hydra_result: Any,
                      students: Sequence[StudentConfig]) -> pd.DataFrame:
    """What each method stores while it is made, in bytes: Hydra's kept snapshots and its cached
    snapshot logits on D'; each student's estimator store (built as the run builds it, on the
    ``meta`` device, and measured by its ``nbytes``: 0 for U_s, |D'| sums and counts for U_o,
    the entropy column's U_o for GPED's ``U_s+U_o``); the long-chain teacher's running sums on
    each evaluation set (the chain's accumulated targets, at each set's real size)."""
    from .targets import make_estimator, resolve_target

    n, c = data.distill_x.shape[0], data.num_classes
    snaps = result.snapshots
    rows = [{"method": "Hydra", "what": "S kept snapshots (parameters)",
             "bytes": snaps.numel() * snaps.element_size()},
            {"method": "Hydra", "what": "cached snapshot logits on D'", "bytes": int(hydra_result.cache_bytes)}]
    for s in students:
        estimator = make_estimator(s.estimator, n, resolve_target(s.target).out_dim(c), device="meta")
        rows.append({"method": s.label, "what": f"{s.estimator} estimator store on D' ({n} inputs)",
                     "bytes": int(estimator.nbytes)})
    for name, sums in {"test": result.teacher_test, **result.teacher_ood}.items():
        rows.append({"method": "Long-chain teacher",
                     "what": f"running sums on {name} ({next(iter(sums.values())).shape[0]} inputs; {', '.join(sums)})",
                     "bytes": sum(t.numel() * t.element_size() for t in sums.values())})
    return pd.DataFrame(rows)


def comparison_costs(model: str, data: ExperimentData, num_snapshots: int, hydra_net: Any,
                     students: Sequence[StudentConfig]) -> pd.DataFrame:
    """Parameters and FLOPs per input (PyTorch's counter, 2 x MACs) of every method's deployed network."""
    from .cost import count_flops
    from .models import build_network, count_parameters
    from .targets import resolve_target

    c, shape = data.num_classes, data.input_shape
    teacher = build_network(model, shape, c)
    rows = [{"method": "Snapshot ensemble", "params": num_snapshots * count_parameters(teacher),
             "flops": num_snapshots * count_flops(teacher, shape)}]
    for s in students:
        net = build_network(s.arch or ArchSpec(model), shape, resolve_target(s.target).out_dim(c))
        rows.append({"method": s.label, "params": count_parameters(net), "flops": count_flops(net, shape)})
    hydra_cpu = hydra_net.to("cpu")
    rows.append({"method": "Hydra", "params": count_parameters(hydra_cpu), "flops": count_flops(hydra_cpu, shape)})
    return pd.DataFrame(rows)


def comparison_table(result: GPEDResult, data: ExperimentData, model: str, hydra_net: Any,
                     costs: pd.DataFrame | None = None, labels: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """One row per (method, evaluation set): accuracy, NLL and Brier score (labelled sets), mean
    total uncertainty, mean model uncertainty MU (knowledge) and the mean |Delta MU| against the
    snapshot ensemble (``mu_mae_snapshots``, Hydra paper's Table 1) and against the long-chain
    teacher (``mu_mae_teacher``); the same for the expected entropy E[H] (``data_mean``,
    ``entropy_mae_snapshots``, ``entropy_mae_teacher``) and, for the methods of
    :func:`comparison_marginal_variance`, the marginal variance E[p(1-p)] averaged over inputs and
    classes (``mv_mean``, ``mv_mae_snapshots``; ``mv_mae_teacher`` only when the chain accumulated
    it); ``params``/``flops`` from ``costs``. ``labels`` gives the labels of shifted sets (the
    rotated MNIST test set has the test set's labels)."""
    labels = {"test": data.test_y, **{n: data.test_y for n in COMPARISON_SHIFT_SETS}, **(labels or {})}
    rows = []
    for eval_set in ["test", *result.teacher_ood]:
        methods = comparison_methods(result, data, model, hydra_net, eval_set)
        ref_snap, ref_teacher = methods["Snapshot ensemble"][1], methods["Long-chain teacher"][1]
        mv = comparison_marginal_variance(result, data, model, hydra_net, eval_set)
        for method, (pred, u) in methods.items():
            row = {"model": model, "eval_set": eval_set, "method": method}
            y = labels.get(eval_set)
            if y is not None and len(y) == len(pred):
                y = y.cpu()
                row.update(accuracy=metrics.accuracy(pred, y), nll=metrics.nll(pred, y),
                           brier=metrics.brier_score(pred, y))
            row["total_mean"] = float(metrics.predictive_entropy(pred).mean())
            if u is not None:
                row.update(mu_mean=float(u.knowledge.mean()),
                           mu_mae_snapshots=metrics.mae(u.knowledge, ref_snap.knowledge),
                           mu_mae_teacher=metrics.mae(u.knowledge, ref_teacher.knowledge),
                           data_mean=float(u.data.mean()),
                           entropy_mae_snapshots=metrics.mae(u.data, ref_snap.data),
                           entropy_mae_teacher=metrics.mae(u.data, ref_teacher.data))
            if method in mv:
                row.update(mv_mean=float(mv[method].mean()),
                           mv_mae_snapshots=metrics.mae(mv[method], mv["Snapshot ensemble"]))
                if "Long-chain teacher" in mv:
                    row["mv_mae_teacher"] = metrics.mae(mv[method], mv["Long-chain teacher"])
            rows.append(row)
    table = pd.DataFrame(rows)
    if costs is not None:
        table = table.merge(costs, on="method", how="left")
    return table


def run_comparison(params: Mapping[str, Any], results_dir: str | Path, seed: int = 0, device: str = "auto",
                   data_root: str | None = None, recompute: bool = False) -> dict[str, Any]:
    """The MNIST comparison end to end through the results store: the chain (reused when stored),
    Hydra (reused when stored), the comparison table (written as ``comparison.csv`` beside the run)
    and the costs. Returns ``{"cell", "result", "data", "hydra", "table", "memory"}`` (``memory``:
    :func:`comparison_memory`)."""
    cell = comparison_cell(params, seed, device, data_root)
    data = prepare_data(cell.data, device=resolve_device(device))
    result = run_stored(data, cell.config, cell.students, results_dir, recompute=recompute)
    trained = stored_hydra(result, data, cell.config.model, _hydra_config(params), results_dir)
    costs = comparison_costs(cell.config.model, data, len(result.snapshots), trained.net, cell.students)
    table = comparison_table(result, data, cell.config.model, trained.net, costs)
    table = table.assign(labelled_size=cell.data.labelled_size, mask_size=cell.data.mask_size,
                         num_iterations=cell.config.num_iterations, num_snapshots=len(result.snapshots),
                         hydra_seconds=round(trained.seconds, 1), hydra_cache_bytes=trained.cache_bytes)
    run_dir = Path(results_dir) / result.summary["run_key"].iloc[0]
    table.to_csv(run_dir / "comparison.csv", index=False)
    memory = comparison_memory(result, data, trained, cell.students)
    return {"cell": cell, "result": result, "data": data, "hydra": trained, "table": table, "memory": memory}


def spiral_run(params: Mapping[str, Any], results_dir: str | Path, seed: int = 0, device: str = "auto"
               ) -> dict[str, Any]:
    """The 2-D spiral toy (:class:`gped_kit.data.SpiralConfig`): an FCNN teacher chain with
    ``spiral_snapshots`` kept samples, KD / GPED / EnD2 students and Hydra, with the grid as an
    evaluation set for uncertainty maps. Returns ``{"data", "result", "hydra", "table", "maps"}``
    where ``maps`` holds per method the :class:`~gped_kit.uncertainty.Uncertainties` on the grid."""
    from .data import SpiralConfig, spiral_data

    spiral = SpiralConfig(labelled_size=params["spiral_size"], seed=seed)
    data = spiral_data(spiral).to(resolve_device(device))
    config = GPEDConfig(model="fcnn", sgld=SGLDConfig(step_size=params["spiral_step_size"], prior_precision=1.0,
                                                      batch_size=100),
                        num_iterations=params["spiral_iterations"], burn_in=params["spiral_burn_in"],
                        eval_thinning=10, log_every=max(params["spiral_iterations"] // 10, 1),
                        checkpoint_every=params["spiral_iterations"], seed=seed, device=device,
                        num_snapshots=params["spiral_snapshots"])
    students = tuple(dataclasses.replace(s, thinning=params["spiral_thinning"], lr_halving_epochs=None,
                                         arch=ArchSpec("fcnn"))
                     for s in comparison_students("fcnn", params, variants=False))
    result = run_stored(data, config, students, results_dir)
    trained = stored_hydra(result, data, "fcnn", _hydra_config(params, "spiral_"), results_dir)
    table = comparison_table(result, data, "fcnn", trained.net, labels={"grid": None})
    table = table.assign(dataset="spiral")
    maps = {m: u for m, (_, u) in comparison_methods(result, data, "fcnn", trained.net, "grid").items()
            if u is not None}
    run_dir = Path(results_dir) / result.summary["run_key"].iloc[0]
    table.to_csv(run_dir / "comparison.csv", index=False)
    return {"data": data, "result": result, "hydra": trained, "table": table, "maps": maps}

