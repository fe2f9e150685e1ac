"""The notebooks' reading sentences, written from the stored tables so that no number in their prose is typed.

Each function takes what a notebook already holds (the tables it reads back from the results
store) and returns Markdown: :func:`experiment4_reading` (notebook 06: every claim counted cell by
cell against the paper's, where GPED loses, the teacher's own AUROC beside the students', EnD2 at
both evaluation temperatures), :func:`experiment2_reading` (notebook 02: each trend on ours and on
the paper's tables in the same cells, over seeds), :func:`comparison_reading` (notebook 07: the
zero-MU baseline, each method's MU error split into its heads, the training budgets, the reference
named by its length) and :func:`sampler_reading` (notebook 10: the lowest candidate per quantity and
whether the seeds separate it). A notebook shows them with ``display(Markdown(...))``.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from ..experiments import comparison as C
from ..experiments import experiment4 as E4
from ..experiments import experiment12 as E12
from ..experiments import samplers as S

#: Printed names of the kit's models and student sizes.
MODEL_NAMES = {"fcnn": "FCNN", "cnn_mnist": "CNN-MNIST", "cnn_cifar10": "CNN-CIFAR10"}
SIZE_NAMES = {"base": "base", "largest_width_multiplier": "largest"}
METRIC_NAMES = {"nll": "NLL", "entropy_mae": "entropy MAE", "auroc": "OOD AUROC", "ndcg@20": "nDCG@20"}


def _model(name: str) -> str:
    return MODEL_NAMES.get(name, name)


def _join(items: Iterable[str], empty: str = "none") -> str:
    items = list(items)
    if not items:
        return empty
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _range(low: float, high: float, fmt: str = ".3f") -> str:
    """``"0.640–0.724"``, or one value when both are the same at that precision."""
    a, b = format(low, fmt), format(high, fmt)
    return a if a == b else f"{a}–{b}"


def _signed_range(low: float, high: float) -> str:
    a, b = format(low, "+.3f"), format(high, "+.3f")
    return a if a == b else f"{a} to {b}"


def _heading(title: str, profile: str | None) -> str:
    where = f" ({profile!r} profile" if profile else " ("
    return f"**{title}**{where}{', ' if profile else ''}written from the stored results)."


def _setting(row: pd.Series) -> str:
    return f"{_model(row['model'])} {row['estimator']} {SIZE_NAMES.get(row['student'], row['student'])}"


# ------------------------------------------------------------------------------ notebook 06
def experiment4_reading(downstream: pd.DataFrame, profile: str | None = None) -> str:
    """Notebook 06's reading of Experiment 4, from its ``downstream`` table (one or more seeds).

    One line per claim (:func:`~gped_kit.experiments.experiment4.experiment4_claims`: ours, the
    paper's count in its own cells, agreement, the seeds, and the count against EnD2 at T = 2.5);
    the cells where GPED loses in distribution, with both values; the OOD counts per model and
    uncertainty beside the paper's (:func:`~gped_kit.experiments.experiment4.experiment4_claim_groups`);
    how often the teacher ensemble's own AUROC is above each student's
    (:func:`~gped_kit.experiments.experiment4.experiment4_teacher_lines`) and EnD2's NLL at both
    evaluation temperatures."""
    if downstream.empty:
        return _heading("Experiment 4", profile) + "\n\nNo stored result: nothing to read."
    lines = [_heading("Reading Experiment 4", profile), ""]
    claims = E4.experiment4_claims(downstream)
    for c in claims.itertuples():
        beside = (f"; against {c.beside.replace('EnD2', 'EnD²')}: {c.ours_beside}"
                  if isinstance(c.beside, str) and isinstance(c.ours_beside, str) else "")
        claim = c.claim.replace("EnD2", "EnD²")
        for key, name in METRIC_NAMES.items():
            claim = claim.replace(f" {key} ", f" {name} ")
        lines.append(f"- {claim}: ours {c.ours} cells; the paper {c.paper} in its own cells, "
                     f"{c.agree}; over seeds {c.seeds}"
                     + (f", {c.unstable_cells} cell(s) change winner between seeds" if c.unstable_cells else "")
                     + f"{beside}. (The paper's words: {c.paper_statement}.)")
    cells = E4.experiment4_claim_cells(downstream)
    lost = cells[cells["metric"].isin(["nll", "entropy_mae"]) & (cells["ours"] == "EnD2")]
    if lost.empty:
        lines += ["", "In distribution GPED has the lower NLL and entropy MAE in every cell we ran."]
    else:
        parts = [f"{METRIC_NAMES[r.metric]} in {_setting(pd.Series(r._asdict()))} ({r.GPED:.3f} against EnD²'s "
                 f"{r.EnD2:.3f}; the paper: {r.GPED_paper:.3f} against {r.EnD2_paper:.3f})"
                 for r in lost.itertuples()]
        lines += ["", f"GPED loses in distribution in {len(lost)} cell(s): {_join(parts)}."]
    groups = E4.experiment4_claim_groups(downstream)
    ood = groups[(groups["metric"] == "auroc") & (groups["ours"] != "no run")]
    if len(ood):
        parts = [f"{_model(g.model)} {g.uncertainty}: ours {g.ours} ({g.ours_sets}), the paper {g.paper} "
                 f"({g.paper_sets})" for g in ood.itertuples()]
        lines += ["", "OOD detection per model and uncertainty, GPED's wins: " + "; ".join(parts) + "."]
        if not cells.loc[cells["metric"] == "auroc", "comparison"].isin(["agree", "disagree"]).any():
            lines.append("No OOD cell is common to ours and the paper's (different OOD sets), so these counts "
                         "compare directions, not cells.")
    lines += _teacher_sentences(downstream)
    lines += _temperature_sentences(downstream)
    return "\n".join(lines)


def _teacher_sentences(downstream: pd.DataFrame) -> list[str]:
    teacher = E4.experiment4_teacher_lines(downstream)
    auroc = teacher[teacher["metric"] == "auroc"]
    if auroc.empty:
        return []
    out = []
    for method, part in auroc.groupby("method", sort=False):
        above = int((part["minus_teacher"] < 0).sum())
        out.append(f"{method.replace('EnD2', 'EnD²')}'s in {above} of {len(part)} cells (student minus teacher "
                   f"{_signed_range(part['minus_teacher'].min(), part['minus_teacher'].max())})")
    ens = auroc.drop_duplicates(["model", "uncertainty", "ood_dataset", "ood_inputs", "teacher"])
    ranges = "; ".join(f"{_model(m)} {k} {_range(g['teacher'].min(), g['teacher'].max())}"
                       for (m, k), g in ens.groupby(["model", "uncertainty"], sort=False))
    nll = teacher[teacher["metric"] == "nll"]
    spread = _signed_range(nll["minus_teacher"].min(), nll["minus_teacher"].max()) if len(nll) else ""
    gap = (f" Its test NLL is lower than the student's in {int((nll['minus_teacher'] > 0).sum())} of {len(nll)} "
           f"student rows (student minus teacher {spread})." if len(nll) else "")
    return ["", f"The teacher ensemble's own OOD AUROC ({ranges}) is higher than {_join(out)}.{gap}"]


def _temperature_sentences(downstream: pd.DataFrame) -> list[str]:
    nll = downstream[downstream["metric"] == "nll"]
    one, heated = nll[nll["method"] == E4.ENDD_MAIN]["value"], nll[nll["method"] == E4.ENDD_HEATED]["value"]
    if one.empty or heated.empty:
        return []
    return ["", f"EnD² is evaluated at T = 1 (alpha = exp(raw), the claims) and at its training temperature "
                f"(alpha = exp(raw / 2.5)): test NLL {_range(one.min(), one.max())} at T = 1, "
                f"{_range(heated.min(), heated.max())} at T = 2.5."]


# ------------------------------------------------------------------------------ notebook 02
def experiment2_reading(results: pd.DataFrame, profile: str | None = None) -> str:
    """Notebook 02's reading of Experiment 2 from the grid's per-student table: per model, each trend
    on ours and on the paper's Tables 5-6 in the same cells, the agreement, the count over seeds
    (:func:`~gped_kit.experiments.experiment12.experiment2_trend_comparison`), and which trends hold
    in a majority of our comparisons."""
    table = E12.experiment2_trend_comparison(results)
    if table.empty:
        return _heading("Experiment 2", profile) + "\n\nNo stored result: nothing to read."
    lines = [_heading("Reading Experiment 2", profile)]  # each model's list follows a blank line
    for model, rows in table.groupby("model", sort=False):
        lines += ["", f"*{_model(model)}*"]
        for r in rows.itertuples():
            unstable = f", {r.unstable_cells} comparison(s) differ between seeds" if r.unstable_cells else ""
            lines.append(f"- {r.trend}: ours {r.ours}, the paper {r.paper} in the same cells, {r.agree}; "
                         f"over seeds {r.seeds}{unstable}.")
        held = [r.trend for r in rows.itertuples() if r.holds is True]
        missed = [r.trend for r in rows.itertuples() if r.holds is False]
        lines.append(f"- In a majority of our comparisons: {_join(held)}; not: {_join(missed)}.")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ notebook 07
def comparison_reading(table: pd.DataFrame) -> str:
    """Notebook 07's reading of the comparison from its stored table: the reference named by its
    length; per evaluation set, every method's mean |Delta MU| against the teacher beside the
    zero-MU baseline's (which methods do better than predicting no model uncertainty), the closest
    method, and GPED's MU error split into its heads (total-entropy bias and E[H] bias, with its E[H]
    and the teacher's); the training budgets (steps, inputs seen, parameters) of GPED and Hydra."""
    names = C.reference_names(table)
    teacher = names.get(C.TEACHER, C.TEACHER)
    lines = [f"**Reading the comparison** (written from the stored results). The reference for MU is the "
             f"long-chain {teacher} (its online Monte Carlo means after burn-in)"
             + (f"; Hydra copies the {names[C.SNAPSHOTS]}." if C.SNAPSHOTS in names else ".")]
    split = C.mu_error_split(table)
    students = [m for m in C.MU_METHODS if m not in (C.TEACHER, C.SNAPSHOTS, C.ZERO_MU)]
    for eval_set, rows in split.groupby("eval_set", sort=False):
        rows = rows.set_index("method")
        if C.ZERO_MU not in rows.index:
            continue
        zero = rows.loc[C.ZERO_MU, "mu_mae_teacher"]
        present = [m for m in students if m in rows.index and pd.notna(rows.loc[m, "mu_mae_teacher"])]
        if not present:
            continue
        errors = {m: rows.loc[m, "mu_mae_teacher"] for m in present}
        worse = [m for m in present if errors[m] > zero]
        best = min(present, key=errors.get)
        listed = ", ".join(f"{m} {errors[m]:.3f}" for m in present)
        lines += ["", f"*{eval_set}*: mean |ΔMU| against the teacher: {listed}; predicting zero MU: {zero:.3f}. "
                      f"Worse than predicting zero: {_join(worse)}. Closest: {best}."]
        if "GPED" in rows.index and pd.notna(rows.loc["GPED", "total_bias_teacher"]):
            g = rows.loc["GPED"]
            lines.append(f"GPED's MU bias {g['mu_bias_teacher']:+.3f} = its predictive head's total-entropy bias "
                         f"{g['total_bias_teacher']:+.3f} (mean H[E p] {g['total_mean']:.3f} against the teacher's "
                         f"{g['teacher_total_mean']:.3f}) minus its entropy head's bias {g['data_bias_teacher']:+.3f} "
                         f"(mean E[H] {g['data_mean']:.3f} against {g['teacher_data_mean']:.3f}).")
    lines += _budget_sentences(table)
    return "\n".join(lines)


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


# ------------------------------------------------------------------------------ notebook 10
def sampler_reading(history: pd.DataFrame) -> str:
    """Notebook 10's reading: per quantity, the candidate with the lowest mean over seeds, the next one,
    both with their spread, and whether the gap exceeds it (:func:`~gped_kit.experiments.samplers.study_winners`)."""
    winners = S.study_winners(history)
    lines = ["**Reading the sampler study** (written from the stored results).", ""]
    for w in winners.itertuples():
        if w.runner_up is None:
            lines.append(f"- {w.quantity}: only {w.winner} ran ({w.winner_mean:.4f}).")
            continue
        spread = (lambda m, s: f"{m:.4f}" if pd.isna(s) else f"{m:.4f} ± {s:.4f}")
        verdict = {"yes": "the gap exceeds the seed spread: the order holds over these seeds",
                   "no": "the gap is within the seed spread: no winner is established",
                   "one seed": "one seed, so no spread to judge the gap by: no winner is established"}[w.separated]
        lines.append(f"- {w.quantity}: lowest {w.winner} {spread(w.winner_mean, w.winner_std)}, next {w.runner_up} "
                     f"{spread(w.runner_up_mean, w.runner_up_std)} over {w.seeds} seed(s) (lowest per seed: "
                     f"{w.seed_winners}); {verdict}.")
    return "\n".join(lines)
