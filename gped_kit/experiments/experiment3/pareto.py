"""The searched students against their costs (paper 003, Section 3.3; Figures 2 and 6-13): which rows
of a search table are search outputs, the Pareto frontier of a metric against a cost, the best and
the base student, and how the group l1/l2 students compare with the exhaustive grid.

A row is dominated when another has cost <= and a metric at least as good (lower NLL / MAE, higher
accuracy; :data:`METRICS`), one of the two strictly."""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

from ...core.targets import resolve_target
from .settings import check_choice

#: Metric columns of the search table: (label, lower is better).
METRICS: dict[str, tuple[str, bool]] = {
    "student_nll": ("test NLL", True),
    "student_accuracy": ("test accuracy", False),
    "entropy_mae": ("expected-entropy MAE", True),
}
#: Cost columns of the search table and their axis labels.
COSTS: dict[str, str] = {
    "flops": "FLOPs per input (2 x MACs)",
    "params": "parameters",
    "latency_ms": "latency per batch (ms)",
}
#: Search methods: the width-multiplier grid and group l1/l2 + pruning.
METHODS: dict[str, str] = {"exhaustive": "exhaustive search", "group_lasso": "group l1/l2 + pruning"}
#: The targets Experiment 3 distils and searches students of (the paper's Figures 2, 6-13).
SEARCHED_TARGETS = ("predictive", "entropy")


def metric_target(metric: str, targets: Iterable[str] = SEARCHED_TARGETS) -> str:
    """The one target of ``targets`` whose students report ``metric`` (asked of the target,
    :meth:`~gped_kit.core.targets.Target.reports`): predictive for the NLL and accuracy, entropy for the
    entropy MAE; ``ValueError`` when none or several do."""
    found = [t for t in targets if resolve_target(t).reports(metric)]
    if len(found) != 1:
        raise ValueError(f"metric={metric!r}: reported by {found or 'none'} of the targets {list(targets)}; "
                         "give targets of which exactly one reports it")
    return found[0]


def metric_rows(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The rows of a search table whose student's target reports ``metric`` (:func:`metric_target`)."""
    return table[table["target"] == metric_target(metric)] if len(table) else table


def search_candidates(table: pd.DataFrame, method: str | None = None) -> pd.DataFrame:
    """Rows that are outputs of a search: exhaustive students (stage ``distilled``) and group
    l1/l2 students after pruning and fine-tuning (stage ``fine-tuned``); ``method`` keeps one."""
    if table.empty:
        return table
    if method is not None:
        check_choice("method", method, METHODS)
    keep = (((table["method"] == "exhaustive") & (table["stage"] == "distilled"))
            | ((table["method"] == "group_lasso") & (table["stage"] == "fine-tuned")))
    if method is not None:
        keep &= table["method"] == method
    return table[keep]


def _check_metric_cost(table: pd.DataFrame, metric: str, cost: str) -> None:
    check_choice("metric", metric, METRICS)
    check_choice("cost", cost, COSTS)
    missing = [c for c in (metric, cost) if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks the column(s) {missing}; it has {sorted(table.columns)}")


def pareto_front(table: pd.DataFrame, metric: str, cost: str) -> pd.DataFrame:
    """The non-dominated rows of ``table`` for ``metric`` against ``cost``, sorted by cost.

    A row is dominated when another has cost <= and a metric at least as good (lower NLL /
    MAE, higher accuracy; :data:`METRICS`), one of the two strictly. Rows with a missing metric
    or cost are ignored; exact duplicates are both kept. ``metric`` is one of :data:`METRICS`,
    ``cost`` one of :data:`COSTS` (ValueError otherwise)."""
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be a pandas DataFrame, got {type(table).__name__}")
    _check_metric_cost(table, metric, cost)
    rows = table.dropna(subset=[metric, cost])
    if rows.empty:
        return rows
    c = rows[cost].to_numpy(dtype=float)
    v = rows[metric].to_numpy(dtype=float) * (1.0 if METRICS[metric][1] else -1.0)  # lower is better
    no_worse = (c[None, :] <= c[:, None]) & (v[None, :] <= v[:, None])  # [i, j]: j is no worse than i
    strictly = (c[None, :] < c[:, None]) | (v[None, :] < v[:, None])
    dominated = (no_worse & strictly).any(axis=1)
    front = rows[~dominated]
    return front.sort_values([cost, metric], ascending=[True, METRICS[metric][1]])


def best_student(table: pd.DataFrame, metric: str) -> pd.Series | None:
    """The search candidate (:func:`search_candidates`) with the best ``metric``, or None."""
    check_choice("metric", metric, METRICS)
    rows = search_candidates(table)
    if rows.empty or metric not in rows:
        return None
    rows = rows.dropna(subset=[metric])
    if rows.empty:
        return None
    return rows.loc[rows[metric].idxmin() if METRICS[metric][1] else rows[metric].idxmax()]


def base_student(table: pd.DataFrame, target: str) -> pd.Series | None:
    """The exhaustive student with the teacher's architecture (K1 = K2 = 1) for ``target``, or None."""
    if table.empty:
        return None
    rows = table[(table["method"] == "exhaustive") & (table["is_base"].astype(bool)) & (table["target"] == target)]
    return rows.iloc[0] if len(rows) else None


NO_COMPARABLE = "no comparable exhaustive student"


def group_vs_exhaustive(candidates: pd.DataFrame, metric: str, cost: str) -> pd.DataFrame:
    """Each group l1/l2 student of ``candidates`` against the exhaustive students, one row each:
    ``student``, ``cost``, ``metric``, ``compared_with`` (``"equal or lower cost"`` /
    ``"higher cost only"`` / ``"none"``), ``reference`` (the best exhaustive metric it is
    compared with) and ``verdict``:

    * with exhaustive students of equal or lower ``cost``: ``"better"`` if its ``metric`` is
      strictly better than the best of them, else ``"not better"``;
    * cheaper than every exhaustive student: ``"better"`` only if its metric is strictly better
      than that of *every* exhaustive student (all of which cost more: it dominates the grid);
      otherwise it is a different trade-off, not a loss, and its verdict is
      :data:`NO_COMPARABLE` (``"no comparable exhaustive student"``); likewise when there are no
      exhaustive students at all.

    Students lacking the metric or the cost are left out."""
    _check_metric_cost(candidates, metric, cost)
    lower = METRICS[metric][1]
    ex = candidates[candidates["method"] == "exhaustive"].dropna(subset=[metric, cost])
    group = candidates[candidates["method"] == "group_lasso"].dropna(subset=[metric, cost])

    def best(values: pd.Series) -> float:
        return float(values.min() if lower else values.max())

    def beats(value: float, reference: float) -> bool:
        return bool(value < reference if lower else value > reference)

    out = []
    for _, row in group.iterrows():
        value = float(row[metric])
        cheaper = ex[ex[cost] <= row[cost]][metric]
        if len(cheaper):
            reference = best(cheaper)
            compared, verdict = "equal or lower cost", "better" if beats(value, reference) else "not better"
        elif len(ex):
            reference = best(ex[metric])
            compared, verdict = "higher cost only", "better" if beats(value, reference) else NO_COMPARABLE
        else:
            reference, compared, verdict = math.nan, "none", NO_COMPARABLE
        out.append({"student": row.get("student", ""), "cost": float(row[cost]), "metric": value,
                    "compared_with": compared, "reference": reference, "verdict": verdict})
    return pd.DataFrame(out, columns=["student", "cost", "metric", "compared_with", "reference", "verdict"])


def group_beats_exhaustive(candidates: pd.DataFrame, metric: str, cost: str) -> str:
    """"k of n": how many of the n comparable group l1/l2 students beat the exhaustive search at
    their ``cost`` (:func:`group_vs_exhaustive`: strictly better ``metric`` than every exhaustive
    student of equal or lower cost, or, for a student cheaper than all of them, than every
    exhaustive student). Students with no comparable exhaustive student (cheaper than all of
    them and not better) are not counted in n but named after it, e.g.
    ``"2 of 3 (1 more: no comparable exhaustive student)"``."""
    verdicts = group_vs_exhaustive(candidates, metric, cost)["verdict"]
    wins = int((verdicts == "better").sum())
    odd = int((verdicts == NO_COMPARABLE).sum())
    text = f"{wins} of {len(verdicts) - odd}"
    return text + (f" ({odd} more: {NO_COMPARABLE})" if odd else "")


def frontier_table(table: pd.DataFrame, metric: str, cost: str) -> pd.DataFrame:
    """The Pareto frontier of each search method (and of both together) for ``metric`` vs
    ``cost``: columns ``front`` (``exhaustive``/``group_lasso``/``both``), the student, its
    architecture, cost and metric."""
    check_choice("metric", metric, METRICS)
    check_choice("cost", cost, COSTS)
    cands = search_candidates(table)
    if cands.empty:
        return pd.DataFrame(columns=["model", "front", "student", "architecture", cost, metric])
    cands = metric_rows(cands, metric)
    parts = []
    for model, rows in cands.groupby("model"):
        for front, sub in (("exhaustive", rows[rows["method"] == "exhaustive"]),
                           ("group_lasso", rows[rows["method"] == "group_lasso"]), ("both", rows)):
            f = pareto_front(sub, metric, cost)
            parts.append(f.assign(front=front)[["model", "front", "student", "architecture", cost, metric]])
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
