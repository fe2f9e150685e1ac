"""Experiment 4's numbers read against the paper and the teacher: our ``downstream`` table beside the
paper's Tables 2-4 and 8-16 (:func:`experiment4_comparison`), the paper's claims counted cell by cell
(:data:`CLAIMS`, :func:`experiment4_claim_cells`, :func:`experiment4_claims`,
:func:`experiment4_claim_groups`), the teacher ensemble's own quality beside every student's
(:func:`experiment4_teacher_lines`) and Figure 15's students (:func:`figure15_students`).

Nothing here computes a stored result."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from ...baselines.endd import ENDD_TEMPERATURE, heated_label, is_heated
from .. import paper_tables
from ..claims import (
    AGREE,
    AGREEMENT_COUNTS,
    DISAGREE,
    NO_EVIDENCE,
    NOT_SEPARABLE,
    agreement,
    agreement_text,
    compare,
    count_text,
    seed_counts_text,
    seed_spread,
    winner,
)
from ..verdicts import separable, unskilled
from .settings import STUDENT_SIZES

#: The EnD2 the claims use (tau = 1) and the one shown beside it (the training temperature tau = 2.5).
ENDD_MAIN = "EnD2"
ENDD_HEATED = heated_label(ENDD_MAIN, ENDD_TEMPERATURE)


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
    if kind not in _EXP4_KEYS:
        raise ValueError(f"kind={kind!r} is not known; allowed: {sorted(_EXP4_KEYS)}")
    paper = {"in_distribution": paper_tables.experiment4_in_distribution, "ood": paper_tables.experiment4_ood,
             "ndcg": paper_tables.experiment4_ndcg}[kind]()
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
    extra = ["ood_masked"] if kind == "ood" else []  # ours only: the paper does not say
    ours = ours.reindex(columns=keys + extra + cols)  # a key absent from downstream (e.g. no OOD set ran) is NaN
    for key in keys:  # object keys, so that empty or all-NaN key columns still match the paper's strings
        ours[key] = ours[key].astype(object)
    for c in cols:
        ours[c] = pd.to_numeric(ours[c], errors="coerce").astype(float)
    paper = paper[keys + cols + ["table"]].rename(columns={c: f"{c}_paper" for c in cols})
    ours_part = ours.merge(paper, on=keys, how="left").sort_values(keys + extra).assign(source="ours")
    ours_keys = pd.MultiIndex.from_frame(ours[keys]) if len(ours) else pd.MultiIndex.from_tuples([], names=keys)
    paper_only = paper[~pd.MultiIndex.from_frame(paper[keys]).isin(ours_keys)]
    paper_only = paper_only.assign(**{c: float("nan") for c in cols + extra}, source="paper only")
    columns = keys + extra + cols + [f"{c}_paper" for c in cols] + ["table", "source"]
    parts = [part[columns] for part in (ours_part, paper_only) if len(part)]
    if not parts:
        return pd.DataFrame(columns=columns)
    return pd.concat(parts, ignore_index=True)


#: The paper's Experiment 4 claims: per metric, the keys of a cell besides (model, estimator,
#: student), whether lower is better, and the paper's words (a pooled share for AUROC and nDCG).
CLAIMS: dict[str, tuple[tuple[str, ...], bool, str]] = {
    "nll": ((), True, "GPED better in every setting (Tables 2, 8-10)"),
    "entropy_mae": ((), True, "GPED better in every setting"),
    "auroc": (("ood_dataset", "uncertainty"), False,
              "GPED better in 75% of cases (MNIST and CIFAR-10 pooled; Tables 3, 11-13)"),
    "ndcg@20": (("uncertainty",), False, "GPED better in 91% of settings (MNIST and CIFAR-10 pooled; Tables 4, 14-16)"),
}
#: Data sets that are downloads (CIFAR-10 and paper 003's OOD sets; set-up installs only MNIST and
#: Fashion-MNIST; docs/data.md says how to get them): a paper cell on one of them without a run of ours says so.
NOT_OBTAINABLE = {"cifar10": "CIFAR-10", "kmnist": "KMNIST", "notmnist": "notMNIST", "tinyimagenet": "TinyImageNet",
                  "lsun": "LSUN", "svhn": "SVHN"}
#: Printed names of the data sets.
SET_NAMES = {**NOT_OBTAINABLE, "mnist": "MNIST", "fashion_mnist": "Fashion-MNIST"}
#: Columns of :func:`experiment4_claim_cells`.
CLAIM_CELL_COLUMNS = ("metric", "model", "estimator", "student", "ood_dataset", "ood_inputs", "uncertainty", "versus",
                      "GPED", "EnD2", "ours", "seeds", "ours_by_seed", "seed_stable", "margin", "margin_spread",
                      "GPED_paper", "EnD2_paper", "paper", "table", "comparison", "note")


def _ood_inputs(df: pd.DataFrame) -> pd.Series:
    if "ood_masked" not in df:
        return pd.Series(None, index=df.index, dtype=object)
    return df["ood_masked"].map(lambda m: None if pd.isna(m) else ("masked" if bool(m) else "whole")).astype(object)


def _claim_rows(downstream: pd.DataFrame, metric: str, endd: str) -> pd.DataFrame:
    """Our rows of one claim, GPED and ``endd``, with the cell keys filled in (None where a key
    does not apply), ``ood_inputs`` for AUROC and ``seed`` (0 without a ``seed`` column)."""
    df = downstream[(downstream["metric"] == metric) & downstream["method"].isin(["GPED", endd])].copy()
    for key in ("estimator", "student", "ood_dataset", "uncertainty"):
        if key not in df:
            df[key] = None
    df["ood_inputs"] = _ood_inputs(df) if metric == "auroc" else None
    if metric != "auroc":
        df["ood_dataset"] = None
    if metric in ("nll", "entropy_mae"):
        df["uncertainty"] = None
    df["seed"] = df["seed"].astype(int) if "seed" in df else 0
    df["method"] = df["method"].replace({endd: "EnD2"})
    for key in _CELL_KEYS:
        df[key] = df[key].astype(object).where(df[key].notna(), None)
    return df


def _per_seed_cells(rows: pd.DataFrame, lower: bool) -> pd.DataFrame:
    """One row per (cell, seed) where both GPED and EnD2 have a value and both students learnt something
    (neither's ``skill`` below :data:`~gped_kit.core.targets.SKILL_FLOOR` or not stored,
    :func:`~gped_kit.experiments.verdicts.unskilled`; rows without the column are not stored): the keys (filled,
    :func:`_fill`), ``seed``, ``GPED``, ``EnD2``, the winner ``ours`` and GPED's ``margin`` (:func:`_margin`). The
    (cell, seed) pairs left out for such a student are in the frame's ``attrs["no_evidence"]`` (a DataFrame of
    keys)."""
    empty = pd.DataFrame(columns=[*_CELL_KEYS, "seed", "GPED", "EnD2", "ours", "margin"])
    if rows.empty:
        return empty
    filled = _fill(rows, _CELL_KEYS)
    per_seed = filled.pivot_table(index=[*_CELL_KEYS, "seed"], columns="method", values="value").reset_index()
    if not {"GPED", "EnD2"} <= set(per_seed.columns):
        return empty
    per_seed = per_seed.dropna(subset=["GPED", "EnD2"])
    per_seed.columns.name = None
    # below the floor or not stored (NaN, or no column: evaluations made before chains reported skill): no evidence
    skill = filled["skill"] if "skill" in filled else pd.Series(float("nan"), index=filled.index)
    low = filled[skill.map(unskilled)][[*_CELL_KEYS, "seed"]].drop_duplicates()
    flag = per_seed.merge(low.assign(_low=True), on=[*_CELL_KEYS, "seed"], how="left")["_low"].notna()
    left_out = per_seed.loc[flag.to_numpy(), [*_CELL_KEYS, "seed"]]
    per_seed = per_seed.loc[~flag.to_numpy()]
    per_seed = per_seed.assign(ours=[winner(g, e, lower) for g, e in zip(per_seed["GPED"], per_seed["EnD2"])],
                               margin=_margin(per_seed["GPED"], per_seed["EnD2"], lower))
    per_seed.attrs["no_evidence"] = left_out.reset_index(drop=True)
    return per_seed


def _margin(gped: pd.Series, endd: pd.Series, lower: bool) -> pd.Series:
    """GPED's lead over EnD2 in a cell, positive where GPED wins (the claim's direction): EnD2 - GPED where lower
    is better (NLL, entropy MAE), GPED - EnD2 where higher is (AUROC, nDCG)."""
    return (endd - gped if lower else gped - endd).astype(float)


def _spread(margins: pd.Series) -> float:
    """The standard deviation of a cell's margins over its seeds (NaN with fewer than two: no spread known)."""
    return float(margins.std(ddof=1)) if margins.notna().sum() > 1 else math.nan


def cell_separable(cells: pd.DataFrame) -> pd.Series:
    """Per row of :func:`experiment4_claim_cells`, whether the seeds tell its winner: the ``margin`` (mean over
    seeds) at least its standard deviation over the seeds (``margin_spread``;
    :func:`~gped_kit.experiments.verdicts.separable`: always with one seed). True for a row without a margin (no
    run of ours, or no evidence), which other labels leave out."""
    return pd.Series([separable(float(m), float(sd)) if pd.notna(m) else True
                      for m, sd in zip(cells["margin"], cells["margin_spread"])], index=cells.index, dtype=bool)


_CELL_KEYS = ("model", "estimator", "student", "ood_dataset", "ood_inputs", "uncertainty")
_PAPER_KEYS = ("model", "estimator", "student", "ood_dataset", "uncertainty")


def _blank(value: Any) -> Any:
    """None for a missing value (None, NaN, ""), else the value (pandas may store the None as NaN)."""
    if value is None or (isinstance(value, float) and pd.isna(value)) or value == "":
        return None
    return value


def _fill(df: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Key columns as strings with "" for None, so that merges and group-bys match missing keys."""
    return df.assign(**{k: df[k].astype(object).map(lambda v: "" if _blank(v) is None else str(v)) for k in keys})


def _note(row: Mapping[str, Any]) -> str:
    comparison = row["comparison"]
    if comparison == "ours only":
        ood = _blank(row.get("ood_dataset"))
        if ood is not None:
            return f"{SET_NAMES.get(ood, ood)}: not one of the paper's OOD sets"
        return "the paper prints no such cell"
    if comparison == "paper only":
        dataset = paper_tables.DATASET_OF.get(row["model"], "")
        ood = _blank(row.get("ood_dataset")) or ""
        missing = dataset if dataset in NOT_OBTAINABLE else ood
        if missing in NOT_OBTAINABLE:
            return f"no run of ours: needs {NOT_OBTAINABLE[missing]} under the data root (a download: docs/data.md)"
        return "no run of ours for this cell"
    if comparison == "paper tie":
        return "the paper prints equal values: neither wins"
    if comparison == NO_EVIDENCE:
        return "a GPED or EnD2 student below the skill floor in every seed: it learnt nothing measurable"
    if comparison == NOT_SEPARABLE:
        return (f"GPED's margin {row['margin']:+.4f} is within its spread over the seeds ({row['margin_spread']:.4f}): "
                "the seeds cannot tell who wins")
    return ""


def experiment4_claim_cells(downstream: pd.DataFrame, endd: str = ENDD_MAIN) -> pd.DataFrame:
    """Every cell of the paper's Experiment 4 claims, our winner beside the paper's (issue 27).

    One row per (``metric``, model, estimator, student[, OOD set, OOD inputs], uncertainty): the
    claim metrics of :data:`CLAIMS` (NLL and entropy MAE, Tables 2, 8-10; AUROC per OOD set,
    whole or masked inputs and uncertainty, Tables 3, 11-13; nDCG@20 per uncertainty, Tables 4,
    14-16). ``GPED`` / ``EnD2``: our values (mean over seeds), EnD2 being method ``endd``
    (``"EnD2"``, tau = 1, or ``"EnD2 (tau = 2.5)"``; ``versus`` names it); ``ours``: the winner of those
    means (``"GPED"``, ``"EnD2"``, ``"tie"``); ``seeds``, ``ours_by_seed`` (the winner per seed, seed
    order) and ``seed_stable``; ``margin``: GPED's lead over EnD2 (mean over seeds; positive where GPED wins: EnD2 -
    GPED for NLL and entropy MAE, GPED - EnD2 for AUROC and nDCG) and ``margin_spread``, its standard deviation over
    the seeds (NaN with one seed); ``GPED_paper`` / ``EnD2_paper`` / ``paper`` / ``table``: the paper's
    values and winner in that cell (:func:`~gped_kit.experiments.paper_tables.experiment4_outcomes`;
    the paper does not say whether its OOD inputs were masked, so both of ours meet its cell);
    ``comparison``: ``agree`` / ``disagree``; ``not separable`` where it would be either but the margin is smaller
    than its spread over the seeds (:func:`cell_separable`, :func:`~gped_kit.experiments.verdicts.separable`: the
    seeds cannot tell the winner, so it is neither agreement nor disagreement, never counted); ``paper tie``
    (equal printed values: not counted);
    ``ours only`` (e.g. Fashion-MNIST, which the paper did not use) or ``paper only`` (KMNIST,
    notMNIST and CIFAR-10 are not obtainable here), with the reason in ``note``; ``no evidence`` where every
    seed of our cell has a GPED or EnD2 student below the skill floor (a seed with one is left out of the
    means). Our rows first, then the paper's cells we have no run for."""
    parts = []
    paper_all = paper_tables.experiment4_outcomes()
    for metric, (_, lower, _) in CLAIMS.items():
        df = _claim_rows(downstream, metric, endd) if len(downstream) and "metric" in downstream else pd.DataFrame()
        paper = _fill(paper_all[paper_all["metric"] == metric], _PAPER_KEYS)
        paper = paper.rename(columns={"GPED": "GPED_paper", "EnD2": "EnD2_paper", "winner": "paper"})
        ours = pd.DataFrame(columns=[*_CELL_KEYS, "GPED", "EnD2", "ours", "seeds", "ours_by_seed", "seed_stable",
                                     "margin", "margin_spread"])
        per_seed = _per_seed_cells(df, lower)
        if not per_seed.empty:
            grouped = per_seed.groupby(list(_CELL_KEYS), sort=True)
            means = grouped[["GPED", "EnD2", "margin"]].mean().reset_index()
            means["margin_spread"] = grouped["margin"].agg(_spread).to_numpy()
            means["ours"] = [winner(g, e, lower) for g, e in zip(means["GPED"], means["EnD2"])]
            ours = means.merge(seed_spread(per_seed, _CELL_KEYS), on=list(_CELL_KEYS), how="left")
        unskilled = per_seed.attrs.get("no_evidence", pd.DataFrame(columns=list(_CELL_KEYS)))
        seen_ours = set(map(tuple, ours[list(_CELL_KEYS)].to_numpy().tolist()))
        lost = unskilled[[tuple(k) not in seen_ours for k in unskilled[list(_CELL_KEYS)].to_numpy().tolist()]]
        if len(lost):  # every seed of the cell rests on a student below the skill floor: no evidence
            ours = pd.concat([ours, lost[list(_CELL_KEYS)].drop_duplicates().assign(ours=NO_EVIDENCE)],
                             ignore_index=True)
        merged = ours.merge(paper[[*_PAPER_KEYS, "GPED_paper", "EnD2_paper", "paper", "table"]],
                            on=list(_PAPER_KEYS), how="left")
        seen = set(map(tuple, ours[list(_PAPER_KEYS)].to_numpy().tolist()))
        only = paper[[tuple(k) not in seen for k in paper[list(_PAPER_KEYS)].to_numpy().tolist()]]
        only = only.assign(ood_inputs="")[[*_CELL_KEYS, "GPED_paper", "EnD2_paper", "paper", "table"]]
        part = pd.concat([merged, only], ignore_index=True) if len(only) else merged
        parts.append(part.assign(metric=metric))
    out = pd.concat([p for p in parts if len(p)], ignore_index=True) if any(len(p) for p in parts) else \
        pd.DataFrame(columns=list(CLAIM_CELL_COLUMNS))
    for key in (*_CELL_KEYS, "ours", "paper", "table"):
        out[key] = out[key].astype(object).map(_blank)
    out = out.astype({"margin": float, "margin_spread": float})
    out["comparison"] = [NO_EVIDENCE if o == NO_EVIDENCE else _judge(compare(o, p), near)
                         for o, p, near in zip(out["ours"], out["paper"], ~cell_separable(out))]
    out["versus"] = endd
    out["note"] = [_note(r) for r in out.to_dict("records")]
    return out.reindex(columns=list(CLAIM_CELL_COLUMNS)).reset_index(drop=True)


def _judge(comparison: str, near: bool) -> str:
    """A cell's comparison: :data:`~gped_kit.experiments.claims.NOT_SEPARABLE` for an agreement or disagreement
    the seeds cannot tell (``near``), else ``comparison`` (a cell the paper lacks stays ``ours only``)."""
    return NOT_SEPARABLE if near and comparison in (AGREE, DISAGREE) else comparison


def _claim_parts(cells: pd.DataFrame) -> list[tuple[str, str, str | None, pd.DataFrame]]:
    """(metric, claim name, kind of OOD inputs, cells) per claim row: AUROC once per kind of OOD
    inputs (whole, masked) when ours has them, each with the paper's cells we have no run for."""
    parts = []
    for metric, (_, lower, _) in CLAIMS.items():
        mine = cells[cells["metric"] == metric]
        name = f"GPED {'lower' if lower else 'higher'} {metric} than EnD2"
        kinds = sorted(set(mine["ood_inputs"].dropna()), key=["whole", "masked"].index) if metric == "auroc" else []
        if kinds:
            for kind in kinds:
                part = mine[(mine["ood_inputs"] == kind) | mine["ours"].isna()]
                parts.append((metric, f"{name} (OOD inputs {kind})", kind, part))
        else:
            parts.append((metric, name, None, mine))
    return parts


def _paper_datasets(cells: pd.DataFrame) -> set[str]:
    models = set(cells.loc[cells["ours"].notna(), "model"])
    return {paper_tables.DATASET_OF.get(m, "") for m in models} or {"mnist"}


def experiment4_claims(downstream: pd.DataFrame, endd: str = ENDD_MAIN, beside: str | None = ENDD_HEATED
                       ) -> pd.DataFrame:
    """The paper's Experiment 4 claims on our numbers, counted cell by cell against the paper's own cells.

    One row per claim (:data:`CLAIMS`; AUROC once per kind of OOD input, whole and masked, when
    both were evaluated): ``ours``, "k of n" of our cells judged (:func:`experiment4_claim_cells`, means
    over seeds) that GPED wins against ``endd``, the cells left out named after it ("6 of 7 (1 not separable)":
    a cell whose margin is within its spread over the seeds, or "(1 no evidence)": a student below the skill
    floor; :func:`_count_judged`), its k and n as ``gped_cells`` and ``judged_cells`` and the cells it leaves out
    as ``ours_not_separable`` and ``ours_no_evidence``, and ``fraction`` = k / n;
    ``paper``, "j of m" of the paper's cells on the in-distribution data sets we ran (e.g. "20 of 32 (MNIST)"
    for AUROC: the pooled 75% includes CIFAR-10); ``agree``, "agree in a of c cells compared" over the cells both
    have (none for AUROC while our only OOD set is Fashion-MNIST), with the cells not separable and no evidence
    named (:func:`~gped_kit.experiments.claims.agreement_text`), and its counts as columns
    (:data:`~gped_kit.experiments.claims.AGREEMENT_COUNTS`, what readers judge by); ``seeds``, the count per seed
    over our cells with a winner, separable or not ("6 of 8 in 3 of 3 seeds", or its range and the per-seed counts);
    ``unstable_cells``, our cells
    whose winner differs between seeds; ``paper_statement``, the paper's words. ``beside`` (default
    ``"EnD2 (tau = 2.5)"``; None: none) repeats ``ours`` and ``agree`` against that EnD2 in
    ``ours_beside`` / ``agree_beside`` when ``downstream`` has it.

    Which EnD2 the claims use: tau = 1 (alpha = exp(raw)), the convention of Malinin et al. (who
    anneal the temperature down to 1 and evaluate there) and the one the paper's numbers imply
    (see the module docstring); the paper only fixes the *training* temperature (Appendix A.4)."""
    columns = ["claim", "ours", "gped_cells", "judged_cells", "ours_not_separable", "ours_no_evidence", "fraction",
               "paper", "agree", *AGREEMENT_COUNTS,
               "seeds", "unstable_cells", "paper_statement", "versus", "ours_beside", "agree_beside", "beside"]
    if downstream.empty or "metric" not in downstream:
        return pd.DataFrame(columns=columns)
    cells = experiment4_claim_cells(downstream, endd)
    has_beside = beside is not None and beside in set(downstream["method"])
    other = {name: part for _, name, _, part in _claim_parts(experiment4_claim_cells(downstream, beside))} \
        if has_beside else {}
    datasets = _paper_datasets(cells)
    rows = []
    for metric, name, kind, part in _claim_parts(cells):
        mine = part[part["ours"].notna()]
        if mine.empty:
            continue
        k, n, near, none = _judged_counts(mine)
        won = int((mine["ours"] != NO_EVIDENCE).sum())  # the cells with a winner of ours, separable or not
        every = cells[cells["metric"] == metric]  # the paper's cells of this claim, whichever of our rows met them
        paper = every[every["paper"].notna() & every["model"].map(lambda m: paper_tables.DATASET_OF.get(m) in datasets)]
        paper = paper.astype({k: str for k in _PAPER_KEYS}).drop_duplicates(list(_PAPER_KEYS))
        per_seed = _per_seed_cells(_claim_rows(downstream, metric, endd), CLAIMS[metric][1])
        if kind is not None:
            per_seed = per_seed[per_seed["ood_inputs"] == kind]
        seeds = {int(seed): int((g["ours"] == "GPED").sum()) for seed, g in per_seed.groupby("seed", sort=True)}
        row = {"claim": name, "ours": _count_judged(mine), "gped_cells": k, "judged_cells": n,
               "ours_not_separable": near, "ours_no_evidence": none,
               "fraction": k / n if n else math.nan,
               "paper": f"{count_text((paper['paper'] == 'GPED').sum(), len(paper))} "
                        f"({', '.join(SET_NAMES.get(d, d) for d in sorted(datasets))})",
               **agreement(part), "seeds": seed_counts_text(seeds, won),
               "unstable_cells": int((~mine["seed_stable"].astype(bool)).sum()),
               "paper_statement": CLAIMS[metric][2], "versus": endd, "ours_beside": None, "agree_beside": None,
               "beside": beside if has_beside else None}
        if name in other:
            row["ours_beside"] = _count_judged(other[name][other[name]["ours"].notna()])
            row["agree_beside"] = agreement_text(other[name])
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def _judged(mine: pd.DataFrame) -> pd.DataFrame:
    """Our cells of a claim that are judged: a winner, not :data:`NO_EVIDENCE` (a student below the skill floor),
    and separable over the seeds (:func:`cell_separable`)."""
    return mine[(mine["ours"] != NO_EVIDENCE) & cell_separable(mine)]


def _judged_counts(mine: pd.DataFrame) -> tuple[int, int, int, int]:
    """(k, n, not separable, no evidence) of our cells of a claim: n judged (:func:`_judged`; a cell that is no
    evidence or not separable is counted for neither method), k of them won by GPED, and the cells left out."""
    judged = _judged(mine)
    none = int((mine["ours"] == NO_EVIDENCE).sum())
    return int((judged["ours"] == "GPED").sum()), len(judged), len(mine) - len(judged) - none, none


def _count_judged(mine: pd.DataFrame) -> str:
    """"k of n" of our judged cells GPED wins (:func:`_judged_counts`), the cells left out named after it ("6 of 7
    (1 not separable)", "5 of 6 (1 not separable; 1 no evidence)"); where none is judged, the word for why:
    :data:`NO_EVIDENCE` where any cell is no evidence, else :data:`NOT_SEPARABLE`."""
    k, n, near, none = _judged_counts(mine)
    if not n:
        return (NO_EVIDENCE if none else NOT_SEPARABLE) + (f" ({near} {NOT_SEPARABLE}; {none} {NO_EVIDENCE})"
                                                           if near and none else "")
    left_out = ([f"{near} {NOT_SEPARABLE}"] if near else []) + ([f"{none} {NO_EVIDENCE}"] if none else [])
    return count_text(k, n) + (f" ({'; '.join(left_out)})" if left_out else "")


def _set_name(dataset: str, inputs: Any = None) -> str:
    name = SET_NAMES.get(dataset, dataset)
    return f"{name} ({inputs})" if _blank(inputs) is not None else name


def experiment4_claim_groups(downstream: pd.DataFrame, endd: str = ENDD_MAIN) -> pd.DataFrame:
    """:func:`experiment4_claim_cells` counted per (metric, model, uncertainty): ``ours`` ("k of n" of
    our cells GPED wins, with ``ours_sets``, the OOD sets and inputs they cover) beside ``paper``
    ("j of m" of the paper's cells, ``paper_sets``), e.g. FCNN total uncertainty: ours on
    Fashion-MNIST against the paper's 8 of 8 on KMNIST and notMNIST. ``agree`` as in
    :func:`experiment4_claims`. Every paper group appears, also those we have no run for."""
    cells = experiment4_claim_cells(downstream, endd)
    keyed = cells.assign(uncertainty=cells["uncertainty"].fillna("-"))
    rows = []
    for (metric, model, kind), part in keyed.groupby(["metric", "model", "uncertainty"], sort=False):
        mine = part[part["ours"].notna()]
        paper = part[part["paper"].notna()].drop_duplicates(["estimator", "student", "ood_dataset"])
        sets_ours = sorted({_set_name(d, i) for d, i in zip(mine["ood_dataset"], mine["ood_inputs"])
                            if _blank(d) is not None}) if metric == "auroc" else []
        sets_paper = sorted({_set_name(d) for d in paper["ood_dataset"].dropna()}) if metric == "auroc" else []
        rows.append({"metric": metric, "model": model, "uncertainty": None if kind == "-" else kind,
                     "ours": _count_judged(mine) if len(mine) else "no run",
                     "ours_sets": ", ".join(sets_ours),
                     "paper": count_text((paper["paper"] == "GPED").sum(), len(paper)) if len(paper) else "no cell",
                     "paper_sets": ", ".join(sets_paper), "agree": agreement_text(part), "versus": endd})
    return pd.DataFrame(rows, columns=["metric", "model", "uncertainty", "ours", "ours_sets", "paper", "paper_sets",
                                       "agree", "versus"])


#: Metrics on which the teacher ensemble has a value of its own (:func:`experiment4_teacher_lines`).
TEACHER_METRICS = ("nll", "accuracy", "auroc", "mu_mean")


def experiment4_teacher_lines(downstream: pd.DataFrame) -> pd.DataFrame:
    """The teacher ensemble's own quality next to every student's (issue 27): one row per student
    value of :data:`TEACHER_METRICS` (test NLL and accuracy, OOD AUROC per set, inputs and
    uncertainty, mean model uncertainty on the test and OOD sets) with ``teacher``, the ensemble's
    value in the same chain and cell, and ``minus_teacher`` = value - teacher (a student's AUROC
    above its teacher's is an OOD signal the teacher does not have; NLL minus teacher is the NLL
    gap). A student's mean |MU - MU_teacher| is the ``mu_mae`` rows of ``downstream``."""
    columns = ["model", "method", "estimator", "student", "metric", "uncertainty", "ood_dataset", "ood_inputs",
               "value", "teacher", "minus_teacher"]
    if downstream.empty or "metric" not in downstream:
        return pd.DataFrame(columns=columns)
    df = downstream[downstream["metric"].isin(TEACHER_METRICS)].copy()
    for key in ("uncertainty", "ood_dataset"):
        if key not in df:
            df[key] = None
    df["ood_inputs"] = _ood_inputs(df)
    chain = [c for c in ("run_key", "cell", "seed") if c in df]
    keys = ["model", "metric", "uncertainty", "ood_dataset", "ood_inputs", *chain]
    df = _fill(df, ["uncertainty", "ood_dataset", "ood_inputs"])
    teacher = df[df["method"] == "Ensemble"].groupby(keys, sort=False)["value"].mean().rename("teacher")
    out = df[df["method"] != "Ensemble"].merge(teacher.reset_index(), on=keys, how="left")
    out["minus_teacher"] = out["value"] - out["teacher"]
    for key in ("uncertainty", "ood_dataset", "ood_inputs"):
        out[key] = out[key].astype(object).map(_blank)
    return out.reindex(columns=columns + [c for c in chain if c not in columns]).reset_index(drop=True)


def figure15_students(per_input: pd.DataFrame) -> dict[str, torch.Tensor]:
    """Figure 15's students from one model's ``data_uncertainty`` rows: each largest-width student's
    E[H] per test input, named ``"<method>-<estimator> (largest)"`` (EnD2 at tau = 1, as its claims)."""
    columns = sorted(c for c in per_input.columns if c.endswith(STUDENT_SIZES[1]) and not is_heated(c))
    return {c.replace(f"-{STUDENT_SIZES[1]}", " (largest)"): torch.tensor(per_input[c].to_numpy(dtype=float))
            for c in columns}
