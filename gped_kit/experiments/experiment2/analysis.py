"""Experiment 2's tables from the grid's student rows: the cells (one row per model, |D|, m, estimator), the
paper's trends counted on ours and on the paper's tables in the same cells, Tables 5-7 beside ours, the
learning-rate schedule check, and which stored chains are Experiment 1-2 chains; the names of the tables
notebook 02 writes."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from ...core.targets import SKILL_FLOOR
from .. import paper_tables
from ..claims import (
    AGREE,
    AGREEMENT_COUNTS,
    DISAGREE,
    NO_EVIDENCE,
    NOT_SEPARABLE,
    TRENDS,
    agreement,
    compare,
    count_text,
    seed_counts_text,
    seed_spread,
    trend_cells,
)
from ..verdicts import lowest_known, separable, student_skill, unskilled
from .artifacts import MNIST_ARTIFACTS

#: The trend tables notebook 02 writes to ``figures/`` (``.csv`` and ``.md``), per profile; the README's rows
#: read them (:mod:`.notebook`).
TRENDS_TABLE = MNIST_ARTIFACTS["trends"].file
#: The cells whose students are below the skill floor (:func:`below_floor`), per profile; the README names them.
BELOW_FLOOR_TABLE = MNIST_ARTIFACTS["below_floor"].file


#: :func:`gap_by_schedule`'s outcomes of one comparison, besides :data:`~gped_kit.experiments.claims.NO_EVIDENCE`.
GAP_FALLS, GAP_DOES_NOT_FALL = "falls", "does not fall"


def gap_by_schedule(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Student - teacher NLL gap per (schedule, model, m, estimator) at every |D|, and whether it
    falls from the smallest to the largest |D|. ``tables`` maps a schedule name to per-student
    Experiment 2 rows (``GridResult.table``); only the (model, m) cells present in *every* table
    are compared. ``halvings_at_<N>`` is the number of lr halvings the schedule makes over the
    chain's distillation steps at that |D| (0 for a constant rate; the paper's: 49 at N = 10k and
    8 at N = 60k). ``skill`` is the lowest skill of the predictive students at the two sizes compared
    (:func:`experiment2_cells`' ``nll_gap_skill``; NaN where one was not stored), and ``outcome`` says
    :data:`GAP_FALLS`, :data:`GAP_DOES_NOT_FALL`, or no evidence where a student is below the skill floor or
    its skill unknown (:func:`~gped_kit.experiments.verdicts.unskilled`): a student no better than a constant
    tells nothing about its schedule. ``gap_falls_with_more_data`` is the comparison itself, whatever the skill."""
    cells = {name: experiment2_cells(table) for name, table in tables.items()}
    common = set.intersection(*(set(zip(c["model"], c["mask_size"])) for c in cells.values()))

    def in_common(df: pd.DataFrame) -> pd.Series:
        return pd.Series([(mo, m) in common for mo, m in zip(df["model"], df["mask_size"])], index=df.index)

    frames = []
    for name, table in tables.items():
        c = cells[name]
        c = c[in_common(c)]
        index = ["model", "mask_size", "estimator"]
        wide = c.pivot_table(index=index, columns="labelled_size", values="nll_gap")
        sizes = sorted(wide.columns)
        wide.columns = [f"gap_at_{n}" for n in sizes]
        wide["gap_falls_with_more_data"] = wide[f"gap_at_{sizes[-1]}"] < wide[f"gap_at_{sizes[0]}"]
        ends = c[c["labelled_size"].isin((sizes[0], sizes[-1]))]
        wide["skill"] = ends.groupby(index)["nll_gap_skill"].agg(lowest_known).reindex(wide.index)
        wide["outcome"] = [NO_EVIDENCE if unskilled(k) else GAP_FALLS if falls else GAP_DOES_NOT_FALL
                           for k, falls in zip(wide["skill"], wide["gap_falls_with_more_data"])]
        pred = table[(table["target"] == "predictive") & in_common(table)]
        for n in sizes:
            row = pred[pred["labelled_size"] == n].iloc[0]
            epochs = row["lr_halving_epochs"]
            span = row["num_iterations"] - row["burn_in"]
            wide[f"halvings_at_{n}"] = 0 if pd.isna(epochs) else math.floor(span / (epochs * n / row["batch_size"]))
        frames.append(wide.reset_index().assign(schedule=name))
    out = pd.concat(frames, ignore_index=True)
    return out[["schedule", *[c for c in out.columns if c != "schedule"]]]


def schedule_counts(by_schedule: pd.DataFrame) -> dict[str, str]:
    """Per schedule of :func:`gap_by_schedule`, in its order: ``"1 of 2"`` (the gap falls in 1 of the 2 judged
    comparisons), with ``"; 2 no evidence"`` where students below the skill floor were left out, or
    ``"0 of 0; 2 no evidence"`` where none was judged."""
    counts = {}
    for name, rows in by_schedule.groupby("schedule", sort=False):
        judged = rows[rows["outcome"] != NO_EVIDENCE]
        left_out = len(rows) - len(judged)
        counts[name] = (f"{int((judged['outcome'] == GAP_FALLS).sum())} of {len(judged)}"
                        + (f"; {left_out} no evidence" if left_out else ""))
    return counts


#: One row of :func:`experiment2_cells` per combination of these columns.
CELL_COLUMNS = ("model", "labelled_size", "mask_size", "masking_rate", "estimator")
#: Columns the per-student results table must have (besides at least one metric column).
REQUIRED_COLUMNS = (*CELL_COLUMNS, "target", "teacher_nll")
#: Metric columns; a missing one is read as all-NaN, but at least one must be present.
METRIC_COLUMNS = ("nll_gap", "entropy_mae")


def experiment2_cells(results: pd.DataFrame, dataset: str | None = None) -> pd.DataFrame:
    """Collapse per-student Experiment 2 rows to one row per (model, N, m, r, estimator).

    ``results`` is a grid's table (:attr:`~gped_kit.experiments.chains.ChainGrid.table`): one row per
    (chain, student) with the columns of :data:`REQUIRED_COLUMNS` and ``nll_gap`` and/or
    ``entropy_mae`` (``student_nll`` optional). Within one chain (``run_key``; without that
    column every cell counts as one chain), ``nll_gap`` and ``student_nll`` are taken from the
    ``target == "predictive"`` student of the estimator and ``entropy_mae`` from its
    ``target == "entropy"`` student; ``teacher_nll`` is the chain's. Several students of the same
    target and estimator in one chain, and several chains of one
    cell (e.g. seeds), are averaged; ``n_runs`` counts the chains. A metric whose student is
    absent is NaN. Rows of other targets are ignored.

    Args:
        results: per-student rows; an empty frame (no stored runs) gives an empty table.
        dataset: if given and ``results`` has a ``dataset`` column, keep only that data set.

    Returns:
        Columns ``model, labelled_size, mask_size, masking_rate, estimator, teacher_nll,
        student_nll, nll_gap, entropy_mae, n_runs``, sorted by model, estimator, N and m, then
        ``nll_gap_skill`` and ``entropy_mae_skill``: the lowest skill over the cell's students of that metric
        (:func:`~gped_kit.experiments.verdicts.student_skill`), NaN where one of them was not stored
        (:func:`~gped_kit.experiments.verdicts.lowest_known`); a comparison that reads a cell below the floor
        or without its skill is no evidence (:func:`~gped_kit.experiments.claims.trend_cells`).

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
                         f"(one row per student, as a ChainGrid's table has them)")
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
    skills = {}  # the lowest skill of the students behind each metric, NaN where one's was not stored
    skill = student_skill(df)
    for metric, target in (("nll_gap", "predictive"), ("entropy_mae", "entropy")):
        mine = df["target"] == target
        skills[f"{metric}_skill"] = (skill[mine].groupby([df.loc[mine, k] for k in chain_keys], dropna=False)
                                     .agg(lowest_known))
    per_chain = pd.concat([teacher, pred, mae, *(v.rename(k) for k, v in skills.items())], axis=1).reset_index()
    table = (per_chain.groupby(list(CELL_COLUMNS), dropna=False)
             .agg(teacher_nll=("teacher_nll", "mean"), student_nll=("student_nll", "mean"),
                  nll_gap=("nll_gap", "mean"),
                  entropy_mae=("entropy_mae", "mean"), n_runs=("run_key", "nunique"),
                  **{k: (k, lowest_known) for k in skills})
             .reset_index())
    table["labelled_size"] = table["labelled_size"].astype(int)
    table["mask_size"] = table["mask_size"].astype(int)
    return table.sort_values(["model", "estimator", "labelled_size", "mask_size"]).reset_index(drop=True)[
        out_cols + list(skills)]


# ----------------------------------------------------------------------------- stored rows
#: The targets of the students of an Experiment 1-2 chain (Section 4): the predictive
#: distribution and the expected entropy, each with U_s and U_o (Eqs. 9-10).
EXPERIMENT12_TARGETS = ("predictive", "entropy")
#: The estimators every target of an Experiment 1-2 chain is distilled with
#: (:func:`~gped_kit.experiments.paper.distillation_task`).
EXPERIMENT12_ESTIMATORS = ("U_o", "U_s")
#: Columns that may name a student's chain, in order of preference (a grid's table has
#: ``run_key``; :meth:`~gped_kit.experiments.store.ResultsStore.load` adds the entry key as ``entry``).
CHAIN_KEY_COLUMNS = ("run_key", "entry")


def _chain_key(rows: pd.DataFrame) -> str | None:
    return next((c for c in CHAIN_KEY_COLUMNS if c in rows.columns), None)


def experiment12_rows(summary: pd.DataFrame, dataset: str | None = "mnist") -> pd.DataFrame:
    """The student rows of Experiment 1-2 chains among stored chain summaries.

    ``summary`` holds one row per (chain, student), e.g. ``ResultsStore(root).load("summary",
    "chain")`` (every chain of the store: Experiments 1-4, the comparisons, ...). An Experiment 1-2
    chain (:func:`~gped_kit.experiments.paper.distillation_task`) distils the predictive
    distribution and the expected entropy into students with the teacher's architecture, so a
    row is kept when its ``target`` is one of :data:`EXPERIMENT12_TARGETS`, its ``student_arch``
    is its ``model`` and its width multipliers ``k1``, ``k2`` are 1, and (``dataset`` not None)
    its ``dataset`` is ``dataset``. When the rows name their chain (a column of
    :data:`CHAIN_KEY_COLUMNS`), a chain is kept whole or not at all: every one of its students
    must pass, and it must have students of both targets, each with both estimators U_o and U_s
    (when the rows have an ``estimator`` column). That leaves out the Experiment 3 searches
    (students of other widths), Experiment 4 and the comparisons (C+1 and EnD2 students), the
    learning-rate schedule check (predictive students only) and the quickstart's chain (one
    estimator per target), whose students would otherwise be averaged into the Experiment 2
    cells. A test whose column is absent is not applied.

    Raises:
        TypeError: ``summary`` is not a DataFrame.
        ValueError: a column :func:`experiment2_cells` needs
            is missing (named in the message); an empty frame without columns is accepted.
    """
    if not isinstance(summary, pd.DataFrame):
        raise TypeError(f"summary must be a pandas DataFrame, got {type(summary).__name__}")
    if len(summary.columns) == 0:
        return summary.copy()
    missing = [c for c in REQUIRED_COLUMNS if c not in summary.columns]
    if missing:
        raise ValueError(f"summary lacks the column(s) {missing}; Experiment 1-2 rows need {list(REQUIRED_COLUMNS)} "
                         f"(one row per student, as a chain entry's summary table has them)")
    df = summary
    if dataset is not None and "dataset" in df.columns:
        df = df[df["dataset"].astype(str).str.lower() == str(dataset).lower()]
    passes = df["target"].isin(EXPERIMENT12_TARGETS)
    if "student_arch" in df.columns:
        passes &= df["student_arch"].astype(str) == df["model"].astype(str)
    for col in ("k1", "k2"):
        if col in df.columns:
            passes &= pd.to_numeric(df[col], errors="coerce").fillna(1.0) == 1.0
    key = _chain_key(df)
    if key is None:
        return df[passes].copy()
    needed = ({f"{t} {e}": (df["target"] == t) & (df["estimator"] == e) for t in EXPERIMENT12_TARGETS
               for e in EXPERIMENT12_ESTIMATORS} if "estimator" in df.columns
              else {t: df["target"] == t for t in EXPERIMENT12_TARGETS})
    flags = pd.DataFrame({"passes": passes, **needed})
    by_chain = flags.groupby(df[key], dropna=False)
    chains = pd.concat([by_chain["passes"].all(), by_chain[list(needed)].any()], axis=1)
    kept = chains.index[chains.all(axis=1)]
    return df[df[key].isin(kept)].copy()


def chain_lengths(rows: pd.DataFrame) -> dict[int, int]:
    """Number of chains per chain length T (``num_iterations``) among ``rows``, by T; chains are
    counted by their key (:data:`CHAIN_KEY_COLUMNS`), else every row counts. Empty when the
    column is absent."""
    if "num_iterations" not in rows.columns or rows.empty:
        return {}
    key = _chain_key(rows)
    lengths = rows.dropna(subset=["num_iterations"])
    counts = (lengths.groupby("num_iterations")[key].nunique() if key else lengths.groupby("num_iterations").size())
    return {int(t): int(n) for t, n in sorted(counts.items())}


#: A cell's metrics and the names a reader sees for them.
SKILL_METRICS = {"nll_gap": "student NLL", "entropy_mae": "entropy MAE"}


def below_floor(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells of :func:`experiment2_cells` whose students of a metric are no evidence
    (:func:`~gped_kit.experiments.verdicts.unskilled`: their lowest skill over the seeds, ``<metric>_skill``,
    below :data:`~gped_kit.core.targets.SKILL_FLOOR`, or not stored): one row per (model, labelled_size,
    mask_size, metric) with ``estimators``, those of its estimators that are no evidence (``"U_s"``, or
    ``"U_o, U_s"``: a comparison that reads the other estimator still counts), each estimator's skill
    (``skill_U_o``, ``skill_U_s``, whether below the floor or not; NaN for one not stored) and ``stored`` (False:
    the skill of one of ``estimators`` not stored). Every trend comparison that reads such a student is no
    evidence."""
    columns = ["model", "labelled_size", "mask_size", "masking_rate", "metric", "estimators", "skill_U_o",
               "skill_U_s", "stored"]
    rows = []
    for metric, name in SKILL_METRICS.items():
        column = f"{metric}_skill"
        if metric not in cells or cells.empty:
            continue
        skills = cells[column] if column in cells else pd.Series(math.nan, index=cells.index)
        measured = cells[metric].notna()
        low = measured & skills.map(unskilled)
        for (model, n, m, r), part in cells[measured].groupby(["model", "labelled_size", "mask_size",
                                                                 "masking_rate"]):
            below = part[low.loc[part.index]]
            if below.empty:
                continue
            skill = skills.loc[part.index].set_axis(part["estimator"])
            rows.append({"model": model, "labelled_size": n, "mask_size": m, "masking_rate": r, "metric": name,
                         "estimators": ", ".join(sorted(below["estimator"])),
                         "skill_U_o": skill.get("U_o", math.nan), "skill_U_s": skill.get("U_s", math.nan),
                         "stored": bool(skills.loc[below.index].notna().all())})
    return pd.DataFrame(rows, columns=columns)


def no_evidence_estimators(row) -> list[str]:
    """The estimators of a :func:`below_floor` row that are no evidence (a table written before the column: those
    whose skill it holds, as it then held only theirs)."""
    named = getattr(row, "estimators", None)
    if isinstance(named, str) and named:
        return named.split(", ")
    return [e for e in ("U_o", "U_s") if pd.notna(getattr(row, f"skill_{e}"))]


def below_floor_text(low: pd.DataFrame) -> str:
    """One sentence naming the cells of :func:`below_floor` (empty string when there are none)."""
    if low.empty:
        return ""
    names = {"fcnn": "FCNN", "cnn_mnist": "CNN-MNIST"}
    stored = low["stored"].astype(bool) if "stored" in low else pd.Series(True, index=low.index)
    unknown = low[~stored]
    low = low[stored]
    not_stored = (f"No evidence in {len(unknown)} (cell, metric) pairs stored without their students' skill over "
                  "the best constant prediction (" + "; ".join(
                      f"{names.get(model, model)} {metric}: {len(group)}"
                      for (model, metric), group in unknown.groupby(["model", "metric"], sort=False))
                  + "): every comparison that reads them is left out of the counts." if len(unknown) else "")
    if low.empty:
        return not_stored
    parts = []
    for (model, metric), group in low.groupby(["model", "metric"], sort=False):
        cells = ", ".join(
            f"N = {int(r.labelled_size):,}, m = {int(r.mask_size)} ("
            + " / ".join(f"{e} {v:+.3f}" for e, v in (("U_o", r.skill_U_o), ("U_s", r.skill_U_s))
                         if pd.notna(v) and e in no_evidence_estimators(r))
            + ")" for r in group.itertuples())
        parts.append(f"{names.get(model, model)} {metric}: {cells}")
    return (f"No evidence in {len(low)} (cell, metric) pairs, whose students are no better than the best constant "
            f"prediction (skill below {SKILL_FLOOR}; their skills): " + "; ".join(parts)
            + ". Every comparison that reads them is left out of the counts."
            + (f" {not_stored}" if not_stored else ""))


def trends_held_text(trends: pd.DataFrame) -> str:
    """How many of :func:`experiment2_trends`' trends hold on ours, out of those judged: ``"2 of 3 of the paper's
    trends judged here hold on ours (each: in most of its comparisons judged); 3 cannot be judged on these cells
    (too few labelled-set sizes or masks, or every comparison no evidence)"``. A trend with no comparison judged
    (``holds`` NaN: CIFAR-10 has no masking) is named apart, never counted as failing."""
    judged = trends[trends["holds"].notna()]
    held = int(judged["holds"].astype(bool).sum())
    rest = len(trends) - len(judged)
    return (f"{held} of {len(judged)} of the paper's trends judged here hold on ours (each: in most of its "
            "comparisons judged)" + (f"; {rest} cannot be judged on these cells (too few labelled-set sizes or "
                                     "masks, or every comparison no evidence)" if rest else ""))


def experiment2_trends(cells: pd.DataFrame) -> pd.DataFrame:
    """Check the trends the paper reports for Experiment 2 (Section 4.2) on a table from
    :func:`experiment2_cells` (one row per model, |D|, m, estimator).

    Returns one row per (model, trend) with ``holds`` (in a majority of the comparisons judged: those that
    read a student below the skill floor are no evidence and left out; NaN where none is judged),
    ``count`` ("k of n" comparisons that agree, those left out named) and the paper's statement. Trends:
    teacher NLL falls with more data (per m) and rises with masking (per |D|); the
    student-teacher NLL gap falls with more data (per m) and peaks at a moderate masking rate
    (per |D| and estimator: the largest gap is at neither the smallest nor the largest m);
    the same peak for the entropy MAE; U_o at least as good as U_s (per cell, NLL and MAE).
    Comparisons need at least two sizes / three mask sizes; otherwise the trend is NaN. The
    comparisons themselves, one row each, are :func:`~gped_kit.experiments.claims.trend_cells`;
    :func:`experiment2_trend_comparison` sets each beside the paper's outcome in the same cell.
    """
    per_cell = trend_cells(cells)
    rows = []
    for model in sorted(set(cells["model"])) if len(cells) else []:
        mine = per_cell[per_cell["model"] == model]
        for trend, paper in TRENDS:
            comparisons = mine[mine["trend"] == trend]
            weak = comparisons["no_evidence"].astype(bool)
            outcomes = comparisons.loc[~weak, "holds"]
            k, n = int(outcomes.sum()), len(outcomes)
            rows.append({"model": model, "trend": trend, "holds": (k > n / 2) if n else math.nan,
                         "count": f"{k} of {n}" + _left_out(int(weak.sum()), 0), "paper": paper})
    return pd.DataFrame(rows, columns=["model", "trend", "holds", "count", "paper"])


#: Columns of :func:`experiment2_trend_cells_compared`.
TREND_COMPARISON_KEYS = ("model", "trend", "setting")


def _per_seed(results: pd.DataFrame) -> dict[int, pd.DataFrame]:
    """Per-student grid rows split by chain seed (one group, seed 0, without a ``seed`` column)."""
    if "seed" not in results.columns:
        return {0: results}
    return {int(seed): part for seed, part in results.groupby("seed", sort=True)}


def experiment2_trend_cells_compared(results: pd.DataFrame) -> pd.DataFrame:
    """Every comparison behind Experiment 2's trends, ours beside the paper's (Tables 5-7), one row each.

    ``results`` is a grid's per-student table (:attr:`~gped_kit.experiments.chains.ChainGrid.table`,
    with its ``seed`` column when several seeds ran). Ours (``holds``) is the outcome on the cells
    averaged over seeds (:func:`experiment2_cells`); ``holds_by_seed`` lists it per seed (seed
    order) and ``seed_stable`` says whether every seed gives the same. The paper's (``holds_paper``)
    is the same comparison on its table restricted to our grid (the same smallest and largest size,
    the same masks: :func:`~gped_kit.experiments.paper_tables.experiment2_trend_outcomes`).
    ``comparison``: ``agree`` / ``disagree``; ``ours only`` where the paper has no such cell (a
    size or mask it did not print); ``no evidence`` where ours reads a student below the skill floor
    (``no_evidence``, on the cells averaged over seeds: the lowest skill of any seed); ``not separable`` where
    ours is within the seeds' spread: the ``margin`` of the comparison on the cells averaged over seeds
    (:func:`~gped_kit.experiments.claims.trend_cells`) is smaller than its standard deviation over the seeds
    (``margin_spread``; :func:`~gped_kit.experiments.verdicts.separable`; unknown with one seed, so every outcome
    counts then). Keyed by (model, trend, setting)."""
    keys = list(TREND_COMPARISON_KEYS)
    cells = experiment2_cells(results)
    ours = trend_cells(cells)
    columns = [*keys, "estimator", "labelled_size", "mask_size", "metric", "holds", "margin", "margin_spread",
               "no_evidence", "seeds", "holds_by_seed", "seed_stable", "holds_paper", "table", "comparison"]
    if ours.empty:
        return pd.DataFrame(columns=columns)
    per_seed = []
    for seed, part in _per_seed(results).items():
        per_seed.append(trend_cells(experiment2_cells(part)).assign(seed=seed))
    seeds_cells = pd.concat(per_seed, ignore_index=True)
    spread = seed_spread(seeds_cells.assign(ours=lambda d: d["holds"].map(str)), keys)
    spread = spread.rename(columns={"ours_by_seed": "holds_by_seed"})
    margins = (seeds_cells.groupby(keys, sort=False)["margin"]
               .agg(margin_spread=lambda m: m.std(ddof=1) if m.notna().sum() > 1 else math.nan).reset_index())
    spread = spread.merge(margins, on=keys, how="left")
    papers = []
    for model in sorted(set(cells["model"])):
        if model not in paper_tables.MODELS:
            continue
        grid = cells[cells["model"] == model]
        papers.append(paper_tables.experiment2_trend_outcomes(model, sorted(set(grid["labelled_size"])),
                                                              sorted(set(grid["mask_size"]))))
    paper = (pd.concat(papers, ignore_index=True)[[*keys, "holds", "table"]].rename(columns={"holds": "holds_paper"})
             if papers else pd.DataFrame(columns=[*keys, "holds_paper", "table"]))
    out = ours.merge(spread, on=keys, how="left").merge(paper, on=keys, how="left")
    out["holds_paper"] = out["holds_paper"].astype(object)
    out["comparison"] = [NO_EVIDENCE if skip else NOT_SEPARABLE if not separable(margin, sd)
                         else compare(str(bool(a)), str(bool(b)) if pd.notna(b) else None)
                         for a, b, skip, margin, sd in zip(out["holds"], out["holds_paper"], out["no_evidence"],
                                                           out["margin"], out["margin_spread"])]
    return out[columns]


def experiment2_trend_comparison(results: pd.DataFrame) -> pd.DataFrame:
    """The Experiment 2 trends, each counted on ours and on the paper's tables in the same cells.

    One row per (model, trend) of :data:`~gped_kit.experiments.claims.TRENDS`: ``ours`` ("k of n"
    comparisons that hold, on the cells averaged over seeds), ``paper`` ("j of n": the same
    comparisons on Tables 5-7 restricted to our grid), ``agree`` ("agree in a of c cells compared") and its
    counts (:data:`~gped_kit.experiments.claims.AGREEMENT_COUNTS`, which readers sum),
    ``seeds`` (the count per seed: "6 of 8 in 3 of 3 seeds", or its range and the per-seed counts),
    ``unstable_cells`` (comparisons whose outcome differs between seeds), ``paper_statement`` (the
    paper's words) and ``holds`` (ours in a majority of the comparisons counted in ``ours``: none that is no
    evidence or not separable; NaN where none is counted). ``results``: a grid's per-student table."""
    cells = experiment2_trend_cells_compared(results)
    columns = ["model", "trend", "ours", "paper", "agree", *AGREEMENT_COUNTS, "seeds", "unstable_cells", "holds",
               "paper_statement"]
    if cells.empty:
        return pd.DataFrame(columns=columns)
    per_seed = {seed: trend_cells(experiment2_cells(part)) for seed, part in _per_seed(results).items()}
    rows = []
    for model in sorted(set(cells["model"])):
        for trend, statement in TRENDS:
            mine = cells[(cells["model"] == model) & (cells["trend"] == trend)]
            n = len(mine)
            compared = mine[mine["comparison"].isin([AGREE, DISAGREE])]
            evidence = mine[~mine["no_evidence"].astype(bool) & (mine["comparison"] != NOT_SEPARABLE)]
            near = int((mine["comparison"] == NOT_SEPARABLE).sum())
            counted = set(evidence["setting"])  # each seed counts the comparisons the seeds' mean tells apart
            counts = {seed: int(t.loc[(t["model"] == model) & (t["trend"] == trend) & t["setting"].isin(counted),
                                      "holds"].sum())
                      for seed, t in per_seed.items()}
            rows.append({"model": model, "trend": trend,
                         "ours": count_text(evidence["holds"].sum(), len(evidence))
                         + _left_out(n - len(evidence) - near, near),
                         "paper": count_text(compared["holds_paper"].astype(bool).sum(), len(compared))
                         if len(compared) else "no cell in common",
                         **agreement(mine),
                         "seeds": seed_counts_text(counts, len(evidence)),
                         "unstable_cells": int((~mine["seed_stable"].astype(bool)).sum()),
                         "holds": (evidence["holds"].sum() > len(evidence) / 2) if len(evidence) else math.nan,
                         "paper_statement": statement})
    return pd.DataFrame(rows, columns=columns)


def _left_out(unskilled: int, near: int) -> str:
    """What a count leaves out: ``" (1 not separable, 2 no evidence)"``, or nothing."""
    parts = ([f"{near} not separable"] if near else []) + ([f"{unskilled} no evidence"] if unskilled else [])
    return f" ({', '.join(parts)})" if parts else ""


def experiment2_comparison(table: pd.DataFrame, model: str) -> pd.DataFrame:
    """Tables 5-7 for ``model``: our U_o/U_s numbers per (|D|, m) beside the paper's (``_paper``).
    Joined on (|D|, m); the paper prints rounded masking rates, we keep the exact m^2/(H W)."""
    columns = ["teacher_nll", "student_nll_U_o", "student_nll_U_s", "entropy_mae_U_o", "entropy_mae_U_s"]
    paper = paper_tables.experiment2_table(model).set_index(["labelled_size", "mask_size"])[columns]
    paper = paper.add_suffix("_paper")
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


