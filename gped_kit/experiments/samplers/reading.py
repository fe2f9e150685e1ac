"""Notebook 10's reading of the sampler study, written from its stored histories."""

from __future__ import annotations

import pandas as pd

from ...core.targets import SKILL_FLOOR
from .study import higher_is_better, study_per_seed, study_winners

#: What a winner's row adds, by quantity.
_CAVEATS = {"entropy MAE": " (each student's error against its own teacher, whose entropies differ from candidate to "
                           "candidate: the skill below compares them on one scale)"}


def sampler_reading(history: pd.DataFrame) -> str:
    """Notebook 10's reading: per quantity, the candidate with the best mean over seeds (the lowest; the highest
    for a skill), the next one, both with their spread, and whether the gap between them, seed by seed, exceeds
    its spread (:func:`~.study.study_winners`); then, where the candidates' students took different numbers of updates
    (pooled chains of T / K steps, a cyclical schedule's sampling phases), that the students' numbers are not at
    equal work."""
    winners = study_winners(history)
    lines = ["**Result of the sampler study** (written from the stored results).", ""]
    for w in winners.itertuples():
        if w.runner_up is None:
            lines.append(f"- {w.quantity}: only {w.winner} ran ({w.winner_mean:.4f}).")
            continue
        spread = (lambda m, s: f"{m:.4f}" if pd.isna(s) else f"{m:.4f} ± {s:.4f}")
        gap = spread(w.gap, w.gap_std)
        verdict = {"yes": f"the gap per seed, {gap}, is at least its spread: the order holds over these seeds",
                   "no": f"the gap per seed, {gap}, is within its spread: no winner is established",
                   "one seed": "one seed, so no spread to judge the gap by: no winner is established",
                   "no evidence": "no evidence: a student of one of them is not known to beat the best constant "
                                  f"prediction (its skill below {SKILL_FLOOR}, or not stored), so the order may be "
                                  "one a constant also gives"}[w.separated]
        best = "highest" if higher_is_better(w.quantity) else "lowest"
        lines.append(f"- {w.quantity}{_CAVEATS.get(w.quantity, '')}: {best} {w.winner} "
                     f"{spread(w.winner_mean, w.winner_std)}, next {w.runner_up} "
                     f"{spread(w.runner_up_mean, w.runner_up_std)} over {w.seeds} seed(s) ({best} per seed: "
                     f"{w.seed_winners}); {verdict}.")
    per_seed = study_per_seed(history)
    if "student updates" in per_seed:
        updates = per_seed["student updates"].groupby(level="candidate").mean()
        if updates.nunique() > 1:
            lines += ["", f"The teachers ran equal work, their students did not: the predictive students took "
                          f"{updates.min():,.0f} ({updates.idxmin()}) to {updates.max():,.0f} ({updates.idxmax()}) "
                          "updates, so their NLL and entropy MAE compare students trained for different lengths as "
                          "well as teachers."]
    return "\n".join(lines)
