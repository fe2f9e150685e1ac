"""Claims judged cell by cell: the kit's outcome, the paper's outcome, agree or disagree (issue 27).

A paper's pooled percentage ("GPED better in 75% of cases") hides which cells it counts; the
kit's claims are therefore compared with the paper's *per-cell* outcomes, derived from the
numbers printed in its tables (:mod:`gped_kit.experiments.paper_tables`), and every claim row
says "ours k of n; paper j of m; agree in a of c cells compared". A cell only one side has (an OOD
set the paper did not use, a data set not obtainable here) is labelled as such and never counted
as agreement. With several seeds, each count comes with its spread over the seeds.

This module holds the pieces shared by the experiments and by :mod:`~gped_kit.experiments.paper_tables`
(which imports nothing else from the kit): who wins a cell (:func:`winner`), the comparison label
of one cell (:func:`compare`), count and seed texts, and the Experiment 2 trends as one row per
comparison (:func:`trend_cells`; paper 003, Section 4.2 and Appendix B.1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from ..core.options import check_int
from .verdicts import NO_EVIDENCE, NOT_SEPARABLE, unskilled

#: Who wins a cell: GPED, EnD2, or neither (equal values).
OUTCOMES = ("GPED", "EnD2", "tie")
#: Comparison labels of one cell.
AGREE, DISAGREE, PAPER_TIE, OURS_ONLY, PAPER_ONLY = "agree", "disagree", "paper tie", "ours only", "paper only"
#: A comparison of ours whose outcome lies within the seeds' spread of it (its margin, :func:`trend_cells`, smaller
#: than the margin's standard deviation over the seeds): the seeds cannot tell whether it holds, so it is neither
#: agreement nor disagreement, never counted (:data:`~gped_kit.experiments.verdicts.NOT_SEPARABLE`). A comparison
#: that involves a student not known to beat the best constant is
#: :data:`~gped_kit.experiments.verdicts.NO_EVIDENCE`, never counted either.
COMPARISONS = (AGREE, DISAGREE, PAPER_TIE, OURS_ONLY, PAPER_ONLY, NO_EVIDENCE, NOT_SEPARABLE)


#: The seeds a profile names to get every count with its spread over three chains (issue 27):
#: ``dataclasses.replace(PROFILES["default"], seeds=THREE_SEEDS)``, or ``seeds = [0, 1, 2]`` in a
#: notebook's parameters.
THREE_SEEDS = (0, 1, 2)


def check_seeds(name: str, seeds: tuple) -> None:
    """``ValueError`` unless ``seeds`` is a non-empty tuple of distinct integers >= 0 (each checked by
    :func:`~gped_kit.core.options.check_int`)."""
    if not isinstance(seeds, tuple) or not seeds:
        raise ValueError(f"{name}={seeds!r}: give one or more distinct integer seeds >= 0, e.g. (0,) or (0, 1, 2)")
    for i, seed in enumerate(seeds):
        check_int(f"{name}[{i}]", seed, 0)
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{name}={seeds!r}: the seeds must be distinct")


def winner(gped: float, endd: float, lower_is_better: bool) -> str | None:
    """``"GPED"``, ``"EnD2"`` or ``"tie"`` (equal values) for one cell; None when either value is
    missing. ``lower_is_better``: NLL, entropy MAE (True); AUROC, nDCG (False)."""
    if gped is None or endd is None or pd.isna(gped) or pd.isna(endd):
        return None
    if gped == endd:
        return "tie"
    return "GPED" if (gped < endd) == lower_is_better else "EnD2"


def compare(ours: object, paper: object) -> str:
    """The comparison label of one cell from its two outcomes (None/NaN: that side has no value):
    ``agree`` / ``disagree`` when both have one (a tie of ours counts as disagreeing with a win),
    ``paper tie`` when the paper prints equal values (neither method wins: not counted),
    ``ours only`` / ``paper only`` otherwise."""
    has_ours, has_paper = _present(ours), _present(paper)
    if has_ours and has_paper:
        if paper == "tie":
            return PAPER_TIE
        return AGREE if ours == paper else DISAGREE
    return OURS_ONLY if has_ours else PAPER_ONLY


def _present(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def count_text(k: int, n: int) -> str:
    """``"k of n"``."""
    return f"{int(k)} of {int(n)}"


#: The counts behind :func:`agreement_text`, stored beside it as columns so that a reader sums them and never parses
#: the text: cells that agree, cells compared (agree or disagree), and cells left out as not separable or as no
#: evidence.
AGREEMENT_COUNTS = ("cells_agree", "cells_compared", "cells_not_separable", "cells_no_evidence")


def agreement_counts(cells: pd.DataFrame) -> dict[str, int]:
    """:data:`AGREEMENT_COUNTS` of a per-cell table with a ``comparison`` column (paper ties are not compared)."""
    comparison = cells["comparison"]
    return {"cells_agree": int((comparison == AGREE).sum()),
            "cells_compared": int(comparison.isin([AGREE, DISAGREE]).sum()),
            "cells_not_separable": int((comparison == NOT_SEPARABLE).sum()),
            "cells_no_evidence": int((comparison == NO_EVIDENCE).sum())}


def agreement_words(cells_agree: int, cells_compared: int, cells_not_separable: int = 0,
                    cells_no_evidence: int = 0) -> str:
    """``"agree in a of c cells compared"``, followed by ``"; k not separable"`` when outcomes of ours lie within
    the seeds' spread and ``"; n no evidence"`` when comparisons rest on a student below the skill floor (neither
    compared), or ``"no cell in common"`` when no cell is compared or left out so: the words for
    :func:`agreement_counts`."""
    near, unskilled = cells_not_separable, cells_no_evidence
    if not cells_compared and not unskilled and not near:
        return "no cell in common"
    text = f"agree in {count_text(cells_agree, cells_compared)} cells compared"
    return text + (f"; {near} not separable" if near else "") + (f"; {unskilled} no evidence" if unskilled else "")


def agreement_text(cells: pd.DataFrame) -> str:
    """:func:`agreement_words` of a per-cell table with a ``comparison`` column (paper ties are not compared)."""
    return agreement_words(**agreement_counts(cells))


def agreement(cells: pd.DataFrame) -> dict[str, object]:
    """A table row's agreement columns: ``agree`` (:func:`agreement_text`) and its counts
    (:data:`AGREEMENT_COUNTS`)."""
    found = agreement_counts(cells)
    return {"agree": agreement_words(**found), **found}


def seed_counts_text(counts: Mapping[int, int], n: int) -> str:
    """A count over seeds: ``"6 of 8 in 3 of 3 seeds"`` when every seed gives the same count, else
    ``"5-6 of 8 over 3 seeds (seed 0: 6, seed 1: 5, seed 2: 6)"``; ``"6 of 8 (one seed)"`` for one."""
    if not counts:
        return f"0 of {n} (no seed)"
    values = list(counts.values())
    if len(values) == 1:
        return f"{values[0]} of {n} (one seed)"
    if len(set(values)) == 1:
        return f"{values[0]} of {n} in {len(values)} of {len(values)} seeds"
    per_seed = ", ".join(f"seed {s}: {k}" for s, k in counts.items())
    return f"{min(values)}-{max(values)} of {n} over {len(values)} seeds ({per_seed})"


def seed_spread(per_seed: pd.DataFrame, keys: Sequence[str], outcome: str = "ours") -> pd.DataFrame:
    """Per cell (``keys``), how its outcome varies over seeds: ``seeds`` (how many have one),
    ``ours_by_seed`` (e.g. ``"GPED, GPED, EnD2"`` in seed order) and ``seed_stable`` (the same in
    every seed). ``per_seed`` has one row per (cell, seed) with columns ``keys``, ``seed`` and
    ``outcome``; rows without an outcome are ignored."""
    df = per_seed[per_seed[outcome].map(_present)].sort_values("seed", kind="stable")
    if df.empty:
        return pd.DataFrame(columns=[*keys, "seeds", "ours_by_seed", "seed_stable"])
    grouped = df.groupby(list(keys), dropna=False, sort=False)[outcome]
    out = grouped.agg(seeds="size", ours_by_seed=lambda s: ", ".join(map(str, s)),
                      seed_stable=lambda s: s.nunique() == 1)
    return out.reset_index()


# ------------------------------------------------------------------------------ Experiment 2's trends
#: The trends of Experiment 2 the paper reports (Section 4.2, Appendix B.1), in order, with its words.
TRENDS: tuple[tuple[str, str], ...] = (
    ("teacher NLL falls with more labelled data", "yes, for every masking rate"),
    ("teacher NLL rises with masking", "yes, steeply"),
    ("NLL gap falls with more labelled data", "yes, for every masking rate"),
    ("NLL gap peaks at moderate masking", "yes (hardest at r = 0.29-0.51)"),
    ("entropy MAE peaks at moderate masking", "yes, the same trend"),
    ("U_o at least as good as U_s", "almost always"),
)
#: Columns of :func:`trend_cells`; ``setting`` names the comparison and is the key to join on.
TREND_CELL_COLUMNS = ("model", "trend", "setting", "estimator", "labelled_size", "mask_size", "metric", "holds",
                      "margin", "no_evidence")


def trend_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """Every comparison behind the Experiment 2 trends (:data:`TRENDS`), one row each, on a table
    with one row per (model, labelled_size, mask_size, estimator) and the columns ``teacher_nll``,
    ``nll_gap`` and ``entropy_mae`` (our :func:`~gped_kit.experiments.experiment2.experiment2_cells`,
    or the paper's :func:`~gped_kit.experiments.paper_tables.experiment2_long`).

    Per model, with N the sizes and m the mask sizes present: the teacher NLL falls from the
    smallest to the largest N at each m and rises (not strictly) with m at each N; per estimator
    the NLL gap falls from the smallest to the largest N at each m; the NLL gap and the entropy
    MAE peak at a moderate m at each (estimator, N) (the largest value at neither the smallest nor
    the largest m; needs three m); U_o is at least as good as U_s (<=) at each (N, m) for the gap
    and the MAE. A comparison with a missing value (a cell not run, or a chain that did not finish) does not hold
    and is no evidence: ``no_evidence``, never counted against the trend. ``margin``: how far the values are from the
    rule's boundary, positive where it holds (falls: first - last; rises: the smallest step up; peaks: the
    largest inner value less the larger end value; U_o against U_s: U_s - U_o; NaN with a missing value), so the
    seeds' spread of it says whether they can tell the outcome. ``setting`` names what is
    compared (e.g. ``"m=15, N 10000 -> 60000"``): two tables' rows are the same comparison when
    (model, trend, setting) match. ``no_evidence``: a value the comparison reads is missing, or a cell it reads has a
    student that is no
    evidence (:func:`~gped_kit.experiments.verdicts.unskilled`: ``<metric>_skill`` below
    :data:`~gped_kit.core.targets.SKILL_FLOOR` or not stored, where the table has that column: ours, not the
    paper's). Columns: :data:`TREND_CELL_COLUMNS`."""
    rows: list[dict] = []
    for model, df in cells.groupby("model", sort=True):
        teacher = df.groupby(["labelled_size", "mask_size"])["teacher_nll"].first().unstack()  # N x m
        sizes, masks = list(teacher.index), list(teacher.columns)
        names = [t for t, _ in TRENDS]
        weak = {metric: {(e, n, m) for e, n, m, k in zip(df["estimator"], df["labelled_size"], df["mask_size"],
                                                          df[f"{metric}_skill"]) if unskilled(k)}
                for metric in ("nll_gap", "entropy_mae") if f"{metric}_skill" in df}

        def add(trend: str, setting: str, holds: object, margin: float, estimator: str | None = None,
                n: int | None = None, m: int | None = None, metric: str | None = None,
                reads: Sequence[tuple] = ()) -> None:
            rows.append({"model": model, "trend": trend, "setting": setting, "estimator": estimator,
                         "labelled_size": n, "mask_size": m, "metric": metric, "holds": bool(holds),
                         "margin": float(margin),
                         "no_evidence": math.isnan(float(margin))
                         or any(cell in weak.get(metric, ()) for cell in reads)})

        if len(sizes) > 1:
            for m in masks:
                margin = teacher.loc[sizes[0], m] - teacher.loc[sizes[-1], m]
                add(names[0], f"m={m}, N {sizes[0]} -> {sizes[-1]}", margin > 0, margin, m=m, metric="teacher_nll")
        if len(masks) > 1:
            for n in sizes:
                steps = teacher.loc[n].diff().iloc[1:]
                add(names[1], f"N={n}, m {' -> '.join(map(str, masks))}", teacher.loc[n].is_monotonic_increasing,
                    steps.min() if steps.notna().all() else math.nan, n=n, metric="teacher_nll")
        gap = df.pivot_table(index=["estimator", "labelled_size"], columns="mask_size", values="nll_gap")
        if len(sizes) > 1:
            for e in sorted(set(df["estimator"])):
                if (e, sizes[0]) not in gap.index:
                    continue
                for m in masks:
                    last = gap.loc[(e, sizes[-1]), m] if (e, sizes[-1]) in gap.index and m in gap else math.nan
                    first = gap.loc[(e, sizes[0]), m] if m in gap else math.nan
                    add(names[2], f"{e}, m={m}, N {sizes[0]} -> {sizes[-1]}", last < first, first - last, estimator=e,
                        m=m, metric="nll_gap", reads=[(e, sizes[0], m), (e, sizes[-1], m)])
        mae = df.pivot_table(index=["estimator", "labelled_size"], columns="mask_size", values="entropy_mae")
        for name, table, metric in ((names[3], gap, "nll_gap"), (names[4], mae, "entropy_mae")):
            if len(masks) <= 2:
                continue
            for e, n in table.index:
                values = table.loc[(e, n)]
                if values.notna().all():
                    margin = values[masks[1:-1]].max() - max(values[masks[0]], values[masks[-1]])
                    setting = f"{e}, N={n}, m {' -> '.join(map(str, masks))}"  # the masks it compares
                    add(name, setting, values.idxmax() not in (masks[0], masks[-1]), margin, estimator=e, n=n,
                        metric=metric, reads=[(e, n, m) for m in masks])
        if {"U_o", "U_s"} <= set(df["estimator"]):
            both = df.pivot_table(index=["labelled_size", "mask_size"], columns="estimator",
                                  values=["nll_gap", "entropy_mae"])
            for metric in ("nll_gap", "entropy_mae"):
                if metric not in both:
                    continue
                pair = both[metric].dropna()
                for (n, m), row in pair.iterrows():
                    add(names[5], f"N={n}, m={m}, {metric}", row["U_o"] <= row["U_s"], row["U_s"] - row["U_o"], n=n,
                        m=m, metric=metric, reads=[("U_o", n, m), ("U_s", n, m)])
    if not rows:
        return pd.DataFrame(columns=list(TREND_CELL_COLUMNS))
    out = pd.DataFrame(rows, columns=list(TREND_CELL_COLUMNS)).astype({"labelled_size": "Int64", "mask_size": "Int64"})
    order = {t: i for i, (t, _) in enumerate(TRENDS)}
    return out.sort_values(["model", "trend"], key=lambda c: c.map(order) if c.name == "trend" else c,
                           kind="stable").reset_index(drop=True)
