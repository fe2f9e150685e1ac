"""Notebook 01 (Table 1) as an :class:`~gped_kit.experiments.frame.Experiment`: its summary, the lines its
checks print and its rows of the README's claims table."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

import pandas as pd

from ..frame import SCALED_CHAIN, Experiment, Summary, chain_seconds, read_chains
from ..paper import teacher_caption
from ..store import ResultsStore
from ..verdicts import MODELS, Claim, compare, link, number, read_table, seeds_of, verdict
from .analysis import TABLE1, TABLE1_PROFILES, experiment1_table
from .settings import PROFILES, Experiment1Settings
from .tasks import experiment1_tasks

#: The notebook's models (its parameter ``models``).
MODELS_RUN = ["fcnn", "cnn_mnist", "cnn_cifar10"]


def experiment1_summary(experiment: Experiment, store: ResultsStore, settings: Experiment1Settings, *,
                        models: Sequence[str] = tuple(MODELS_RUN), profile: str = "default", seed: int = 0,
                        device: str = "auto", data_root: str | None = None, executor: str = "local",
                        recompute: bool = False, progress: bool = True) -> Summary:
    """Table 1 (paper Section 4.2): Experiment 1's chains (:func:`~.tasks.experiment1_tasks`) run, reused or
    (``executor="stored"``) read back; ``run`` is the :class:`~gped_kit.experiments.chains.ChainGrid`. Tables:
    ``table1`` (:func:`~.analysis.experiment1_table` for ``models``) and ``run_time``
    (:func:`~gped_kit.experiments.frame.chain_seconds`)."""
    tasks = experiment1_tasks(models, settings, seed=seed, device=device, data_root=data_root)
    grid, missing = read_chains(tasks, store, executor, recompute, progress, settings.chains_per_batch)
    if grid is None:
        return Summary(experiment, profile, settings, None, {}, missing)
    table1 = experiment1_table(grid.table)
    table1 = table1[table1["model"].isin(models)]
    return Summary(experiment, profile, settings, grid, {"table1": table1, "run_time": chain_seconds(grid)}, missing)


def _tasks(settings: Experiment1Settings, *, seed: int, device: str, data_root: str | None,
           models: Sequence[str]) -> list:
    return experiment1_tasks(models, settings, seed=seed, device=device, data_root=data_root)


def _lines(settings: Experiment1Settings, absent: Collection[str]) -> list[str]:
    return ["every MNIST cell completed: True", "every cell ran or reported missing data: True",
            *(["Not on this machine: data set 'cifar10'"] if "cifar10" in absent else [])]


# ----------------------------------------------------------------------------- the README's rows
def table1_gap(figures: Path) -> Claim | None:
    """Rule: the student's NLL is above its teacher's (a positive gap) by at most twice the paper's gap."""
    name = TABLE1.format(profile="default")
    t = read_table(figures, f"{name}.csv")
    if t is None:
        return None
    t = t[t["model"].isin(list(MODELS))].set_index("model")
    gaps = {m: t.loc[m, "student_nll"] - t.loc[m, "teacher_nll"] for m in t.index}
    paper = {m: t.loc[m, "student_nll_paper"] - t.loc[m, "teacher_nll_paper"] for m in t.index}
    hits = sum(0 < gaps[m] <= 2 * paper[m] for m in t.index)
    seeds = min(seeds_of(t.loc[m]) for m in t.index)
    return Claim("Table 1: a student distilled online stays close to its teacher (NLL gap > 0, at most 2× the paper's)",
                 verdict(hits, len(t)),
                 ", ".join(f"{MODELS[m]} +{number(gaps[m])}" for m in MODELS if m in gaps) + f" ({seeds} seeds)",
                 ", ".join(f"{MODELS[m]} +{number(paper[m])}" for m in MODELS if m in paper),
                 link(f"{name}.md", "Table 1") + ", notebook 01")


def table1_minutes_per_seed(figures: Path, profile: str, models: list[str]) -> float | None:
    """The chains' measured computing time of one seed of ``profile``, every model in ``models``
    together, in minutes: per model, its chains' seconds (all seeds, as notebook 01's per-profile
    table gives them from the store entries) over its seeds, summed; None where that table or a
    model's time is missing."""
    t = read_table(figures, f"{TABLE1_PROFILES}.csv")
    if t is None or "seconds" not in t:
        return None
    rows = t[(t["profile"] == profile) & t["model"].isin(models)].set_index("model")
    if set(rows.index) != set(models) or rows["seconds"].isna().any() or (rows["seeds"] < 1).any():
        return None
    return float((rows["seconds"] / rows["seeds"]).sum()) / 60


def table1_values(figures: Path, profile: str, label: str) -> Claim | None:
    """Rule: teacher NLL, student NLL and entropy MAE each within 10% of the paper's, two-sided
    (:func:`~gped_kit.experiments.verdicts.within`); cells more than 10% below the paper's are counted
    apart as better than the paper's, with the students' update interval beside the paper's as the reason."""
    name = TABLE1.format(profile=profile)
    t = read_table(figures, f"{name}.csv")
    if t is None:
        return None
    t = t[t["model"].isin(list(MODELS))].set_index("model")
    metrics = ("teacher_nll", "student_nll", "entropy_mae")
    outcome = {(m, k): compare(float(t.loc[m, k]), float(t.loc[m, f"{k}_paper"]))
               for m in MODELS if m in t.index for k in metrics}
    within_n = sum(o == "within" for o in outcome.values())
    better = [cell for cell, o in outcome.items() if o == "better"]
    n = len(t) * len(metrics)
    names = {"teacher_nll": "teacher", "student_nll": "student", "entropy_mae": "entropy MAE"}

    def value(m: str, k: str) -> str:
        std = t.loc[m, f"{k}_std"] if f"{k}_std" in t else float("nan")
        return number(t.loc[m, k], 4) + ("" if pd.isna(std) else f" ± {number(std, 4)}")

    ours = "; ".join(f"{MODELS[m]}: " + ", ".join(f"{names[k]} {value(m, k)}" for k in metrics) for m in MODELS
                     if m in t.index)
    seeds = min(seeds_of(t.loc[m]) for m in t.index)
    paper = "; ".join(f"{MODELS[m]}: " + ", ".join(f"{t.loc[m, f'{k}_paper']:g}" for k in metrics) for m in MODELS
                      if m in t.index)
    judged = verdict(within_n, n) + (f" ({within_n} of {n} within 10%" if within_n < n else "")
    if better:
        ours_h, paper_h = PROFILES[profile], PROFILES["paper"]
        judged += (f"; {len(better)} better than the paper's: "
                   + ", ".join(f"{MODELS[m]} {names[k]}" for m, k in better)
                   + f"; its students are updated every {ours_h.predictive_thinning} / {ours_h.entropy_thinning} "
                   f"steps, the paper's every {paper_h.predictive_thinning} / {paper_h.entropy_thinning}")
    judged += ")" if within_n < n else ""
    per_model = {MODELS[m]: seeds_of(t.loc[m]) for m in MODELS if m in t.index}
    seeds_text = (f"{seeds} seed{'s' * (seeds > 1)}" if len(set(per_model.values())) <= 1 else
                  "seeds: " + ", ".join(f"{m} {n}" for m, n in per_model.items()))
    minutes = table1_minutes_per_seed(figures, profile, list(t.index))
    if minutes is not None:
        seeds_text += f"; {minutes:.1f} min a seed for {' and '.join(MODELS[m] for m in MODELS if m in t.index)}"
    return Claim(f"Table 1 within 10% of the paper's values: {label}", judged, f"{ours} ({seeds_text})",
                 paper + " (T = 10^6)", link(f"{name}.md", "table") + ", notebook 01")


def readme_rows(figures: Path) -> list[Claim]:
    """Notebook 01's rows: the gap, then the values of the default and the ``cpu30`` profiles."""
    rows = [table1_gap(figures),
            table1_values(figures, "default", f"the default profile ({teacher_caption(PROFILES['default'])})"),
            table1_values(figures, "cpu30", f"`profile=\"cpu30\"` ({teacher_caption(PROFILES['cpu30'])})")]
    return [r for r in rows if r is not None]


EXPERIMENT = Experiment(
    "01_experiment1", PROFILES, _tasks, parameters={"models": MODELS_RUN}, summary=experiment1_summary,
    shown_profiles=("default", "cpu30"), scaled_paper=SCALED_CHAIN, verdicts=_lines, readme_rows=readme_rows)
