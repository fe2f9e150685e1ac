"""Notebook 06's reading of Experiment 4, written from its stored ``downstream`` table."""

from __future__ import annotations

import pandas as pd

from ...baselines.endd import ENDD_TEMPERATURE
from ..prose import METRIC_NAMES, heading, join_words, method_name, model_name, setting, signed_range, value_range
from ..verdicts import NO_EVIDENCE
from .analysis import (
    ENDD_HEATED,
    ENDD_MAIN,
    cell_separable,
    experiment4_claim_cells,
    experiment4_claim_groups,
    experiment4_claims,
    experiment4_teacher_lines,
)


def experiment4_reading(downstream: pd.DataFrame, profile: str | None = None) -> str:
    """Notebook 06's reading of Experiment 4, from its ``downstream`` table (one or more seeds).

    One line per claim (:func:`~gped_kit.experiments.experiment4.experiment4_claims`: ours, the
    paper's count in its own cells, agreement, the seeds, and the count against EnD2 at tau = 2.5);
    in distribution, GPED ahead in every cell only where every cell is judged (its students above the skill floor),
    GPED ahead and separable over the seeds, else the counts, the cells where GPED loses (with both values) and
    those the seeds cannot separate (:func:`_in_distribution_sentences`); the OOD counts per model and
    uncertainty beside the paper's (:func:`~gped_kit.experiments.experiment4.experiment4_claim_groups`);
    how often the teacher ensemble's own AUROC is above each student's
    (:func:`~gped_kit.experiments.experiment4.experiment4_teacher_lines`) and EnD2's NLL at both
    evaluation temperatures."""
    if downstream.empty:
        return heading("Experiment 4", profile) + "\n\nNo stored result: nothing to read."
    lines = [heading("Reading Experiment 4", profile), ""]
    claims = experiment4_claims(downstream)
    for c in claims.itertuples():
        beside = (f"; against {method_name(c.beside)}: {c.ours_beside}"
                  if isinstance(c.beside, str) and isinstance(c.ours_beside, str) else "")
        claim = method_name(c.claim)
        for key, name in METRIC_NAMES.items():
            claim = claim.replace(f" {key} ", f" {name} ")
        lines.append(f"- {claim}: ours {c.ours} cells; the paper {c.paper} in its own cells, "
                     f"{c.agree}; over seeds {c.seeds}"
                     + (f", {c.unstable_cells} cell(s) change winner between seeds" if c.unstable_cells else "")
                     + f"{beside}. (The paper's words: {c.paper_statement}.)")
    cells = experiment4_claim_cells(downstream)
    lines += _in_distribution_sentences(cells)
    groups = experiment4_claim_groups(downstream)
    ood = groups[(groups["metric"] == "auroc") & (groups["ours"] != "no run")]
    if len(ood):
        parts = [f"{model_name(g.model)} {g.uncertainty}: ours {g.ours} ({g.ours_sets}), the paper {g.paper} "
                 f"({g.paper_sets})" for g in ood.itertuples()]
        lines += ["", "OOD detection per model and uncertainty, GPED's wins: " + "; ".join(parts) + "."]
        if not cells.loc[cells["metric"] == "auroc", "comparison"].isin(["agree", "disagree"]).any():
            lines.append("No OOD cell is common to ours and the paper's (different OOD sets), so these counts "
                         "compare directions, not cells.")
    lines += _teacher_sentences(downstream)
    lines += _temperature_sentences(downstream)
    return "\n".join(lines)


def _in_distribution_sentences(cells: pd.DataFrame) -> list[str]:
    """GPED against EnD2 on NLL and entropy MAE (:func:`~.analysis.experiment4_claim_cells`): "every cell" only
    where every cell of ours is judged (not no evidence), separable over the seeds
    (:func:`~.analysis.cell_separable`) and GPED's; else GPED's count of the cells judged, the cells left out,
    the cells GPED loses (separable, with both values) and those the seeds cannot separate (GPED's margin and
    its spread)."""
    ours = cells[cells["metric"].isin(["nll", "entropy_mae"]) & cells["ours"].notna()]
    if ours.empty:
        return []
    none = ours["ours"] == NO_EVIDENCE
    near = ~none & ~cell_separable(ours)
    judged = ours[~none & ~near]
    ahead = int((judged["ours"] == "GPED").sum())
    if ahead == len(ours):
        return ["", "In distribution GPED has the lower NLL and entropy MAE in every cell we ran"
                + (", each separable over the seeds." if (pd.to_numeric(ours["seeds"]) > 1).all() else ".")]
    left_out = ([f"{int(near.sum())} not separable (GPED's margin within its spread over the seeds)"]
                if near.any() else []) + ([f"{int(none.sum())} no evidence (a student below the skill floor or "
                                           "stored without its skill)"] if none.any() else [])
    out = ["", f"In distribution GPED has the lower NLL or entropy MAE in {ahead} of {len(judged)} cells judged"
           + "".join(f"; {part}" for part in left_out) + "."]
    lost = judged[judged["ours"] == "EnD2"]
    if len(lost):
        parts = [f"{METRIC_NAMES[r.metric]} in {setting(pd.Series(r._asdict()))} ({r.GPED:.3f} against EnD²'s "
                 f"{r.EnD2:.3f}; the paper: {r.GPED_paper:.3f} against {r.EnD2_paper:.3f})"
                 for r in lost.itertuples()]
        out.append(f"GPED loses in distribution in {len(lost)} cell(s): {join_words(parts)}.")
    if near.any():
        parts = [f"{METRIC_NAMES[r.metric]} in {setting(pd.Series(r._asdict()))} (GPED's margin {r.margin:+.4f}, "
                 f"its spread {r.margin_spread:.4f}; winner per seed: {r.ours_by_seed})"
                 for r in ours[near].itertuples()]
        out.append(f"The seeds cannot separate {int(near.sum())} cell(s): {join_words(parts)}.")
    return out


def _teacher_sentences(downstream: pd.DataFrame) -> list[str]:
    teacher = experiment4_teacher_lines(downstream)
    auroc = teacher[teacher["metric"] == "auroc"]
    if auroc.empty:
        return []
    out = []
    for method, part in auroc.groupby("method", sort=False):
        above = int((part["minus_teacher"] < 0).sum())
        out.append(f"{method_name(method)}'s in {above} of {len(part)} cells (student minus teacher "
                   f"{signed_range(part['minus_teacher'].min(), part['minus_teacher'].max())})")
    ens = auroc.drop_duplicates(["model", "uncertainty", "ood_dataset", "ood_inputs", "teacher"])
    ranges = "; ".join(f"{model_name(m)} {k} {value_range(g['teacher'].min(), g['teacher'].max())}"
                       for (m, k), g in ens.groupby(["model", "uncertainty"], sort=False))
    nll = teacher[teacher["metric"] == "nll"]
    spread = signed_range(nll["minus_teacher"].min(), nll["minus_teacher"].max()) if len(nll) else ""
    gap = (f" Its test NLL is lower than the student's in {int((nll['minus_teacher'] > 0).sum())} of {len(nll)} "
           f"student rows (student minus teacher {spread})." if len(nll) else "")
    return ["", f"The teacher ensemble's own OOD AUROC ({ranges}) is higher than {join_words(out)}.{gap}"]


def _temperature_sentences(downstream: pd.DataFrame) -> list[str]:
    nll = downstream[downstream["metric"] == "nll"]
    one, heated = nll[nll["method"] == ENDD_MAIN]["value"], nll[nll["method"] == ENDD_HEATED]["value"]
    if one.empty or heated.empty:
        return []
    return ["", f"EnD² is evaluated at temperature τ = 1 (alpha = exp(raw), the claims) and at its training "
                f"temperature (alpha = exp(raw / 2.5)): test NLL {value_range(one.min(), one.max())} at τ = 1, "
                f"{value_range(heated.min(), heated.max())} at τ = {ENDD_TEMPERATURE:g}."]
