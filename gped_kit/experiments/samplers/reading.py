"""Notebook 10's reading of the sampler study, written from its stored histories."""

from __future__ import annotations

import pandas as pd

from ...core.targets import SKILL_FLOOR
from .study import study_winners


def sampler_reading(history: pd.DataFrame) -> str:
    """Notebook 10's reading: per quantity, the candidate with the lowest mean over seeds, the next one,
    both with their spread, and whether the gap exceeds it (:func:`~.analysis.study_winners`)."""
    winners = study_winners(history)
    lines = ["**Result of the sampler study** (written from the stored results).", ""]
    for w in winners.itertuples():
        if w.runner_up is None:
            lines.append(f"- {w.quantity}: only {w.winner} ran ({w.winner_mean:.4f}).")
            continue
        spread = (lambda m, s: f"{m:.4f}" if pd.isna(s) else f"{m:.4f} ± {s:.4f}")
        verdict = {"yes": "the gap exceeds the seed spread: the order holds over these seeds",
                   "no": "the gap is within the seed spread: no winner is established",
                   "one seed": "one seed, so no spread to judge the gap by: no winner is established",
                   "no evidence": "no evidence: a student of one of them is not known to beat the best constant "
                                  f"prediction (its skill below {SKILL_FLOOR}, or not stored), so the order may be "
                                  "one a constant also gives"}[w.separated]
        lines.append(f"- {w.quantity}: lowest {w.winner} {spread(w.winner_mean, w.winner_std)}, next {w.runner_up} "
                     f"{spread(w.runner_up_mean, w.runner_up_std)} over {w.seeds} seed(s) (lowest per seed: "
                     f"{w.seed_winners}); {verdict}.")
    return "\n".join(lines)
