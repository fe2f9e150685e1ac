"""Who wins each cell of the paper's Experiment 4 tables, and the Experiment 2 trends per setting, derived from
the printed numbers (:mod:`~gped_kit.experiments.paper_tables.gped`)."""

from __future__ import annotations

import pandas as pd

from ..claims import trend_cells, winner
from .gped import (
    _LEVEL_ORDER,
    _TABLE_ORDER,
    DATASET_OF,
    EXPERIMENT2_TABLES,
    experiment2_long,
    experiment4_in_distribution,
    experiment4_ndcg,
    experiment4_ood,
)

#: Per Experiment 4 metric: whether a lower value is better.
LOWER_IS_BETTER = {"nll": True, "entropy_mae": True, "auroc": False, "ndcg@20": False}
#: Columns of :func:`experiment4_outcomes`.
OUTCOME_COLUMNS = ("metric", "model", "dataset", "ood_dataset", "uncertainty", "estimator", "student", "GPED",
                   "EnD2", "Ensemble", "winner", "table")


def experiment4_outcomes() -> pd.DataFrame:
    """Who wins each printed cell of Experiment 4 (Tables 2-4 and 8-16), GPED or EnD^2.

    One row per (metric, model, estimator, student[, OOD set], uncertainty) with both methods'
    printed values: ``metric`` is ``"nll"`` or ``"entropy_mae"`` (Tables 2, 8-10; lower is better),
    ``"auroc"`` (Tables 3, 11-13) or ``"ndcg@20"`` (Tables 4, 14-16; higher is better);
    ``ood_dataset`` is set for AUROC only, ``uncertainty`` for AUROC and nDCG (None elsewhere);
    ``GPED``, ``EnD2`` and (where printed) ``Ensemble`` are the values, ``winner`` is ``"GPED"``,
    ``"EnD2"`` or ``"tie"`` (equal printed values, e.g. CNN-CIFAR10 / TinyImageNet knowledge
    uncertainty in Table 11: 0.773 and 0.773), ``table`` the source. 12 + 12 in-distribution cells,
    48 OOD cells and 24 nDCG cells; MNIST alone (``dataset == "mnist"``): 8 + 8, 32 and 16.

    Counted on MNIST, GPED wins the OOD AUROC in 20 of 32 cells (FCNN total uncertainty 8/8, FCNN
    knowledge 5/8, CNN total 5/8, CNN knowledge 2/8): the text's "75% of cases" pools MNIST with
    CIFAR-10 (15 wins and a tie in 16); every NLL and entropy-MAE cell; and nDCG@20 in 15 of 16
    MNIST cells (all but FCNN knowledge in Table 4). See :func:`experiment4_outcome_counts`."""
    parts = []
    ind = experiment4_in_distribution()
    ind = ind[ind["method"].isin(["GPED", "EnD2", "Ensemble"])]
    for metric in ("nll", "entropy_mae"):
        part = ind[ind["metric"] == metric].pivot_table(
            index=["model", "dataset", "estimator", "student", "table"], columns="method", values="value").reset_index()
        part["metric"], part["ood_dataset"], part["uncertainty"] = metric, None, None
        parts.append(part)
    ood = experiment4_ood().pivot_table(index=["model", "dataset", "ood_dataset", "uncertainty", "estimator", "student",
                                                "table"], columns="method", values="value").reset_index()
    parts.append(ood.assign(metric="auroc"))
    ndcg = experiment4_ndcg().pivot_table(index=["model", "dataset", "uncertainty", "estimator", "student", "table"],
                                          columns="method", values="value").reset_index()
    parts.append(ndcg.assign(metric="ndcg@20", ood_dataset=None))
    out = pd.concat(parts, ignore_index=True).reindex(columns=list(OUTCOME_COLUMNS))
    out["winner"] = [winner(g, e, LOWER_IS_BETTER[m]) for g, e, m in zip(out["GPED"], out["EnD2"], out["metric"])]
    for key in ("ood_dataset", "uncertainty"):
        out[key] = out[key].astype(object).where(out[key].notna(), None)
    out.columns.name = None
    order = {**_LEVEL_ORDER, "metric": {m: i for i, m in enumerate(LOWER_IS_BETTER)}, "table": _TABLE_ORDER,
             "model": {"fcnn": 0, "cnn_mnist": 1, "cnn_cifar10": 2}}
    out = out.sort_values(["metric", "table", "model", "ood_dataset", "uncertainty"], kind="stable",
                          key=lambda c: c.map(order[c.name]))
    return out.reset_index(drop=True)


def experiment4_outcome_counts(dataset: str | None = "mnist") -> pd.DataFrame:
    """:func:`experiment4_outcomes` counted per (metric, model, uncertainty): ``cells``, ``GPED``
    (wins), ``EnD2`` (wins), ``tie``, and ``gped_wins`` as text ("20 of 32"). ``dataset``: keep
    that in-distribution data set (``"mnist"``, ``"cifar10"``), or None for both."""
    df = experiment4_outcomes()
    if dataset is not None:
        if dataset not in set(DATASET_OF.values()):
            raise ValueError(f"dataset={dataset!r} is not known; allowed: {sorted(set(DATASET_OF.values()))} or None")
        df = df[df["dataset"] == dataset]
    df = df.assign(uncertainty=df["uncertainty"].fillna("-"))
    counts = pd.crosstab([df["metric"], df["model"], df["uncertainty"]], df["winner"])
    counts = counts.reindex(columns=["GPED", "EnD2", "tie"], fill_value=0)
    counts.insert(0, "cells", counts.sum(axis=1))
    counts["gped_wins"] = [f"{g} of {n}" for g, n in zip(counts["GPED"], counts["cells"])]
    counts = counts.reset_index()
    counts.columns.name = None
    return counts


def experiment2_trend_outcomes(model: str, labelled_sizes: list[int] | tuple[int, ...] | None = None,
                               mask_sizes: list[int] | tuple[int, ...] | None = None) -> pd.DataFrame:
    """The Experiment 2 trends per setting on the paper's Table 5 (``"cnn_mnist"``), 6 (``"fcnn"``)
    or 7 (``"cnn_cifar10"``): every comparison of :func:`gped_kit.experiments.claims.trend_cells`
    (teacher NLL falls with more data at each masking rate and rises with masking at each size; the
    NLL gap falls with more data at each (estimator, rate); the gap and the entropy MAE peak at a
    moderate rate at each (estimator, size); U_o <= U_s at each cell), with ``holds`` as the
    printed numbers give it. ``labelled_sizes`` / ``mask_sizes`` restrict the table to a grid first
    (e.g. ours, so that the same comparisons are made: the smallest and largest size of that grid)."""
    long = experiment2_long(model)
    if labelled_sizes is not None:
        long = long[long["labelled_size"].isin(list(labelled_sizes))]
    if mask_sizes is not None:
        long = long[long["mask_size"].isin(list(mask_sizes))]
    return trend_cells(long).assign(table=EXPERIMENT2_TABLES[model])
