"""Notebook 02's reading of Experiment 2, written from the grid's stored table."""

from __future__ import annotations

import pandas as pd

from ..prose import heading, join_words, model_name
from .analysis import experiment2_trend_comparison


def experiment2_reading(results: pd.DataFrame, profile: str | None = None) -> str:
    """Notebook 02's reading of Experiment 2 from the grid's per-student table: per model, each trend
    on ours and on the paper's Tables 5-6 in the same cells, the agreement, the count over seeds
    (:func:`~.analysis.experiment2_trend_comparison`), and which trends hold
    in a majority of our comparisons."""
    table = experiment2_trend_comparison(results)
    if table.empty:
        return heading("Experiment 2", profile) + "\n\nNo stored result: nothing to read."
    lines = [heading("Reading Experiment 2", profile)]  # each model's list follows a blank line
    for model, rows in table.groupby("model", sort=False):
        lines += ["", f"*{model_name(model)}*"]
        for r in rows.itertuples():
            unstable = f", {r.unstable_cells} comparison(s) differ between seeds" if r.unstable_cells else ""
            lines.append(f"- {r.trend}: ours {r.ours}, the paper {r.paper} in the same cells, {r.agree}; "
                         f"over seeds {r.seeds}{unstable}.")
        # NaN (no comparison counted) is neither; numpy's bools are not Python's True/False
        held = [r.trend for r in rows.itertuples() if pd.notna(r.holds) and bool(r.holds)]
        missed = [r.trend for r in rows.itertuples() if pd.notna(r.holds) and not bool(r.holds)]
        lines.append(f"- In a majority of our comparisons: {join_words(held)}; not: {join_words(missed)}.")
    return "\n".join(lines)
