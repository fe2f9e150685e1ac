"""Notebook 07's reading of the comparison, written from its stored table."""

from __future__ import annotations

import pandas as pd

from ...core.targets import SKILL_FLOOR
from ..prose import join_words
from ..verdicts import NO_EVIDENCE, unskilled
from .analysis import MU_METHODS, mu_error_split, reference_names
from .settings import SNAPSHOTS, TEACHER, ZERO_MU


def comparison_reading(table: pd.DataFrame) -> str:
    """Notebook 07's reading of the comparison from its stored table: the reference named by its
    length; per evaluation set, every method's mean |Delta MU| against the teacher beside the
    zero-MU baseline's (which methods do better than predicting no model uncertainty), the closest
    method (both among the students that beat the best constant prediction, the others being no evidence), and
    GPED's MU error split into its heads (total-entropy bias and E[H] bias, with its E[H] and the teacher's); the
    training budgets (steps, inputs seen, parameters) of GPED and Hydra."""
    names = reference_names(table)
    teacher = names.get(TEACHER, TEACHER)
    lines = [f"**Reading the comparison** (written from the stored results). The reference for MU is the "
             f"long-chain {teacher} (its online Monte Carlo means after burn-in)"
             + (f"; Hydra copies the {names[SNAPSHOTS]}." if SNAPSHOTS in names else ".")]
    split = mu_error_split(table)
    students = [m for m in MU_METHODS if m not in (TEACHER, SNAPSHOTS, ZERO_MU)]
    for eval_set, rows in split.groupby("eval_set", sort=False):
        rows = rows.set_index("method")
        if ZERO_MU not in rows.index:
            continue
        zero = rows.loc[ZERO_MU, "mu_mae_teacher"]
        present = [m for m in students if m in rows.index and pd.notna(rows.loc[m, "mu_mae_teacher"])]
        if not present:
            continue
        errors = {m: rows.loc[m, "mu_mae_teacher"] for m in present}
        lacking = _lacking(rows, present)
        skilled = [m for m in present if m not in lacking]  # only these count: the others are no evidence
        if skilled:
            judged = (f"Worse than predicting zero: {join_words(m for m in skilled if errors[m] > zero)}. "
                      f"Closest: {min(skilled, key=errors.get)}.")
        else:
            judged = f"Worse than predicting zero and closest: {NO_EVIDENCE} (no student beats the best constant)."
        listed = ", ".join(f"{m} {errors[m]:.3f}" for m in present)
        lines += ["", f"*{eval_set}*: mean |ΔMU| against the teacher: {listed}; predicting zero MU: {zero:.3f}. "
                      f"{judged} "
                      + _skill_sentence(rows, present)]
        if "GPED" in rows.index and pd.notna(rows.loc["GPED", "total_bias_teacher"]):
            g = rows.loc["GPED"]
            lines.append(f"GPED's MU bias {g['mu_bias_teacher']:+.3f} = its predictive head's total-entropy bias "
                         f"{g['total_bias_teacher']:+.3f} (mean H[E p] {g['total_mean']:.3f} against the teacher's "
                         f"{g['teacher_total_mean']:.3f}) minus its entropy head's bias {g['data_bias_teacher']:+.3f} "
                         f"(mean E[H] {g['data_mean']:.3f} against {g['teacher_data_mean']:.3f}).")
    lines += _budget_sentences(table)
    return "\n".join(lines)


def _lacking(rows: pd.DataFrame, present: list[str]) -> list[str]:
    """The ``present`` students that are no evidence (:func:`~gped_kit.experiments.verdicts.unskilled`: their
    ``skill`` below the floor, or not stored)."""
    skill = rows["skill"] if "skill" in rows else pd.Series(float("nan"), index=rows.index)
    return [m for m in present if unskilled(skill.get(m, float("nan")))]


def _skill_sentence(rows: pd.DataFrame, present: list[str]) -> str:
    """Which of the ``present`` students are not known to beat the best constant prediction of the teacher's
    expectations (their ``skill``, :func:`~.compute.method_skill`), and whose MU is no better than the best
    constant MU (``mu_skill``)."""
    lacking = _lacking(rows, present)
    text = (f"No evidence (skill over the best constant below {SKILL_FLOOR} or not stored): {join_words(lacking)}."
            if lacking else f"Every one beats the best constant prediction (skill >= {SKILL_FLOOR}).")
    if "mu_skill" in rows:
        constant = [m for m in present if m not in lacking and rows.loc[m, "mu_skill"] < SKILL_FLOOR]
        text += f" MU no better than the best constant MU: {join_words(constant)}."
    return text


def _budget_sentences(table: pd.DataFrame) -> list[str]:
    if "train_steps" not in table:
        return []
    costs = table.drop_duplicates("method").set_index("method")
    parts = []
    for method in ("GPED", "GPED (every step)", "Hydra"):
        if method in costs.index and pd.notna(costs.loc[method, "train_steps"]):
            row = costs.loc[method]
            params = f", {int(row['params']):,} parameters" if "params" in row and pd.notna(row["params"]) else ""
            parts.append(f"{method}: {int(row['train_steps']):,} steps of {int(row['train_batch_size'])} inputs "
                         f"({int(row['inputs_seen']):,} seen{params}; targets: {row['targets']})")
    if not parts:
        return []
    return ["", "Training budgets: " + "; ".join(parts) + "."]
